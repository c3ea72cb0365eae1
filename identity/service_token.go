package identity

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Service tokens are what Berth's own processes present to each other's
// internal endpoints (the scheduler's select_destinations): a token for
// the built-in principal ServiceUser, system-scoped, with the one role
// RoleService. Any process that can read the signing key from etcd can
// mint one: whoever reaches etcd can already write every record the
// scheduler would act on, so holding the key proves no more than that
// and no less (until etcd has per-role users, issue 18). The tokens are
// signed under their own domain string, so a service token is never a
// user token (it cannot call the compute API) and a user's token never
// passes for a service (a project admin cannot claim resources behind
// the API's back).
const (
	ServiceUser = "berth-service"
	RoleService = "service"

	serviceTokenVersion = "berth-service-token-v1"
	// DefaultServiceTokenTTL is a minted token's lifetime; ServiceTokens'
	// transport mints a new one when less than half of it remains.
	DefaultServiceTokenTTL = 10 * time.Minute
)

// ServiceTokens mints and checks service tokens with the deployment's
// signing key (LoadSigningKey). It is safe for concurrent use.
type ServiceTokens struct {
	key []byte
	ttl time.Duration
	now func() time.Time

	mu      sync.Mutex
	current string
	renewAt time.Time
}

// NewServiceTokens signs with key, at least 32 bytes.
func NewServiceTokens(key []byte) (*ServiceTokens, error) {
	if len(key) < signingKeyBytes {
		return nil, fmt.Errorf("identity: signing key of %d bytes, want at least %d", len(key), signingKeyBytes)
	}
	return &ServiceTokens{key: append([]byte(nil), key...), ttl: DefaultServiceTokenTTL, now: time.Now}, nil
}

// Mint returns a fresh service token, valid for the TTL.
func (s *ServiceTokens) Mint() (string, error) {
	var audit [16]byte
	if _, err := rand.Read(audit[:]); err != nil {
		return "", fmt.Errorf("identity: audit id: %w", err)
	}
	now := s.now()
	raw, err := json.Marshal(claims{User: ServiceUser, System: true, Issued: now.UnixMicro(),
		Expires: now.Add(s.ttl).UnixMicro(), Audit: base64.RawURLEncoding.EncodeToString(audit[:])})
	if err != nil {
		return "", fmt.Errorf("identity: encode service token: %w", err)
	}
	payload := base64.RawURLEncoding.EncodeToString(raw)
	return payload + "." + base64.RawURLEncoding.EncodeToString(s.mac(payload)), nil
}

// Verify checks a service token: its signature under the service domain,
// its principal and its expiry. Every failure wraps ErrInvalidToken.
func (s *ServiceTokens) Verify(token string) (Credentials, error) {
	payload, mac, ok := strings.Cut(token, ".")
	if !ok {
		return Credentials{}, fmt.Errorf("%w: malformed", ErrInvalidToken)
	}
	got, err := base64.RawURLEncoding.DecodeString(mac)
	if err != nil || !hmac.Equal(got, s.mac(payload)) {
		return Credentials{}, fmt.Errorf("%w: bad signature", ErrInvalidToken)
	}
	raw, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil {
		return Credentials{}, fmt.Errorf("%w: payload: %v", ErrInvalidToken, err)
	}
	var c claims
	if err := json.Unmarshal(raw, &c); err != nil {
		return Credentials{}, fmt.Errorf("%w: payload: %v", ErrInvalidToken, err)
	}
	if c.User != ServiceUser || !c.System {
		return Credentials{}, fmt.Errorf("%w: not a service token", ErrInvalidToken)
	}
	if !s.now().Before(time.UnixMicro(c.Expires)) {
		return Credentials{}, ErrTokenExpired
	}
	return Credentials{UserID: ServiceUser, UserName: ServiceUser, System: true, Roles: []string{RoleService}}, nil
}

func (s *ServiceTokens) mac(payload string) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(serviceTokenVersion))
	m.Write([]byte{'.'})
	m.Write([]byte(payload))
	return m.Sum(nil)
}

// token is the token the transport sends: the last minted while more than
// half its life remains, else a new one.
func (s *ServiceTokens) token() (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.current != "" && s.now().Before(s.renewAt) {
		return s.current, nil
	}
	t, err := s.Mint()
	if err != nil {
		return "", err
	}
	s.current, s.renewAt = t, s.now().Add(s.ttl/2)
	return t, nil
}

// Transport is base (nil: http.DefaultTransport) sending a service token
// as X-Auth-Token on every request.
func (s *ServiceTokens) Transport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return serviceTransport{s: s, base: base}
}

type serviceTransport struct {
	s    *ServiceTokens
	base http.RoundTripper
}

func (t serviceTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	tok, err := t.s.token()
	if err != nil {
		return nil, err
	}
	// RoundTrippers must not modify the request they are given.
	r = r.Clone(r.Context())
	r.Header.Set("X-Auth-Token", tok)
	return t.base.RoundTrip(r)
}
