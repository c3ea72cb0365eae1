package api

import (
	"context"
	"net/http"

	"github.com/berth-project/berth/identity"
)

// How /v1 learns who calls, and what it lets them do: exactly as the
// Nova API beside it on the listener (compute/auth.go). ServeHTTP runs
// identity.Authenticate for every path below /v1/ before routing (401
// with keystonemiddleware's body and WWW-Authenticate: an anonymous
// caller learns nothing of the routes); each route of routeTable then
// carries one of Nova's default policies, checked against the caller's
// own project before its handler runs, and the handlers that load a
// project's server or server group check it again against that
// resource's project (Nova's target={'project_id': instance.project_id}).

// Auth configures /v1's authentication (see SetAuth).
type Auth struct {
	// Keystone: every /v1 request needs an X-Auth-Token the Verifier
	// accepts. Without it, /v1 is noauth2 as Nova's API is in
	// AuthNoAuth: "user:project" taken at its word, "admin" an admin,
	// and no token at all admin:admin (identity.NoAuthCredentials).
	Keystone bool
	// Verifier checks tokens; required with Keystone. In noauth mode a
	// token it accepts stands for its own credentials.
	Verifier identity.Verifier
	// IdentityURI is the WWW-Authenticate uri of a 401.
	IdentityURI string
}

// SetAuth sets how /v1 authenticates callers. A Server starts in noauth
// without a verifier, as the tests of its routes use it.
func (s *Server) SetAuth(a Auth) {
	if a.Keystone && a.Verifier == nil {
		panic("api: keystone auth without a token verifier")
	}
	s.auth = a
}

type credentialsKey struct{}

// caller is the credentials the request was authenticated with.
func caller(r *http.Request) identity.Credentials {
	c, _ := r.Context().Value(credentialsKey{}).(identity.Credentials)
	return c
}

// authenticate returns r carrying its caller's credentials, or false
// when the request must be refused with 401.
func (s *Server) authenticate(r *http.Request) (*http.Request, bool) {
	creds, err := identity.Authenticate(r, s.auth.Keystone, s.auth.Verifier)
	if err != nil {
		// Which check failed is for the log, never for the caller; the
		// token itself is never logged.
		s.log.Info("token refused", "method", r.Method, "path", r.URL.Path,
			"request_id", requestID(r.Context()), "error", err)
		return r, false
	}
	return r.WithContext(context.WithValue(r.Context(), credentialsKey{}, creds)), true
}

// policyKind is which of Nova's new default check strings a policy is
// (nova/policies/base.py, as compute/auth.go's authorize reads them).
type policyKind int

const (
	anyone        policyKind = iota // any authenticated caller
	admin                           // ADMIN: role:admin
	projectReader                   // PROJECT_READER_OR_ADMIN
	projectMember                   // PROJECT_MEMBER_OR_ADMIN
)

// policy is a rule name (Nova's, where /v1 serves what Nova does;
// berth:v1:... for Berth's own admin extensions) and its check.
type policy struct {
	rule string
	kind policyKind
}

func anyCaller(rule string) policy            { return policy{rule: rule, kind: anyone} }
func adminOnly(rule string) policy            { return policy{rule: rule, kind: admin} }
func projectReaderOrAdmin(rule string) policy { return policy{rule: rule, kind: projectReader} }
func projectMemberOrAdmin(rule string) policy { return policy{rule: rule, kind: projectMember} }

// allows says whether creds pass p for a resource of project owner:
// role:admin; or reader (member) with project_id:%(project_id)s. Scope
// is not checked (Nova 26's enforce_scope is off).
func (p policy) allows(creds identity.Credentials, owner string) bool {
	ownerMatches := creds.ProjectID != "" && creds.ProjectID == owner
	switch p.kind {
	case anyone:
		return true
	case admin:
		return creds.HasRole(identity.RoleAdmin)
	case projectReader:
		return creds.HasRole(identity.RoleAdmin) || creds.HasRole(identity.RoleReader) && ownerMatches
	case projectMember:
		return creds.HasRole(identity.RoleAdmin) || creds.HasRole(identity.RoleMember) && ownerMatches
	}
	return false
}

// can answers Nova's 403 and returns false when the caller may not
// apply p to a resource of project owner.
func can(w http.ResponseWriter, r *http.Request, p policy, owner string) bool {
	if p.allows(caller(r), owner) {
		return true
	}
	writeError(w, http.StatusForbidden, "Policy doesn't allow "+p.rule+" to be performed.")
	return false
}

// isAdmin is Nova's context.is_admin.
func isAdmin(r *http.Request) bool { return caller(r).HasRole(identity.RoleAdmin) }
