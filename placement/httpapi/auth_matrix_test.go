package httpapi

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/identity"
	"github.com/berth-project/berth/identity/identitytest"
	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/placement"
)

// The authorization matrix of the Placement API: every route of routes(),
// as each kind of caller, over real HTTP with real identity tokens, in
// keystone mode. A route added to routes() needs a row in
// placementMatrix (TestPlacementAuthMatrixCoversEveryRoute fails until
// it has one). The statuses are Placement 8.0's (Zed) defaults, whose
// enforce_new_defaults and enforce_scope are both off: every rule is its
// new check_str (system_admin_api, system_reader_api, or
// system_or_project_reader for GET /usages) OR'ed with the deprecated
// "role:admin". A project-scoped token therefore passes only as an admin
// (any project), or, for GET /usages, as a reader (member implies
// reader) of the project_id the query names.

// The callers. The first four have no valid token and always get 401.
var pmCallers = []string{"anonymous", "garbage token", "other key's token", "expired token",
	"reader of A", "member of B", "member of A", "admin", "system reader", "system admin"}

// pmRow is one request and the status each caller with a valid token
// gets (reader of A, member of B, member of A, admin). open rows are
// served before authentication (the version document). {rp}, {rp2},
// {gen}, {gen2}, {projA} and {projB} are filled in from the seed.
type pmRow struct {
	method, path, mv, body string
	want                   [4]int
	open                   bool
}

func pmAdmin(ok int) [4]int { return [4]int{403, 403, 403, ok} }

const (
	pmRP       = "5a5a5a5a-1111-4222-8333-444444444444"
	pmRP2      = "5b5b5b5b-1111-4222-8333-444444444444"
	pmConsumer = "5c5c5c5c-1111-4222-8333-444444444444"
	pmFresh    = "5d5d5d5d-1111-4222-8333-444444444444"
	pmAgg      = "5e5e5e5e-1111-4222-8333-444444444444"
)

var placementMatrix = []pmRow{
	{method: "GET", path: "/", want: [4]int{200, 200, 200, 200}, open: true},

	{method: "GET", path: "/resource_classes", want: pmAdmin(200)},
	{method: "POST", path: "/resource_classes", body: `{"name": "CUSTOM_NEW"}`, want: pmAdmin(201)},
	{method: "GET", path: "/resource_classes/CUSTOM_RC", want: pmAdmin(200)},
	{method: "PUT", path: "/resource_classes/CUSTOM_RC", mv: "1.6", body: `{"name": "CUSTOM_RENAMED"}`, want: pmAdmin(200)},
	{method: "PUT", path: "/resource_classes/CUSTOM_NEW", want: pmAdmin(201)},
	{method: "DELETE", path: "/resource_classes/CUSTOM_RC", want: pmAdmin(204)},

	{method: "GET", path: "/resource_providers", want: pmAdmin(200)},
	{method: "POST", path: "/resource_providers", body: `{"name": "new"}`, want: pmAdmin(200)},
	{method: "GET", path: "/resource_providers/{rp}", want: pmAdmin(200)},
	{method: "DELETE", path: "/resource_providers/{rp2}", want: pmAdmin(204)},
	{method: "PUT", path: "/resource_providers/{rp}", body: `{"name": "renamed"}`, want: pmAdmin(200)},

	{method: "GET", path: "/resource_providers/{rp}/inventories", want: pmAdmin(200)},
	{method: "POST", path: "/resource_providers/{rp}/inventories", body: `{"resource_class": "DISK_GB", "total": 100, "resource_provider_generation": {gen}}`, want: pmAdmin(201)},
	{method: "PUT", path: "/resource_providers/{rp}/inventories", body: `{"resource_provider_generation": {gen}, "inventories": {"VCPU": {"total": 16}, "MEMORY_MB": {"total": 4096}}}`, want: pmAdmin(200)},
	{method: "DELETE", path: "/resource_providers/{rp2}/inventories", want: pmAdmin(204)},
	{method: "GET", path: "/resource_providers/{rp}/inventories/VCPU", want: pmAdmin(200)},
	{method: "PUT", path: "/resource_providers/{rp}/inventories/VCPU", body: `{"resource_provider_generation": {gen}, "total": 16}`, want: pmAdmin(200)},
	{method: "DELETE", path: "/resource_providers/{rp2}/inventories/VCPU", want: pmAdmin(204)},

	{method: "GET", path: "/resource_providers/{rp}/usages", want: pmAdmin(200)},
	{method: "GET", path: "/resource_providers/{rp}/aggregates", want: pmAdmin(200)},
	{method: "PUT", path: "/resource_providers/{rp}/aggregates", body: `{"aggregates": ["` + pmAgg + `"], "resource_provider_generation": {gen}}`, want: pmAdmin(200)},
	{method: "GET", path: "/resource_providers/{rp}/allocations", want: pmAdmin(200)},

	{method: "POST", path: "/allocations", body: `{"` + pmFresh + `": {"allocations": {"{rp}": {"resources": {"VCPU": 1}}}, "project_id": "{projA}", "user_id": "u", "consumer_generation": null, "consumer_type": "INSTANCE"}}`, want: pmAdmin(204)},
	{method: "GET", path: "/allocations/" + pmConsumer, want: pmAdmin(200)},
	{method: "PUT", path: "/allocations/" + pmFresh, body: `{"allocations": {"{rp}": {"resources": {"VCPU": 1}}}, "project_id": "{projA}", "user_id": "u", "consumer_generation": null, "consumer_type": "INSTANCE"}`, want: pmAdmin(204)},
	{method: "DELETE", path: "/allocations/" + pmConsumer, want: pmAdmin(204)},

	{method: "GET", path: "/allocation_candidates?resources=VCPU:1", want: pmAdmin(200)},

	{method: "GET", path: "/traits", want: pmAdmin(200)},
	{method: "GET", path: "/traits/CUSTOM_T", want: pmAdmin(204)},
	{method: "PUT", path: "/traits/CUSTOM_NEW", want: pmAdmin(201)},
	{method: "DELETE", path: "/traits/CUSTOM_UNUSED", want: pmAdmin(204)},
	{method: "GET", path: "/resource_providers/{rp}/traits", want: pmAdmin(200)},
	{method: "PUT", path: "/resource_providers/{rp}/traits", body: `{"traits": ["CUSTOM_T", "HW_CPU_X86_AVX"], "resource_provider_generation": {gen}}`, want: pmAdmin(200)},
	{method: "DELETE", path: "/resource_providers/{rp2}/traits", want: pmAdmin(204)},

	// system_or_project_reader with target {'project_id': the query's}:
	// a reader (or member) of that project passes, another project's
	// member does not; without project_id the target is None.
	{method: "GET", path: "/usages?project_id={projA}", want: [4]int{200, 403, 200, 200}},
	{method: "GET", path: "/usages?project_id={projB}", want: [4]int{403, 200, 403, 200}},
	// The policy runs before the query's schema: only a caller it lets
	// through learns that project_id is required.
	{method: "GET", path: "/usages", want: [4]int{403, 403, 403, 400}},

	{method: "POST", path: "/reshaper", body: `{"inventories": {"{rp}": {"resource_provider_generation": {gen}, "inventories": {"VCPU": {"total": 8}, "MEMORY_MB": {"total": 2048}}}}, "allocations": {}}`, want: pmAdmin(204)},
}

