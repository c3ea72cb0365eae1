package identity

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/berth-project/berth/internal/audit"
)

// Authenticate is the auth filter every Berth API that serves clients
// runs ahead of its router (Nova's paste pipeline: keystonemiddleware's
// auth_token in a deployment, noauth2 in development), shared so that
// the compute API and Berth's /v1 alias beside it take the same tokens
// the same way.
//
// With keystone true, the request needs an X-Auth-Token v accepts; the
// error (for the log, never the caller: answer RejectUnauthenticated)
// says why not. With keystone false (noauth2), a token v accepts (when v
// is not nil) stands for its own credentials, and any other is read as
// noauth2 reads it (NoAuthCredentials).
func Authenticate(r *http.Request, keystone bool, v Verifier) (Credentials, error) {
	token := r.Header.Get("X-Auth-Token")
	if v != nil && token != "" {
		creds, err := v.Verify(r.Context(), token)
		if err == nil {
			audit.Identify(r.Context(), creds.UserID, creds.ProjectID)
			return creds, nil
		}
		if keystone {
			return Credentials{}, err
		}
	}
	if keystone {
		return Credentials{}, fmt.Errorf("no X-Auth-Token: %w", ErrInvalidToken)
	}
	creds := NoAuthCredentials(r)
	audit.Identify(r.Context(), creds.UserID, creds.ProjectID)
	return creds, nil
}

// NoAuthCredentials is nova.api.openstack.auth.NoAuthMiddleware
// (noauth2): the token is "user[:project]", the project defaulting to
// the user, and is_admin is user == "admin".
//
// Two differences, on purpose. Nova answers a request without any
// X-Auth-Token with a 204 handing out the token "<X-Auth-User or
// admin>:<X-Auth-Project-Id or admin>" (Auth 1.1's handshake); Berth
// serves the request as that token would be, so tokenless dev tools
// (keystoneauth's "none" plugin) work in one step. And Nova's context
// has no roles, which its legacy default rules (is_admin, or
// project_id:%(project_id)s) accept: here, with the new defaults' role
// checks, an admin holds admin, member and reader, anyone else member
// and reader of the token's project, which is what those legacy rules
// let them do.
func NoAuthCredentials(r *http.Request) Credentials {
	token, given := r.Header.Get("X-Auth-Token"), len(r.Header.Values("X-Auth-Token")) > 0
	if !given {
		user, project := r.Header.Get("X-Auth-User"), r.Header.Get("X-Auth-Project-Id")
		if user == "" {
			user = "admin"
		}
		if project == "" {
			project = "admin"
		}
		token = user + ":" + project
	}
	user, project, _ := strings.Cut(token, ":")
	if project == "" {
		project = user
	}
	c := Credentials{UserID: user, UserName: user, ProjectID: project, ProjectName: project,
		Roles: []string{RoleMember, RoleReader}}
	if user == "admin" {
		c.Roles = []string{RoleAdmin, RoleMember, RoleReader}
	}
	return c
}
