package identity

import (
	"net/http"
	"strconv"
)

// unauthenticatedBody is keystonemiddleware auth_token's 401 body
// (jsonutils.dumps of {'error': {'code', 'title', 'message'}}, in that
// order), what every OpenStack API answers a request without a valid
// token before its own code runs.
const unauthenticatedBody = `{"error": {"code": 401, "title": "Unauthorized", "message": "The request you have made requires authentication."}}`

// RejectUnauthenticated answers as keystonemiddleware's auth_token does a
// request with no token or an invalid one (delay_auth_decision off): 401,
// its JSON body, and WWW-Authenticate naming where to log in
// (Keystone uri="<www_authenticate_uri>"), so a client knows where to get
// a token. Which check failed is never said: that is for the log.
func RejectUnauthenticated(w http.ResponseWriter, identityURI string) {
	h := w.Header()
	h.Set("WWW-Authenticate", `Keystone uri="`+identityURI+`"`)
	h.Set("Content-Type", "application/json; charset=UTF-8")
	h.Set("Content-Length", strconv.Itoa(len(unauthenticatedBody)))
	w.WriteHeader(http.StatusUnauthorized)
	_, _ = w.Write([]byte(unauthenticatedBody))
}