// wantFor is the row's status for caller. The system-scoped callers pass
// the new rules themselves: a system admin system_admin_api (as the
// admin's column), a system reader system_reader_api, which is every GET
// rule (system_or_project_reader too) and no write.
func (r pmRow) wantFor(caller string) int {
	switch {
	case caller == "system admin":
		return r.want[3]
	case caller == "system reader" && (r.method == "GET" || r.open):
		return r.want[3]
	case caller == "system reader":
		return http.StatusForbidden
	}
	for i, c := range pmCallers[4:8] {
		if c == caller {
			return r.want[i]
		}
	}
	if r.open {
		return r.want[3]
	}
	return http.StatusUnauthorized
}

// pmEnv is one Placement's records under a prefix of its own, so that
// one caller's success (a delete) does not change the next one's answer.
type pmEnv struct {
	url  string
	vars *strings.Replacer
}

// seedPlacementMatrix makes the records the rows act on, through the
// API itself as noauth2's admin: {rp} with VCPU and MEMORY_MB, the
// trait CUSTOM_T and an aggregate, and project A's consumer on it; {rp2}
// with VCPU and CUSTOM_T but nothing allocated; the resource class
// CUSTOM_RC and the unused trait CUSTOM_UNUSED. It then serves the API
// in keystone mode over them until ctx is done.
func seedPlacementMatrix(ctx context.Context, t *testing.T, cli *clientv3.Client, prefix string, svc *identity.Service) pmEnv {
	t.Helper()
	ps := placement.New(cli, etcdschema.New(prefix), hclog.NewNullLogger())
	if err := ps.Start(ctx); err != nil {
		t.Fatal(err)
	}
	seed := httptest.NewServer(New(ps, nil, Options{}))
	defer seed.Close()
	a := &api{t: t, url: seed.URL, s: ps}
	const mv = "1.39"
	a.must(201, "PUT", "/resource_classes/CUSTOM_RC", mv, nil)
	a.must(201, "PUT", "/traits/CUSTOM_T", mv, nil)
	a.must(201, "PUT", "/traits/CUSTOM_UNUSED", mv, nil)
	for _, rp := range []string{pmRP, pmRP2} {
		a.must(200, "POST", "/resource_providers", mv, map[string]any{"name": "n-" + rp, "uuid": rp})
		a.must(200, "PUT", "/resource_providers/"+rp+"/inventories", mv, map[string]any{"resource_provider_generation": 0,
			"inventories": map[string]any{"VCPU": map[string]any{"total": 8}, "MEMORY_MB": map[string]any{"total": 2048}}})
		a.must(200, "PUT", "/resource_providers/"+rp+"/traits", mv, map[string]any{"resource_provider_generation": 1, "traits": []string{"CUSTOM_T"}})
	}
	a.must(200, "PUT", "/resource_providers/"+pmRP+"/aggregates", mv, map[string]any{"resource_provider_generation": 2, "aggregates": []string{pmAgg}})
	a.must(204, "PUT", "/allocations/"+pmConsumer, mv, map[string]any{"allocations": map[string]any{pmRP: map[string]any{"resources": map[string]int{"VCPU": 2}}},
		"project_id": identitytest.ProjectA, "user_id": "u", "consumer_generation": nil, "consumer_type": "INSTANCE"})

	srv := httptest.NewServer(New(ps, nil, Options{Auth: AuthConfig{Mode: ModeKeystone,
		Verifier: svc.Verifier(), IdentityURI: "http://keystone.test:5000/v3"}}))
	t.Cleanup(srv.Close)
	return pmEnv{url: srv.URL, vars: strings.NewReplacer("{rp}", pmRP, "{rp2}", pmRP2,
		"{gen}", fmt.Sprint(a.generation(pmRP)), "{projA}", identitytest.ProjectA, "{projB}", identitytest.ProjectB)}
}

