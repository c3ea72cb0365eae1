package compute

import (
	"net/http"
	"testing"
)

// TestProjectIDInURL: every route is also served below a project id, as
// Nova's ProjectMapper connects "/{project_id}" + path before the path
// itself; the id must be the caller's (wsgi.Resource's "Malformed
// request URL"), and only hex digits and dashes are taken for one.
func TestProjectIDInURL(t *testing.T) {
	a := newTestAPI(t)
	const mine = "0123abcd-ef"
	tok := "X-Auth-Token: alice:" + mine
	bare := a.do(http.MethodGet, "/v2.1/flavors", "", tok)
	if bare.Code != http.StatusOK {
		t.Fatalf("bare list: %d %s", bare.Code, bare.Body)
	}
	a.expect(a.do(http.MethodGet, "/v2.1/"+mine+"/flavors", "", tok), http.StatusOK, bare.Body.String())

	a.expect(a.do(http.MethodGet, "/v2.1/fedcba98/flavors", "", tok), http.StatusBadRequest,
		`{"badRequest": {"code": 400, "message": "Malformed request URL: URL's project_id 'fedcba98' doesn't match Context's project_id '`+mine+`'"}}`)
	// The check comes after the action's name and before the route's
	// microversions: an unknown action is still "no such action".
	a.expect(a.do(http.MethodPost, "/v2.1/fedcba98/flavors/1/action", `{"frobnicate": {}}`, tok), http.StatusBadRequest,
		`{"badRequest": {"code": 400, "message": "There is no such action: frobnicate"}}`)

	// "/{project_id}" and "/{project_id}/" are the version document.
	doc := a.do(http.MethodGet, "/v2.1/", "", tok)
	for _, p := range []string{"/v2.1/" + mine, "/v2.1/" + mine + "/"} {
		got := a.do(http.MethodGet, p, "", tok)
		if got.Code != http.StatusOK || got.Body.String() != doc.Body.String() {
			t.Errorf("GET %s: %d %s\nwant %s", p, got.Code, got.Body, doc.Body)
		}
	}

	// A first segment that is not [0-9a-f-]+ is no project id: the path
	// is routed as it stands (webob's 404 for an unknown one).
	if got := a.do(http.MethodGet, "/v2.1/project-x/flavors", "", tok); got.Code != http.StatusNotFound {
		t.Errorf("non-hex project segment: %d %s", got.Code, got.Body)
	}
}
