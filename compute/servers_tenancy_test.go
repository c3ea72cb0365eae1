package compute

import (
	"encoding/json"
	"net/http"
	"slices"
	"testing"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/identity"
	"github.com/berth-project/berth/identity/identitytest"
)

// Servers belong to the project that created them, as Nova's do: each
// project lists only its own; another project's placed server is not
// found, one still a build request is refused (Nova reads build
// requests unscoped, then its policy says no); a reader neither creates
// nor deletes; an admin lists every project's with all_tenants, which
// nobody else may ask for.
func TestServerTenancy(t *testing.T) {
	a := newCreateAPI(t)
	_, svc, tokens := newMatrix(t)
	a.api.SetAuth(Auth{Mode: AuthKeystone, Verifier: svc.Verifier()})
	as := func(caller string) string { return "X-Auth-Token: " + tokens[caller] }

	create := func(caller, name string) string {
		t.Helper()
		rec := a.do("POST", "/v2.1/servers", `{"server": {"name": "`+name+`", "flavorRef": "1", "imageRef": "`+sleeperID+`"}}`, as(caller))
		var out struct{ Server struct{ ID string } }
		if rec.Code != http.StatusAccepted || json.Unmarshal(rec.Body.Bytes(), &out) != nil {
			t.Fatalf("create %s as %s: %d %s", name, caller, rec.Code, rec.Body)
		}
		return out.Server.ID
	}
	ofA, ofB := create("member of A", "a1"), create("member of B", "b1")
	building := create("member of A", "a2") // stays a build request
	a.place(ofA, "compute-1", etcdschema.StatusActive, t0, nil)
	a.place(ofB, "compute-1", etcdschema.StatusActive, t0, nil)

	// The create's owner is the token's project and user.
	var show struct {
		Server struct {
			TenantID string `json:"tenant_id"`
			UserID   string `json:"user_id"`
		}
	}
	if err := json.Unmarshal(a.do("GET", "/v2.1/servers/"+ofA, "", as("member of A")).Body.Bytes(), &show); err != nil {
		t.Fatal(err)
	}
	if show.Server.TenantID != identitytest.ProjectA || show.Server.UserID != identity.DerivedID("user", "member-a") {
		t.Errorf("a1's owner: %+v, want project %s, user member-a", show.Server, identitytest.ProjectA)
	}

	for _, tc := range []struct {
		caller, query string
		want          []string
	}{
		{"reader of A", "", []string{"a1", "a2"}},
		{"member of A", "", []string{"a1", "a2"}},
		{"member of B", "", []string{"b1"}},
		{"admin", "", nil}, // its own project C has none
		{"admin", "?all_tenants=1", []string{"a1", "a2", "b1"}},
	} {
		names, body := a.listNames("/v2.1/servers"+tc.query, "2.1", tokens[tc.caller])
		slices.Sort(names)
		if !slices.Equal(names, tc.want) && !(len(names) == 0 && tc.want == nil) {
			t.Errorf("%s lists %s: %v, want %v\n%s", tc.caller, tc.query, names, tc.want, body)
		}
	}

	notFound := func(id string) string {
		return `{"itemNotFound": {"code": 404, "message": "Instance ` + id + ` could not be found."}}`
	}
	forbidden := func(rule string) string {
		return `{"forbidden": {"code": 403, "message": "Policy doesn't allow ` + rule + ` to be performed."}}`
	}
	a.expect(a.do("GET", "/v2.1/servers?all_tenants=1", "", as("member of A")), 403, forbidden("os_compute_api:servers:index:get_all_tenants"))
	a.expect(a.do("GET", "/v2.1/servers/detail?all_tenants=1", "", as("member of A")), 403, forbidden("os_compute_api:servers:detail:get_all_tenants"))
	a.expect(a.do("GET", "/v2.1/servers/"+ofA, "", as("member of B")), 404, notFound(ofA))
	a.expect(a.do("GET", "/v2.1/servers/"+ofA+"/os-instance-actions", "", as("member of B")), 404, notFound(ofA))
	a.expect(a.do("DELETE", "/v2.1/servers/"+ofA, "", as("member of B")), 404, notFound(ofA))
	a.expect(a.do("GET", "/v2.1/servers/"+building, "", as("member of B")), 403, forbidden("os_compute_api:servers:show"))
	a.expect(a.do("DELETE", "/v2.1/servers/"+building, "", as("member of B")), 403, forbidden("os_compute_api:servers:delete"))
	a.expect(a.do("POST", "/v2.1/servers", `{"server": {"name": "r", "flavorRef": "1", "imageRef": "`+sleeperID+`"}}`, as("reader of A")),
		403, forbidden("os_compute_api:servers:create"))
	a.expect(a.do("DELETE", "/v2.1/servers/"+ofA, "", as("reader of A")), 403, forbidden("os_compute_api:servers:delete"))
	// Nova looks the server up before its policy: a reader deleting a
	// server that does not exist is told so.
	missing := "00000000-0000-4000-8000-000000000000"
	a.expect(a.do("DELETE", "/v2.1/servers/"+missing, "", as("reader of A")), 404, notFound(missing))

	if rec := a.do("DELETE", "/v2.1/servers/"+ofA, "", as("member of A")); rec.Code != http.StatusNoContent {
		t.Errorf("A's member deletes a1: %d %s", rec.Code, rec.Body)
	}
	if rec := a.do("DELETE", "/v2.1/servers/"+ofB, "", as("admin")); rec.Code != http.StatusNoContent {
		t.Errorf("the admin deletes B's b1: %d %s", rec.Code, rec.Body)
	}
}