// call sends rw as the holder of token; it returns the status, the
// WWW-Authenticate header and the body.
func (e pmEnv) call(t *testing.T, rw pmRow, token string) (int, string, string) {
	t.Helper()
	body := e.vars.Replace(rw.body)
	req, err := http.NewRequest(rw.method, e.url+e.vars.Replace(rw.path), strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("X-Auth-Token", token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	mv := rw.mv
	if mv == "" {
		mv = "1.39"
	}
	req.Header.Set("OpenStack-API-Version", "placement "+mv)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header.Get("WWW-Authenticate"), string(b)
}

func TestPlacementAuthMatrix(t *testing.T) {
	cli := etcdtest.Client(t)
	key := []byte("0123456789abcdef0123456789abcdef")
	svc, err := identity.New(identitytest.Directory(t, time.Hour), key)
	if err != nil {
		t.Fatal(err)
	}
	tokens := identitytest.Tokens(t, svc, key)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Refused callers change nothing: one seed serves all their cells;
	// each caller the policy lets through gets a seed of its own.
	shared := seedPlacementMatrix(ctx, t, cli, "/pmatrix/shared", svc)
	n, tried := 0, 0
	for _, rw := range placementMatrix {
		for _, caller := range pmCallers {
			env := shared
			want := rw.wantFor(caller)
			if want < 300 && rw.method != "GET" {
				n++
				env = seedPlacementMatrix(ctx, t, cli, fmt.Sprintf("/pmatrix/%d", n), svc)
			}
			tried++
			status, wwwAuth, body := env.call(t, rw, tokens[caller])
			if status != want {
				t.Errorf("%s %s (mv %s) as %s: %d, want %d: %s", rw.method, rw.path, rw.mv, caller, status, want, body)
			}
			switch {
			case status == http.StatusUnauthorized && (wwwAuth != `Keystone uri="http://keystone.test:5000/v3"` || !strings.Contains(body, "requires authentication")):
				t.Errorf("%s %s as %s: 401 is not keystonemiddleware's: %q %s", rw.method, rw.path, caller, wwwAuth, body)
			case status == http.StatusForbidden && !strings.Contains(body, "placement:"):
				t.Errorf("%s %s as %s: 403 does not name the rule: %s", rw.method, rw.path, caller, body)
			}
		}
	}
	t.Logf("%d requests, each answer's status checked", tried)
}

// TestPlacementAuthMatrixCoversEveryRoute: every method and path of
// routes() has a row, so a route added without deciding who may call it
// fails here.
func TestPlacementAuthMatrixCoversEveryRoute(t *testing.T) {
	covered := map[string]bool{}
	for _, rw := range placementMatrix {
		path, _, _ := strings.Cut(rw.path, "?")
		covered[rw.method+" "+pmTemplate(path)] = true
	}
	s := &API{}
	rts := s.routes()
	for _, rt := range rts {
		if !covered[rt.method+" "+rt.path] {
			t.Errorf("route %s %s has no row in placementMatrix", rt.method, rt.path)
		}
	}
	if len(rts) < 35 {
		t.Errorf("only %d Placement routes in the table", len(rts))
	}
}

// pmTemplate turns a row's path back into its route's template.
func pmTemplate(path string) string {
	segs := strings.Split(path, "/")
	for i, s := range segs {
		switch {
		case s == "{rp}" || s == "{rp2}":
			segs[i] = "{uuid}"
		case i == 2 && segs[1] == "allocations":
			segs[i] = "{consumer_uuid}"
		case i == 2 && (segs[1] == "resource_classes" || segs[1] == "traits"):
			segs[i] = "{name}"
		case i == 4 && segs[3] == "inventories":
			segs[i] = "{resource_class}"
		}
	}
	return strings.Join(segs, "/")
}
