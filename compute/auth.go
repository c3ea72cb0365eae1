package compute

import (
	"net/http"

	"github.com/berth-project/berth/identity"
)

// How the compute API learns who calls, and what it lets them do.
//
// Nova's paste pipeline runs an auth filter before the router, for every
// path below /v2.1/ (the version documents at / and /v2.1 are public):
// keystonemiddleware's auth_token in a deployment, noauth2 in
// development. serveV21 does the same with authenticate, right after
// oslo's sizelimit and before routing, so an anonymous caller learns
// nothing about which routes exist. The handlers then check Nova's
// policies (authorize) against the credentials it found.

// AuthMode is the compute API's authentication: AuthKeystone or AuthNoAuth.
type AuthMode string

const (
	// AuthKeystone: every request below /v2.1/ needs an X-Auth-Token the
	// Verifier accepts; anything else is keystonemiddleware's 401.
	AuthKeystone AuthMode = "keystone"
	// AuthNoAuth is Nova's noauth2, for `berth dev` and tests: the token
	// "user:project" (or "user", whose project is the user) is taken at
	// its word, and the user "admin" is an admin. Never for a deployment.
	AuthNoAuth AuthMode = "noauth"
)

// Auth configures authentication (see SetAuth).
type Auth struct {
	Mode AuthMode
	// Verifier checks tokens. Required for AuthKeystone; with AuthNoAuth
	// it is optional and, when set, a token it accepts stands for its
	// own credentials (so `berth dev` takes its identity's tokens as
	// well as noauth2's "user:project").
	Verifier identity.Verifier
	// IdentityURI is where a refused client may log in, the
	// WWW-Authenticate header's uri (keystonemiddleware's
	// www_authenticate_uri): the identity API's public URL.
	IdentityURI string
}

// SetAuth sets how the API authenticates callers; an API starts in
// AuthNoAuth without a verifier, as the tests of its routes use it.
func (a *API) SetAuth(auth Auth) {
	if auth.Mode == AuthKeystone && auth.Verifier == nil {
		panic("compute: keystone auth without a token verifier")
	}
	a.auth = auth
}

// authenticate returns the caller's credentials, or false when the
// request must be refused with 401 (identity.Authenticate, which /v1
// beside this API runs too).
func (a *API) authenticate(r *http.Request) (identity.Credentials, bool) {
	creds, err := identity.Authenticate(r, a.auth.Mode == AuthKeystone, a.auth.Verifier)
	if err != nil {
		// Which check failed is for the log, never for the caller;
		// the token itself is never logged.
		a.log.Info("token refused", "method", r.Method, "path", r.URL.Path, "error", err)
		return identity.Credentials{}, false
	}
	return creds, true
}

// rejectUnauthenticated is keystonemiddleware's 401, with the request id
// that compute_req_id (ahead of it in the pipeline) sets.
func (a *API) rejectUnauthenticated(w http.ResponseWriter) {
	identity.RejectUnauthenticated(w, a.auth.IdentityURI)
}

// authorize enforces p, with Nova's new default check strings
// (nova/policies/base.py, enforce_new_defaults=True), for a resource of
// project owner:
//   - ADMIN (context_is_admin): role:admin;
//   - PROJECT_READER_OR_ADMIN: role:admin, or role:reader and
//     project_id:%(project_id)s;
//   - PROJECT_MEMBER_OR_ADMIN: role:admin, or role:member and
//     project_id:%(project_id)s;
//   - the zero policy: any authenticated caller.
//
// Scope is not checked (Nova 26's enforce_scope is off): a system-scoped
// admin is an admin, and a system-scoped reader owns no project.
// serveV21 calls it with the caller's own project as owner, as Nova's
// default target is; handlers with a loaded resource call reqCtx.can.
// A refusal is PolicyNotAuthorized.
func (a *API) authorize(c *reqCtx, p policy, owner string) *fault {
	cr := c.creds
	ok := false
	switch p.kind {
	case anyone:
		ok = true
	case admin:
		ok = cr.HasRole(identity.RoleAdmin)
	case projectReader:
		ok = cr.HasRole(identity.RoleAdmin) || cr.HasRole(identity.RoleReader) && ownerMatches(cr, owner)
	case projectMember:
		ok = cr.HasRole(identity.RoleAdmin) || cr.HasRole(identity.RoleMember) && ownerMatches(cr, owner)
	}
	if ok {
		return nil
	}
	return &fault{status: http.StatusForbidden, message: "Policy doesn't allow " + p.rule + " to be performed."}
}

// ownerMatches is oslo.policy's project_id:%(project_id)s: the caller's
// project is the target's (a caller without a project matches nothing).
func ownerMatches(cr identity.Credentials, owner string) bool {
	return cr.ProjectID != "" && cr.ProjectID == owner
}

// isAdmin is Nova's context.is_admin (policy.check_is_admin, role:admin),
// which the flavor queries read to show private flavors.
func (c *reqCtx) isAdmin() bool { return c.creds.HasRole(identity.RoleAdmin) }
