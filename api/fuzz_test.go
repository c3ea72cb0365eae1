package api

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/placement"
)

// bodyRoute is a compute API route that reads a JSON request body.
type bodyRoute struct{ method, path string }

// fuzzedRoutes are every route that reads a request body, against an
// aggregate and a host that exist (so that a body gets past the lookups
// to the code that acts on it).
var fuzzedRoutes = []bodyRoute{
	{http.MethodPost, "/v1/servers"},
	{http.MethodPost, "/v1/server-groups"},
	{http.MethodPost, "/v1/os-aggregates"},
	{http.MethodPut, "/v1/os-aggregates/{agg}"},
	{http.MethodPost, "/v1/os-aggregates/{agg}/action"},
	{http.MethodPut, "/v1/services/h1"},
	{http.MethodPost, "/v1/cells"},
}

// FuzzRequestBodies: for any body sent to any route that reads one, the
// API never panics and never answers 5xx (etcd is healthy: nothing but
// the body can be at fault), and every refusal is in Nova's error shape
// with a message saying what was wrong.
//
// route picks the route (modulo len(fuzzedRoutes)). Seeds are in
// testdata/fuzz/FuzzRequestBodies.
func FuzzRequestBodies(f *testing.F) {
	ctx, cancel := context.WithCancel(context.Background())
	f.Cleanup(cancel)
	cli := etcdtest.Client(f)
	keys := etcdschema.New("/t")
	p := placement.New(cli, keys, hclog.NewNullLogger())
	if err := p.Start(ctx); err != nil {
		f.Fatal(err)
	}
	if err := EnsureFlavors(ctx, cli, keys, DefaultFlavors()); err != nil {
		f.Fatal(err)
	}
	if err := p.EnsureProvider(ctx, "rp-h1", "h1", ""); err != nil {
		f.Fatal(err)
	}
	svc := &etcdschema.Service{Host: "h1", Cell: "cell1", ProviderUUID: "rp-h1"}
	if _, err := cli.Put(ctx, keys.Service("h1"), etcdschema.MustEncode(svc)); err != nil {
		f.Fatal(err)
	}
	api := New(cli, keys, p, hclog.NewNullLogger())
	api.SetDefaultAvailabilityZone("home")
	serve := func(method, path string, body []byte) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		api.ServeHTTP(w, httptest.NewRequest(method, path, bytes.NewReader(body)))
		return w
	}
	created := serve(http.MethodPost, "/v1/os-aggregates", []byte(`{"aggregate":{"name":"agg1"}}`))
	var agg struct{ Aggregate AggregateView }
	if err := json.Unmarshal(created.Body.Bytes(), &agg); err != nil || created.Code != http.StatusOK {
		f.Fatalf("create the aggregate to fuzz: %d %s", created.Code, created.Body)
	}
	for i, body := range []string{
		`{"name":"a","flavor":"m1.small"}`,
		`{"server_group":{"name":"g","policy":"anti-affinity","rules":{"max_server_per_host":2}}}`,
		`{"aggregate":{"name":"a2","availability_zone":"z1"}}`,
		`{"aggregate":{"availability_zone":null}}`,
		`{"add_host":{"host":"h1"}}`,
		`{"status":"disabled","disabled_reason":"maintenance"}`,
		`{"name":"cell2"}`,
	} {
		f.Add(uint8(i), []byte(body))
	}
	f.Fuzz(func(t *testing.T, route uint8, body []byte) {
		r := fuzzedRoutes[int(route)%len(fuzzedRoutes)]
		path := bytes.ReplaceAll([]byte(r.path), []byte("{agg}"), []byte(agg.Aggregate.ID))
		w := serve(r.method, string(path), body)
		if w.Code >= 500 {
			t.Fatalf("%s %s %q: status %d: %s", r.method, path, body, w.Code, w.Body)
		}
		if w.Code < 400 {
			return
		}
		// {"<kind>": {"code": <status>, "message": "..."}}
		var refusal map[string]struct {
			Code    int
			Message string
		}
		if err := json.Unmarshal(w.Body.Bytes(), &refusal); err != nil || len(refusal) != 1 {
			t.Fatalf("%s %s %q: status %d with a body not in Nova's error shape: %s", r.method, path, body, w.Code, w.Body)
		}
		for kind, e := range refusal {
			if e.Code != w.Code || e.Message == "" {
				t.Fatalf("%s %s %q: status %d refused as %s %d with message %q", r.method, path, body, w.Code, kind, e.Code, e.Message)
			}
		}
	})
}
