package identity

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// A token is "<payload>.<mac>", both unpadded base64url: the payload is
// the compact JSON of claims, the mac HMAC-SHA256 over tokenVersion, a dot
// and the payload's base64. Nothing in the payload is secret (ids and
// times); the signature is what a server trusts. Tokens are some 150
// characters, well within a header.
const tokenVersion = "berth-token-v1"

// claims is what a token says. Roles are not in it: they are read from
// the directory at each check.
type claims struct {
	User    string `json:"u"`
	Project string `json:"p,omitempty"` // project id, for a project-scoped token
	System  bool   `json:"s,omitempty"` // system-scoped
	Issued  int64  `json:"i"`           // unix microseconds
	Expires int64  `json:"e"`           // unix microseconds
	Audit   string `json:"a"`           // random id: two tokens never look alike
}

// Errors of Issue and Verify. The HTTP API answers every one of them with
// Keystone's single 401 message: which check failed is for the log, not
// for a guesser.
var (
	ErrUnauthorized = errors.New("identity: the request you have made requires authentication")
	ErrInvalidToken = errors.New("identity: invalid token")
	ErrTokenExpired = fmt.Errorf("%w: expired", ErrInvalidToken)
)

// Service issues and verifies tokens over one directory and one signing
// key. It is safe for concurrent use.
type Service struct {
	dir     *directory
	key     []byte
	ttl     time.Duration
	region  string
	catalog []Endpoint
	now     func() time.Time
	// verified remembers accepted tokens (verified.go).
	verified verifiedTokens
}

// DefaultTokenTTL is Keystone's [token] expiration: an hour.
const DefaultTokenTTL = time.Hour

// New is a Service signing with key (see LoadSigningKey) over c.
func New(c Config, key []byte) (*Service, error) {
	if len(key) < 32 {
		return nil, fmt.Errorf("identity: signing key of %d bytes, want at least 32", len(key))
	}
	dir, err := newDirectory(c)
	if err != nil {
		return nil, err
	}
	ttl := c.TokenTTL
	if ttl <= 0 {
		ttl = DefaultTokenTTL
	}
	return &Service{dir: dir, key: append([]byte(nil), key...), ttl: ttl, region: c.Region,
		catalog: c.Endpoints, now: time.Now}, nil
}

// PasswordAuth is a password login: the user by id or by name (in the
// default domain), and the scope asked for (none: unscoped).
type PasswordAuth struct {
	UserID, UserName, Password string
	Scope                      Scope
}

// Scope is what a token is for: a project (by id or by name), the system,
// or neither (unscoped).
type Scope struct {
	ProjectID, ProjectName string
	System                 bool
}

// Token is an issued token: its string and what it stands for.
type Token struct {
	ID          string
	Credentials Credentials
	IssuedAt    time.Time
	ExpiresAt   time.Time
	AuditID     string
}

// Issue checks a password login and signs a token for its scope. A wrong
// password, an unknown user or project, and a user without a role on the
// scope are all ErrUnauthorized (wrapped with which, for the log).
func (s *Service) Issue(a PasswordAuth) (Token, error) {
	var u *user
	if a.UserID != "" {
		u = s.dir.usersByID[a.UserID]
	} else {
		u = s.dir.usersByName[a.UserName]
	}
	if !passwordMatches(u, a.Password) {
		return Token{}, fmt.Errorf("%w: wrong password or unknown user %q%s", ErrUnauthorized, a.UserName, a.UserID)
	}
	c := claims{User: u.id}
	switch {
	case a.Scope.System:
		c.System = true
	case a.Scope.ProjectID != "" || a.Scope.ProjectName != "":
		var p *project
		if a.Scope.ProjectID != "" {
			p = s.dir.projectsByID[a.Scope.ProjectID]
		} else {
			p = s.dir.projectsByName[a.Scope.ProjectName]
		}
		if p == nil {
			return Token{}, fmt.Errorf("%w: unknown project %q%s", ErrUnauthorized, a.Scope.ProjectName, a.Scope.ProjectID)
		}
		c.Project = p.id
	}
	now := s.now()
	c.Issued = now.UnixMicro()
	c.Expires = now.Add(s.ttl).UnixMicro()
	var audit [16]byte
	if _, err := rand.Read(audit[:]); err != nil {
		return Token{}, fmt.Errorf("identity: audit id: %w", err)
	}
	c.Audit = base64.RawURLEncoding.EncodeToString(audit[:])
	creds, err := s.credentials(c)
	if err != nil {
		return Token{}, fmt.Errorf("%w: %v", ErrUnauthorized, err)
	}
	id, err := s.sign(c)
	if err != nil {
		return Token{}, err
	}
	return Token{ID: id, Credentials: creds, IssuedAt: time.UnixMicro(c.Issued).UTC(),
		ExpiresAt: time.UnixMicro(c.Expires).UTC(), AuditID: c.Audit}, nil
}

