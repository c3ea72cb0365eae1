package api

import (
	"context"
	"encoding/json"
	clientv3 "go.etcd.io/etcd/client/v3"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/placement"
)

type noAllocations struct{}

func (noAllocations) DeleteAllocations(context.Context, string) error { return placement.ErrNotFound }

func newAPI(t *testing.T) (*httptest.Server, etcdschema.Keys) {
	t.Helper()
	srv, keys, _ := newAPIWithClient(t)
	return srv, keys
}

func newAPIWithClient(t *testing.T) (*httptest.Server, etcdschema.Keys, *clientv3.Client) {
	t.Helper()
	cli := etcdtest.Client(t)
	keys := etcdschema.New("/t")
	if err := EnsureFlavors(context.Background(), cli, keys, DefaultFlavors()); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(New(cli, keys, noAllocations{}, hclog.NewNullLogger()))
	t.Cleanup(srv.Close)
	return srv, keys, cli
}

func do(t *testing.T, method, url, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

func TestCreateServersValidation(t *testing.T) {
	srv, _ := newAPI(t)
	cases := []struct {
		desc, body string
		status     int
		msg        string
	}{
		{"malformed JSON", `{"name":`, 400, "Malformed request body"},
		{"no name", `{"flavor":"m1.small"}`, 400, "'name'"},
		{"no flavor", `{"name":"a"}`, 400, "'flavor'"},
		{"count zero", `{"name":"a","flavor":"m1.small","count":0}`, 400, "'count'"},
		{"count too big", `{"name":"a","flavor":"m1.small","count":1001}`, 400, "'count'"},
		{"unknown flavor", `{"name":"a","flavor":"m9.huge"}`, 404, "Flavor m9.huge could not be found"},
		{"flat form", `{"name":"a","flavor":"m1.small","count":2}`, 202, ""},
		{"Nova's wrapped form with flavorRef id", `{"server":{"name":"b","flavorRef":"2","max_count":1}}`, 202, ""},
	}
	for _, c := range cases {
		t.Run(c.desc, func(t *testing.T) {
			status, out := do(t, http.MethodPost, srv.URL+"/v1/servers", c.body)
			if status != c.status {
				t.Fatalf("status %d, want %d (%v)", status, c.status, out)
			}
			if c.msg != "" {
				b, _ := json.Marshal(out)
				if !strings.Contains(string(b), c.msg) {
					t.Fatalf("error %s does not mention %q", b, c.msg)
				}
			}
		})
	}
}

func TestServerLifecycleBeforeScheduling(t *testing.T) {
	srv, _ := newAPI(t)
	status, out := do(t, http.MethodPost, srv.URL+"/v1/servers", `{"name":"web","flavor":"m1.tiny","count":2}`)
	if status != 202 {
		t.Fatalf("create: %d %v", status, out)
	}
	servers := out["servers"].([]any)
	id := servers[0].(map[string]any)["id"].(string)

	status, out = do(t, http.MethodGet, srv.URL+"/v1/servers/"+id, "")
	s := out["server"].(map[string]any)
	if status != 200 || s["status"] != "BUILD" || s["name"] != "web-1" {
		t.Fatalf("show before scheduling: %d %v", status, out)
	}
	status, out = do(t, http.MethodGet, srv.URL+"/v1/servers", "")
	if status != 200 || len(out["servers"].([]any)) != 2 {
		t.Fatalf("list: %d %v", status, out)
	}
	if status, _ = do(t, http.MethodDelete, srv.URL+"/v1/servers/"+id, ""); status != 204 {
		t.Fatalf("delete: %d", status)
	}
	if status, _ = do(t, http.MethodGet, srv.URL+"/v1/servers/"+id, ""); status != 404 {
		t.Fatalf("show after delete: %d, want 404", status)
	}
	if status, _ = do(t, http.MethodDelete, srv.URL+"/v1/servers/"+id, ""); status != 404 {
		t.Fatalf("second delete: %d, want 404", status)
	}
	if status, _ = do(t, http.MethodGet, srv.URL+"/v1/nothing", ""); status != 404 {
		t.Fatalf("unknown path: %d, want 404", status)
	}
}
