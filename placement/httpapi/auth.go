package httpapi

import (
	"strings"

	"github.com/berth-project/berth/identity"
)

// AuthConfig says how the API authenticates requests.
type AuthConfig struct {
	// Mode is "noauth" (the default; Placement's noauth2: token "admin" is
	// an admin, "user:project" is that user in that project, X-Roles names
	// roles), "tokens" (Tokens maps each accepted token) or "keystone"
	// (Verifier checks identity tokens, as keystonemiddleware does in
	// front of Placement).
	Mode   string
	Tokens map[string]TokenInfo
	// Verifier and IdentityURI (where a refused client logs in, named by
	// the 401's WWW-Authenticate) are for "keystone".
	Verifier    identity.Verifier
	IdentityURI string
}

// ModeKeystone is the AuthConfig mode that accepts identity tokens.
const ModeKeystone = "keystone"

// TokenInfo is what a configured token stands for.
type TokenInfo struct {
	UserID    string
	ProjectID string
	Roles     []string
	// SystemScope is "all" for a system-scoped token.
	SystemScope string
}

type authInfo struct {
	user, project string
	roles         map[string]bool
	system        bool
}

// authenticate fills c.auth from the request; false means 401.
func (s *API) authenticate(c *reqCtx) bool {
	token := c.r.Header.Get("X-Auth-Token")
	if _, ok := c.r.Header["X-Auth-Token"]; !ok {
		return false
	}
	a := authInfo{roles: map[string]bool{}}
	if s.opts.Auth.Mode == ModeKeystone {
		if s.opts.Auth.Verifier == nil || token == "" {
			return false
		}
		cr, err := s.opts.Auth.Verifier.Verify(c.r.Context(), token)
		if err != nil {
			s.log.Info("token refused", "path", c.r.URL.Path, "error", err)
			return false
		}
		// What keystonemiddleware's headers tell Placement: the user, the
		// project (none when system-scoped) and the roles, implied ones
		// included.
		a.user, a.project, a.system = cr.UserID, cr.ProjectID, cr.System
		for _, r := range cr.Roles {
			a.roles[r] = true
		}
		c.auth = a
		return true
	}
	if s.opts.Auth.Mode == "tokens" {
		ti, ok := s.opts.Auth.Tokens[token]
		if !ok {
			return false
		}
		a.user, a.project = ti.UserID, ti.ProjectID
		for _, r := range ti.Roles {
			a.roles[strings.TrimSpace(r)] = true
		}
		a.system = ti.SystemScope == "all"
		c.auth = a
		return true
	}
	user, project, _ := strings.Cut(token, ":")
	if project == "" {
		project = user
	}
	a.user = user
	if _, ok := c.r.Header["X-Roles"]; ok {
		for _, r := range strings.Split(c.r.Header.Get("X-Roles"), ",") {
			if r = strings.TrimSpace(r); r != "" {
				a.roles[r] = true
			}
		}
	} else if user == "admin" {
		a.roles["admin"] = true
	}
	// As oslo.context reads it: an explicit X-Project-Id wins over the
	// project noauth2 derives from the token; a system-scoped request has
	// no project.
	if scope := c.r.Header.Get("OpenStack-System-Scope"); scope != "" {
		a.system = scope == "all"
		project = ""
	}
	if p := c.r.Header.Get("X-Project-Id"); p != "" {
		project = p
	}
	a.project = project
	c.auth = a
	return true
}

// The legacy default policy (enforce_new_defaults off): each new rule is
// OR'ed with its deprecated "role:admin".
func (a authInfo) admin() bool { return a.roles["admin"] }

func (a authInfo) systemReader() bool { return a.admin() || (a.roles["reader"] && a.system) }

func (a authInfo) projectReader(project string) bool {
	return a.admin() || (a.roles["reader"] && a.project != "" && a.project == project)
}

// authorize answers 403 unless ok.
func (c *reqCtx) authorize(ok bool, rule string) error {
	if ok {
		return nil
	}
	return &httpError{status: 403, detail: "Policy does not allow " + rule + " to be performed.", raised: true}
}