// Verify checks token and returns what it stands for: the signature,
// then the expiry, then that its user and scope still exist and the user
// still has a role there. Every failure wraps ErrInvalidToken.
//
// A token accepted once is remembered (verified.go): later checks of it
// compare only its expiry with the clock, which is all that can change.
func (s *Service) Verify(token string) (Token, error) {
	if t, ok := s.verified.lookup(token); ok {
		if !s.now().Before(t.ExpiresAt) {
			s.verified.forget(token)
			return Token{}, ErrTokenExpired
		}
		return t, nil
	}
	t, err := s.verifyFully(token)
	if err != nil {
		return Token{}, err
	}
	s.verified.remember(t)
	return t, nil
}

// verifyFully is Verify without the memory: the signature, the claims,
// the expiry and the directory.
func (s *Service) verifyFully(token string) (Token, error) {
	payload, mac, ok := strings.Cut(token, ".")
	if !ok {
		return Token{}, fmt.Errorf("%w: malformed", ErrInvalidToken)
	}
	got, err := base64.RawURLEncoding.DecodeString(mac)
	if err != nil || !hmac.Equal(got, s.mac(payload)) {
		return Token{}, fmt.Errorf("%w: bad signature", ErrInvalidToken)
	}
	raw, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil {
		return Token{}, fmt.Errorf("%w: payload: %v", ErrInvalidToken, err)
	}
	var c claims
	if err := json.Unmarshal(raw, &c); err != nil {
		return Token{}, fmt.Errorf("%w: payload: %v", ErrInvalidToken, err)
	}
	if !s.now().Before(time.UnixMicro(c.Expires)) {
		return Token{}, ErrTokenExpired
	}
	creds, err := s.credentials(c)
	if err != nil {
		return Token{}, fmt.Errorf("%w: %v", ErrInvalidToken, err)
	}
	return Token{ID: token, Credentials: creds, IssuedAt: time.UnixMicro(c.Issued).UTC(),
		ExpiresAt: time.UnixMicro(c.Expires).UTC(), AuditID: c.Audit}, nil
}

// credentials resolves claims against the directory: the user and the
// scope must exist and, when scoped, the user must hold a role there.
func (s *Service) credentials(c claims) (Credentials, error) {
	u := s.dir.usersByID[c.User]
	if u == nil {
		return Credentials{}, fmt.Errorf("no user %s", c.User)
	}
	cr := Credentials{UserID: u.id, UserName: u.name}
	switch {
	case c.System:
		cr.System = true
		cr.Roles = u.systemRoles
		if len(cr.Roles) == 0 {
			return Credentials{}, fmt.Errorf("user %s has no role on the system", u.name)
		}
	case c.Project != "":
		p := s.dir.projectsByID[c.Project]
		if p == nil {
			return Credentials{}, fmt.Errorf("no project %s", c.Project)
		}
		cr.ProjectID, cr.ProjectName = p.id, p.name
		cr.Roles = u.projectRoles[p.id]
		if len(cr.Roles) == 0 {
			return Credentials{}, fmt.Errorf("user %s has no role on project %s", u.name, p.name)
		}
	}
	cr.Roles = append([]string(nil), cr.Roles...)
	return cr, nil
}

func (s *Service) sign(c claims) (string, error) {
	raw, err := json.Marshal(c)
	if err != nil {
		return "", fmt.Errorf("identity: encode token: %w", err)
	}
	payload := base64.RawURLEncoding.EncodeToString(raw)
	return payload + "." + base64.RawURLEncoding.EncodeToString(s.mac(payload)), nil
}

func (s *Service) mac(payload string) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(tokenVersion))
	m.Write([]byte{'.'})
	m.Write([]byte(payload))
	return m.Sum(nil)
}
