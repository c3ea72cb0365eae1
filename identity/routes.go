package identity

import "net/http"

// route is one method of one path. withToken routes need a valid
// X-Auth-Token (401 otherwise) and get its Token.
type route struct {
	method, path string
	withToken    bool
	handle       func(w http.ResponseWriter, r *http.Request, auth *Token) error
}

// routes is the API. Keystone serves more (users, projects, roles,
// credentials...); Berth's directory is its config, so only logging in,
// checking a token, the catalog and reading projects are served.
func (a *API) routes() []route {
	return []route{
		{method: "GET", path: "/", handle: a.versions},
		{method: "GET", path: "/v3", handle: a.version},
		{method: "GET", path: "/v3/", handle: a.version},
		{method: "POST", path: "/v3/auth/tokens", handle: a.issueToken},
		{method: "GET", path: "/v3/auth/tokens", withToken: true, handle: a.validateToken},
		{method: "HEAD", path: "/v3/auth/tokens", withToken: true, handle: a.validateToken},
		{method: "GET", path: "/v3/auth/catalog", withToken: true, handle: a.getCatalog},
		{method: "GET", path: "/v3/projects", withToken: true, handle: a.listProjects},
		{method: "GET", path: "/v3/projects/{id}", withToken: true, handle: a.getProject},
	}
}
