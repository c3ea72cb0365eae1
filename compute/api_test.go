package compute

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/api"
	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/etcdtest"
)

// testAPI is Nova's API beside Berth's /v1 over a fresh etcd holding the
// default flavors, as internal/stack serves them.
type testAPI struct {
	t    *testing.T
	h    http.Handler
	api  *API
	cli  *clientv3.Client
	keys etcdschema.Keys
}

func newTestAPI(t *testing.T) *testAPI {
	t.Helper()
	cli := etcdtest.Client(t)
	keys := etcdschema.New("/t")
	if err := api.EnsureFlavors(context.Background(), cli, keys, api.DefaultFlavors()); err != nil {
		t.Fatal(err)
	}
	legacy := api.New(cli, keys, nil, hclog.NewNullLogger())
	nova := New(cli, keys, hclog.NewNullLogger())
	return &testAPI{t: t, h: nova.Beside(legacy), api: nova, cli: cli, keys: keys}
}

// do sends one request; hdr is "Name: value" lines.
func (a *testAPI) do(method, path, body string, hdr ...string) *httptest.ResponseRecorder {
	a.t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Host = "nova.test:8774"
	for _, h := range hdr {
		k, v, _ := strings.Cut(h, ": ")
		req.Header.Add(k, v)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	rec := httptest.NewRecorder()
	a.h.ServeHTTP(rec, req)
	return rec
}

// expect checks status and exact body.
func (a *testAPI) expect(rec *httptest.ResponseRecorder, status int, body string) {
	a.t.Helper()
	if rec.Code != status || rec.Body.String() != body {
		a.t.Errorf("got %d %s\nwant %d %s", rec.Code, rec.Body.String(), status, body)
	}
}

func mv(v string) string { return "OpenStack-API-Version: compute " + v }

func TestMicroversionNegotiation(t *testing.T) {
	a := newTestAPI(t)
	cases := []struct {
		desc   string
		hdr    []string
		status int
		// version is the answer's X-OpenStack-Nova-API-Version; "" for
		// none. A 406 names the version asked for: Nova sets it before it
		// checks the range. A 400 has none: the version was never set.
		version string
		fault   string
	}{
		{desc: "none is 2.1", status: 200, version: "2.1"},
		{desc: "standard header", hdr: []string{mv("2.60")}, status: 200, version: "2.60"},
		{desc: "latest", hdr: []string{mv("latest")}, status: 200, version: "2.93"},
		{desc: "legacy header", hdr: []string{"X-OpenStack-Nova-API-Version: 2.5"}, status: 200, version: "2.5"},
		{desc: "standard wins over legacy", hdr: []string{mv("2.7"), "X-OpenStack-Nova-API-Version: 2.5"}, status: 200, version: "2.7"},
		{desc: "another service's entry only", hdr: []string{"OpenStack-API-Version: placement 1.5"}, status: 200, version: "2.1"},
		{desc: "last compute entry of a list", hdr: []string{"OpenStack-API-Version: compute 2.3, placement 1.2, compute 2.4"}, status: 200, version: "2.4"},
		{desc: "repeated headers fold", hdr: []string{mv("2.3"), "OpenStack-API-Version: placement 1.2"}, status: 200, version: "2.3"},
		{desc: "service name any case", hdr: []string{"OpenStack-API-Version: COMPUTE 2.9"}, status: 200, version: "2.9"},
		{desc: "lowest", hdr: []string{mv("2.1")}, status: 200, version: "2.1"},
		{desc: "highest", hdr: []string{mv("2.93")}, status: 200, version: "2.93"},
		{desc: "below the range", hdr: []string{mv("2.0")}, status: 406, version: "2.0",
			fault: `{"computeFault": {"code": 406, "message": "Version 2.0 is not supported by the API. Minimum is 2.1 and maximum is 2.93."}}`},
		{desc: "above the range", hdr: []string{mv("2.94")}, status: 406, version: "2.94",
			fault: `{"computeFault": {"code": 406, "message": "Version 2.94 is not supported by the API. Minimum is 2.1 and maximum is 2.93."}}`},
		{desc: "another major", hdr: []string{mv("3.0")}, status: 406, version: "3.0",
			fault: `{"computeFault": {"code": 406, "message": "Version 3.0 is not supported by the API. Minimum is 2.1 and maximum is 2.93."}}`},
		{desc: "huge minor", hdr: []string{mv("2.123456789012345678901")}, status: 406, version: "2.123456789012345678901",
			fault: `{"computeFault": {"code": 406, "message": "Version 2.123456789012345678901 is not supported by the API. Minimum is 2.1 and maximum is 2.93."}}`},
		{desc: "leading zero", hdr: []string{mv("2.01")}, status: 400,
			fault: `{"badRequest": {"code": 400, "message": "API Version String 2.01 is of invalid format. Must be of format MajorNum.MinorNum."}}`},
		{desc: "not a version", hdr: []string{mv("abc")}, status: 400,
			fault: `{"badRequest": {"code": 400, "message": "API Version String abc is of invalid format. Must be of format MajorNum.MinorNum."}}`},
		{desc: "Latest is not latest", hdr: []string{mv("Latest")}, status: 400,
			fault: `{"badRequest": {"code": 400, "message": "API Version String Latest is of invalid format. Must be of format MajorNum.MinorNum."}}`},
		{desc: "empty legacy header", hdr: []string{"X-OpenStack-Nova-API-Version: "}, status: 400,
			fault: `{"badRequest": {"code": 400, "message": "API Version String  is of invalid format. Must be of format MajorNum.MinorNum."}}`},
	}
	for _, c := range cases {
		t.Run(c.desc, func(t *testing.T) {
			rec := a.do("GET", "/v2.1/flavors", "", c.hdr...)
			if rec.Code != c.status {
				t.Fatalf("status %d, want %d: %s", rec.Code, c.status, rec.Body)
			}
			h := rec.Header()
			if got := h.Get("X-OpenStack-Nova-API-Version"); got != c.version {
				t.Errorf("X-OpenStack-Nova-API-Version %q, want %q", got, c.version)
			}
			if c.version != "" {
				if got := h.Get("OpenStack-API-Version"); got != "compute "+c.version {
					t.Errorf("OpenStack-API-Version %q", got)
				}
				if got := strings.Join(h.Values("Vary"), ","); got != "OpenStack-API-Version,X-OpenStack-Nova-API-Version" {
					t.Errorf("Vary %q", got)
				}
			} else if h.Get("OpenStack-API-Version") != "" || len(h.Values("Vary")) != 0 {
				t.Errorf("a malformed version's fault carries version headers: %v", h)
			}
			if c.fault != "" && rec.Body.String() != c.fault {
				t.Errorf("body %s\nwant %s", rec.Body, c.fault)
			}
			if c.status == 200 && h.Get("X-Compute-Request-Id") == "" {
				t.Errorf("no request id")
			}
		})
	}
}

func TestVersionDocuments(t *testing.T) {
	a := newTestAPI(t)
	v21 := `{"version": {"id": "v2.1", "status": "CURRENT", "version": "2.93", "min_version": "2.1", "updated": "2013-07-23T11:33:21Z", ` +
		`"links": [{"rel": "self", "href": "http://nova.test:8774/v2.1/"}, {"rel": "describedby", "type": "text/html", "href": "http://docs.openstack.org/"}], ` +
		`"media-types": [{"base": "application/json", "type": "application/vnd.openstack.compute+json;version=2.1"}]}}`
	a.expect(a.do("GET", "/", ""), 200, `{"versions": [`+
		`{"id": "v2.0", "status": "SUPPORTED", "version": "", "min_version": "", "updated": "2011-01-21T11:33:21Z", "links": [{"rel": "self", "href": "http://nova.test:8774/v2/"}]}, `+
		`{"id": "v2.1", "status": "CURRENT", "version": "2.93", "min_version": "2.1", "updated": "2013-07-23T11:33:21Z", "links": [{"rel": "self", "href": "http://nova.test:8774/v2.1/"}]}]}`)
	a.expect(a.do("GET", "/v2.1", ""), 200, v21)
	a.expect(a.do("GET", "/v2.1/", ""), 200, v21)
	a.expect(a.do("GET", "/v2.1/versions/v2.1", ""), 200, v21)
	a.expect(a.do("GET", "/v2.1/versions/v9", ""), 404, `{"itemNotFound": {"code": 404, "message": "The resource could not be found."}}`)
	a.expect(a.do("GET", "/nothing", ""), 300, `{"choices": [`+
		`{"id": "v2.0", "status": "SUPPORTED", "links": [{"rel": "self", "href": "http://nova.test:8774/v2/nothing"}], "media-types": [{"base": "application/json", "type": "application/vnd.openstack.compute+json;version=2"}]}, `+
		`{"id": "v2.1", "status": "CURRENT", "links": [{"rel": "self", "href": "http://nova.test:8774/v2.1/nothing"}], "media-types": [{"base": "application/json", "type": "application/vnd.openstack.compute+json;version=2.1"}]}]}`)
	if rec := a.do("GET", "/", "", mv("2.0")); rec.Code != 200 || rec.Header().Get("OpenStack-API-Version") != "" {
		t.Errorf("the root is outside microversions: %d %v", rec.Code, rec.Header())
	}
	if rec := a.do("GET", "/v2.1", "", mv("2.50")); rec.Header().Get("X-OpenStack-Nova-API-Version") != "2.50" {
		t.Errorf("/v2.1 negotiates: %v", rec.Header())
	}
}

func TestErrorShapes(t *testing.T) {
	a := newTestAPI(t)
	type errorCase struct {
		desc, method, path, body string
		hdr                      []string
		status                   int
		want                     string
		ctype                    string
	}
	cases := []errorCase{
		{desc: "no route, no Accept", method: "GET", path: "/v2.1/nothing", status: 404, ctype: "text/plain; charset=UTF-8",
			want: "404 Not Found\n\nThe resource could not be found.\n\n   "},
		{desc: "no route, JSON accepted", method: "GET", path: "/v2.1/nothing", hdr: []string{"Accept: application/json"}, status: 404, ctype: "application/json",
			want: `{"message": "The resource could not be found.<br /><br />\n\n\n", "code": "404 Not Found", "title": "Not Found"}`},
		{desc: "no route for the method", method: "PATCH", path: "/v2.1/flavors/1", status: 404, ctype: "text/plain; charset=UTF-8",
			want: "404 Not Found\n\nThe resource could not be found.\n\n   "},
		{desc: "no route wins over a bad version", method: "GET", path: "/v2.1/nothing", hdr: []string{mv("9.9")}, status: 404, ctype: "text/plain; charset=UTF-8",
			want: "404 Not Found\n\nThe resource could not be found.\n\n   "},
		{desc: "below the route's microversions", method: "PUT", path: "/v2.1/flavors/1", body: `{"flavor": {"description": "d"}}`, hdr: []string{mv("2.54")},
			status: 404, ctype: "application/json; charset=UTF-8", want: `{"itemNotFound": {"code": 404, "message": "The resource could not be found."}}`},
		{desc: "not found", method: "GET", path: "/v2.1/flavors/nope", status: 404, ctype: "application/json; charset=UTF-8",
			want: `{"itemNotFound": {"code": 404, "message": "Flavor nope could not be found."}}`},
		{desc: "malformed body", method: "POST", path: "/v2.1/flavors", body: `{"flavor": `, status: 400, ctype: "application/json; charset=UTF-8",
			want: `{"badRequest": {"code": 400, "message": "Malformed request body"}}`},
		{desc: "no body", method: "POST", path: "/v2.1/flavors", status: 400, ctype: "application/json; charset=UTF-8",
			want: `{"badRequest": {"code": 400, "message": "None is not of type 'object'"}}`},
		{desc: "unknown action", method: "POST", path: "/v2.1/flavors/1/action", body: `{"explode": {}}`, status: 400, ctype: "application/json; charset=UTF-8",
			want: `{"badRequest": {"code": 400, "message": "There is no such action: explode"}}`},
		{desc: "two actions", method: "POST", path: "/v2.1/flavors/1/action", body: `{"a": {}, "b": {}}`, status: 400, ctype: "application/json; charset=UTF-8",
			want: `{"badRequest": {"code": 400, "message": "Malformed request body"}}`},
		{desc: "media type", method: "POST", path: "/v2.1/flavors", hdr: []string{"Content-Type: application/xml"}, status: 415, ctype: "application/json; charset=UTF-8",
			want: `{"badMediaType": {"code": 415, "message": "Unsupported Content-Type"}}`},
	}
	// oslo's sizelimit, recorded from oslo_middleware with webob 1.8.
	huge := strings.Repeat("x", maxBody+1)
	cases = append(cases,
		errorCase{desc: "body too large", method: "POST", path: "/v2.1/flavors", body: huge, status: 413, ctype: "text/plain; charset=UTF-8",
			want: "413 Request Entity Too Large\n\nRequest is too large. Larger than max_request_body_size (114688).\n\n   "},
		errorCase{desc: "body too large, JSON accepted", method: "POST", path: "/v2.1/nothing", body: huge, hdr: []string{"Accept: application/json"}, status: 413, ctype: "application/json",
			want: `{"message": "Request is too large. Larger than max_request_body_size (114688).<br /><br />\n\n\n", "code": "413 Request Entity Too Large", "title": "Request Entity Too Large"}`},
	)
	for _, c := range cases {
		t.Run(c.desc, func(t *testing.T) {
			req := httptest.NewRequest(c.method, c.path, strings.NewReader(c.body))
			req.Host = "nova.test:8774"
			for _, h := range c.hdr {
				k, v, _ := strings.Cut(h, ": ")
				req.Header.Set(k, v)
			}
			rec := httptest.NewRecorder()
			a.h.ServeHTTP(rec, req)
			if rec.Code != c.status || rec.Body.String() != c.want || rec.Header().Get("Content-Type") != c.ctype {
				t.Errorf("got %d %q %q\nwant %d %q %q", rec.Code, rec.Header().Get("Content-Type"), rec.Body, c.status, c.ctype, c.want)
			}
		})
	}
}

// TestRoutePolicies: each route names the rule its Nova handler checks,
// with that rule's default (nova/policies/flavor_*.py in Nova 26), so
// wiring tokens is enforcing the column.
func TestRoutePolicies(t *testing.T) {
	want := map[string]policy{
		"GET /flavors": {}, "GET /flavors/detail": {}, "GET /flavors/{id}": {},
		"POST /flavors":                                   adminOnly("os_compute_api:os-flavor-manage:create"),
		"PUT /flavors/{id}":                               adminOnly("os_compute_api:os-flavor-manage:update"),
		"DELETE /flavors/{id}":                            adminOnly("os_compute_api:os-flavor-manage:delete"),
		"POST /flavors/{id}/action addTenantAccess":       adminOnly("os_compute_api:os-flavor-access:add_tenant_access"),
		"POST /flavors/{id}/action removeTenantAccess":    adminOnly("os_compute_api:os-flavor-access:remove_tenant_access"),
		"GET /flavors/{flavor_id}/os-flavor-access":       adminOnly("os_compute_api:os-flavor-access"),
		"GET /flavors/{flavor_id}/os-extra_specs":         projectReaderOrAdmin("os_compute_api:os-flavor-extra-specs:index"),
		"POST /flavors/{flavor_id}/os-extra_specs":        adminOnly("os_compute_api:os-flavor-extra-specs:create"),
		"GET /flavors/{flavor_id}/os-extra_specs/{id}":    projectReaderOrAdmin("os_compute_api:os-flavor-extra-specs:show"),
		"PUT /flavors/{flavor_id}/os-extra_specs/{id}":    adminOnly("os_compute_api:os-flavor-extra-specs:update"),
		"DELETE /flavors/{flavor_id}/os-extra_specs/{id}": adminOnly("os_compute_api:os-flavor-extra-specs:delete"),
		"GET /": {}, "GET /versions/{id}": {},

		// limits (RULE_ANY; other_project checked in the handler),
		// os-aggregates (nova/policies/aggregates.py), os-server-groups
		// (server_groups.py: show and delete check the group's project in
		// the handler, once it is loaded).
		"GET /limits":                                  {},
		"GET /os-aggregates":                           adminOnly("os_compute_api:os-aggregates:index"),
		"POST /os-aggregates":                          adminOnly("os_compute_api:os-aggregates:create"),
		"GET /os-aggregates/{id}":                      adminOnly("os_compute_api:os-aggregates:show"),
		"PUT /os-aggregates/{id}":                      adminOnly("os_compute_api:os-aggregates:update"),
		"DELETE /os-aggregates/{id}":                   adminOnly("os_compute_api:os-aggregates:delete"),
		"POST /os-aggregates/{id}/action add_host":     adminOnly("os_compute_api:os-aggregates:add_host"),
		"POST /os-aggregates/{id}/action remove_host":  adminOnly("os_compute_api:os-aggregates:remove_host"),
		"POST /os-aggregates/{id}/action set_metadata": adminOnly("os_compute_api:os-aggregates:set_metadata"),
		"GET /os-server-groups":                        projectReaderOrAdmin("os_compute_api:os-server-groups:index"),
		"POST /os-server-groups":                       projectMemberOrAdmin("os_compute_api:os-server-groups:create"),
		"GET /os-server-groups/{id}":                   {},
		"DELETE /os-server-groups/{id}":                {},
		// nova/policies/availability_zone.py, hypervisors.py, services.py
		"GET /os-availability-zone":        {rule: "os_compute_api:os-availability-zone:list"},
		"GET /os-availability-zone/detail": adminOnly("os_compute_api:os-availability-zone:detail"),
		"GET /os-hypervisors":              adminOnly("os_compute_api:os-hypervisors:list"),
		"GET /os-hypervisors/detail":       adminOnly("os_compute_api:os-hypervisors:list-detail"),
		"GET /os-hypervisors/statistics":   adminOnly("os_compute_api:os-hypervisors:statistics"),
		"GET /os-hypervisors/{id}":         adminOnly("os_compute_api:os-hypervisors:show"),
		"GET /os-hypervisors/{id}/search":  adminOnly("os_compute_api:os-hypervisors:search"),
		"GET /os-hypervisors/{id}/servers": adminOnly("os_compute_api:os-hypervisors:servers"),
		"GET /os-hypervisors/{id}/uptime":  adminOnly("os_compute_api:os-hypervisors:uptime"),
		"GET /os-quota-sets/{id}":          projectReaderOrAdmin("os_compute_api:os-quota-sets:show"),
		"PUT /os-quota-sets/{id}":          adminOnly("os_compute_api:os-quota-sets:update"),
		"DELETE /os-quota-sets/{id}":       adminOnly("os_compute_api:os-quota-sets:delete"),
		"GET /os-quota-sets/{id}/detail":   projectReaderOrAdmin("os_compute_api:os-quota-sets:detail"),
		"GET /os-quota-sets/{id}/defaults": {rule: "os_compute_api:os-quota-sets:defaults"},
		"GET /os-services":                 adminOnly("os_compute_api:os-services:list"),
		"PUT /os-services/{id}":            adminOnly("os_compute_api:os-services:update"),
		"DELETE /os-services/{id}":         adminOnly("os_compute_api:os-services:delete"),
		// create checks its rule in the handler, after min_count as Nova
		// does; show, delete and the instance actions once the server is
		// loaded (lookupServer).
		"GET /servers":         projectReaderOrAdmin("os_compute_api:servers:index"),
		"POST /servers":        {},
		"GET /servers/detail":  projectReaderOrAdmin("os_compute_api:servers:detail"),
		"GET /servers/{id}":    {},
		"DELETE /servers/{id}": {},
		"GET /servers/{server_id}/os-instance-actions": {},
		// the cold moves check servers:resize, confirm_resize,
		// revert_resize and os-migrate-server:migrate once the server is
		// loaded.
		"POST /servers/{id}/action resize":         {},
		"POST /servers/{id}/action confirmResize":  {},
		"POST /servers/{id}/action revertResize":   {},
		"POST /servers/{id}/action migrate":        {},
		"POST /servers/{id}/action os-migrateLive": {},
		"POST /servers/{id}/action evacuate":       {},
		// shelving checks os-shelve:shelve, shelve_offload and unshelve
		// (and unshelve_to_host for a host) once the server is loaded.
		"POST /servers/{id}/action shelve":        {},
		"POST /servers/{id}/action shelveOffload": {},
		"POST /servers/{id}/action unshelve":      {},
		// os-resetState checks os-admin-actions:reset_state once loaded.
		"POST /servers/{id}/action os-resetState":                         {},
		"GET /servers/{server_id}/migrations":                             {},
		"GET /servers/{server_id}/migrations/{id}":                        {},
		"DELETE /servers/{server_id}/migrations/{id}":                     {},
		"GET /os-migrations":                                              adminOnly("os_compute_api:os-migrations:index"),
		"GET /servers/{server_id}/os-instance-actions/{id}":               {},
		"POST /servers/{server_id}/migrations/{id}/action force_complete": {},
	}
	got := map[string]policy{}
	for _, rt := range New(nil, etcdschema.New("/t"), nil).routes {
		key := rt.method + " " + rt.path
		if rt.actions == nil {
			got[key] = rt.policy
		}
		for name, act := range rt.actions {
			got[key+" "+name] = act.policy
		}
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: policy %+v, want %+v", k, got[k], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d routes, %d expected: a new route needs its rule here", len(got), len(want))
	}
}

// TestChunkedBodyTooLarge: a body with no Content-Length is cut off as it
// is read, with sizelimit's answer.
func TestChunkedBodyTooLarge(t *testing.T) {
	a := newTestAPI(t)
	req := httptest.NewRequest("POST", "/v2.1/flavors", strings.NewReader(strings.Repeat(" ", maxBody+1)))
	req.ContentLength = -1
	rec := httptest.NewRecorder()
	a.h.ServeHTTP(rec, req)
	if rec.Code != 413 || !strings.Contains(rec.Body.String(), "Larger than max_request_body_size (114688).") {
		t.Errorf("got %d %s", rec.Code, rec.Body)
	}
}
