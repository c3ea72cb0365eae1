package scheduler

import (
	"net/http"

	"github.com/hashicorp/go-hclog"

	"github.com/berth-project/berth/identity"
)

// ServiceTokenChecker checks the X-Auth-Token a caller of
// select_destinations presents: *identity.ServiceTokens, with the
// deployment's signing key.
type ServiceTokenChecker interface {
	Verify(token string) (identity.Credentials, error)
}

// RequireServiceToken lets through to h only callers presenting a valid
// service token (identity.ServiceTokens: the built-in berth-service
// principal, role service). A select_destinations claims resources, so
// an anonymous caller, a user's token (even an admin's) or an expired or
// foreign token gets 401: only a Berth process holding the signing key
// (the superconductor, `berth bench`) may ask. Remote sends the token
// when its Client's transport adds it (ServiceTokens.Transport).
func RequireServiceToken(h http.Handler, check ServiceTokenChecker, log hclog.Logger) http.Handler {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok := r.Header.Get("X-Auth-Token")
		if tok == "" {
			writeError(w, http.StatusUnauthorized, "Unauthorized", "select_destinations needs a Berth service token (X-Auth-Token)")
			return
		}
		cr, err := check.Verify(tok)
		if err == nil && !cr.HasRole(identity.RoleService) {
			err = identity.ErrInvalidToken
		}
		if err != nil {
			// The token is never logged, only why it failed.
			log.Warn("select_destinations refused", "remote", r.RemoteAddr, "error", err)
			writeError(w, http.StatusUnauthorized, "Unauthorized", "the X-Auth-Token is not a valid Berth service token")
			return
		}
		h.ServeHTTP(w, r)
	})
}
