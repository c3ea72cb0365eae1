package stack

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/berth-project/berth/configs"
	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/internal/logtest"
	"github.com/berth-project/berth/internal/testwait"
)

// startPlacementFromHCL starts the placement role of `berth server` as the
// binary does (config file → stack → HTTP), over a real embedded etcd, and
// returns its URL.
func startPlacementFromHCL(t *testing.T, hcl string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "server.hcl")
	if err := os.WriteFile(path, []byte(hcl), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := configs.Load(path)
	if err != nil {
		t.Fatalf("load config: %v", err)
	}
	if err := cfg.Require(configs.RoleServer); err != nil {
		t.Fatalf("require server: %v", err)
	}
	s := New(cfg, hclog.NewNullLogger())
	s.Attach(etcdtest.Client(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.StartServerRoles(ctx); err != nil {
		t.Fatalf("start server roles: %v", err)
	}
	t.Cleanup(s.Stop)
	for _, ep := range s.Endpoints {
		if ep[0] == "placement" {
			return ep[1]
		}
	}
	t.Fatalf("no placement endpoint in %v", s.Endpoints)
	return ""
}

type authCase struct {
	desc   string
	method string
	path   string
	header map[string]string // nil X-Auth-Token means none is sent
	want   int
	// wantBody is a substring the response body must contain.
	wantBody string
}

func runAuthCases(t *testing.T, base string, cases []authCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			method := tc.method
			if method == "" {
				method = http.MethodGet
			}
			var body io.Reader
			if method == http.MethodPost {
				body = strings.NewReader(`{"name": "rp-` + strings.ReplaceAll(tc.desc, " ", "-") + `"}`)
			}
			req, err := http.NewRequest(method, base+tc.path, body)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("OpenStack-API-Version", "placement 1.39")
			if body != nil {
				req.Header.Set("Content-Type", "application/json")
			}
			for k, v := range tc.header {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Fatalf("%s %s = %d, want %d; body: %s", method, tc.path, resp.StatusCode, tc.want, b)
			}
			if tc.wantBody != "" && !strings.Contains(string(b), tc.wantBody) {
				t.Errorf("body %s does not contain %q", b, tc.wantBody)
			}
			if resp.StatusCode >= 400 && !json.Valid(b) {
				t.Errorf("error body is not JSON: %s", b)
			}
		})
	}
}

func tok(v string, kv ...string) map[string]string {
	h := map[string]string{"X-Auth-Token": v}
	for i := 0; i+1 < len(kv); i += 2 {
		h[kv[i]] = kv[i+1]
	}
	return h
}

// TestPlacementAuthFromConfig checks that the placement block's auth
// settings reach the Placement API `berth server` serves.
func TestPlacementAuthFromConfig(t *testing.T) {
	const unauthorized = `"title":"Unauthorized"`
	// In tokens mode a 401 is OpenStack's error JSON, which the openstack
	// CLI reads errors[0].detail from.
	const tokenRequired = `"detail":"This server could not verify that you are authorized to access the document you requested. Either you supplied the wrong credentials (e.g., bad password), or your browser does not understand how to supply the credentials required.\n\n The request you have made requires authentication.  "`
	const forbidden = "Policy does not allow placement:resource_providers:list to be performed."

	t.Run("noauth by default", func(t *testing.T) {
		base := startPlacementFromHCL(t, "placement {\n  bind = \"127.0.0.1:0\"\n}\n")
		runAuthCases(t, base, []authCase{
			{desc: "root is open", path: "/", want: 200, wantBody: `"max_version":"1.39"`},
			{desc: "no token", path: "/resource_providers", want: 401, wantBody: unauthorized},
			{desc: "admin token", path: "/resource_providers", header: tok("admin"), want: 200},
			{desc: "admin creates", method: http.MethodPost, path: "/resource_providers", header: tok("admin"), want: 200},
			{desc: "user in project", path: "/resource_providers", header: tok("alice:p1"), want: 403, wantBody: forbidden},
			{desc: "admin role from X-Roles", path: "/resource_providers", header: tok("alice:p1", "X-Roles", "admin"), want: 200},
			{desc: "X-Roles replaces admin's role", path: "/resource_providers", header: tok("admin", "X-Roles", "reader"), want: 403},
			{desc: "project reader reads own usages", path: "/usages?project_id=p1", header: tok("alice:p1", "X-Roles", "reader"), want: 200},
			{desc: "project reader denied other usages", path: "/usages?project_id=p2", header: tok("alice:p1", "X-Roles", "reader"), want: 403},
		})
	})

	t.Run("tokens", func(t *testing.T) {
		base := startPlacementFromHCL(t, `placement {
  bind = "127.0.0.1:0"
  auth = "tokens"
  token "op-secret" {
    roles      = ["admin"]
    project_id = "ops"
    user_id    = "operator"
  }
  token "tenant-secret" {
    roles      = ["reader"]
    project_id = "p1"
    user_id    = "alice"
  }
  token "monitor-secret" {
    roles        = ["reader"]
    system_scope = "all"
  }
}
`)
		runAuthCases(t, base, []authCase{
			{desc: "root is open", path: "/", want: 200},
			{desc: "no token", path: "/resource_providers", want: 401, wantBody: unauthorized},
			{desc: "unknown token", path: "/resource_providers", header: tok("wrong"), want: 401, wantBody: tokenRequired},
			// noauth's conventions do not apply in tokens mode.
			{desc: "noauth admin is unknown", path: "/resource_providers", header: tok("admin"), want: 401},
			{desc: "noauth user:project is unknown", path: "/resource_providers", header: tok("alice:p1"), want: 401},
			{desc: "admin token", path: "/resource_providers", header: tok("op-secret"), want: 200},
			{desc: "admin token creates", method: http.MethodPost, path: "/resource_providers", header: tok("op-secret"), want: 200},
			{desc: "X-Roles cannot raise a token", path: "/resource_providers", header: tok("tenant-secret", "X-Roles", "admin"), want: 403, wantBody: forbidden},
			{desc: "reader token denied admin rule", path: "/resource_providers", header: tok("tenant-secret"), want: 403, wantBody: forbidden},
			{desc: "reader token denied create", method: http.MethodPost, path: "/resource_providers", header: tok("tenant-secret"), want: 403},
			{desc: "reader token reads own project usages", path: "/usages?project_id=p1", header: tok("tenant-secret"), want: 200},
			{desc: "reader token denied other project usages", path: "/usages?project_id=p2", header: tok("tenant-secret"), want: 403},
			{desc: "system reader lists", path: "/resource_providers", header: tok("monitor-secret"), want: 200},
			{desc: "system reader reads any usages", path: "/usages?project_id=p2", header: tok("monitor-secret"), want: 200},
			{desc: "system reader cannot create", method: http.MethodPost, path: "/resource_providers", header: tok("monitor-secret"), want: 403,
				wantBody: "Policy does not allow placement:resource_providers:create to be performed."},
			{desc: "OpenStack-System-Scope cannot widen a token", path: "/resource_providers", header: tok("tenant-secret", "OpenStack-System-Scope", "all"), want: 403},
		})
	})
}

// TestConnectLogsEmbeddedEtcd: a process embedding etcd (berth etcd, dev,
// an all-in-one server) logs etcd's own records under its logger, as
// "<role>.etcd" lines, from etcd { embedded { log_level } } up.
func TestConnectLogsEmbeddedEtcd(t *testing.T) {
	for _, level := range []string{"info", "warn"} {
		t.Run(level, func(t *testing.T) {
			src := fmt.Sprintf("etcd {\n  embedded {\n    data_dir = %q\n    client_url = \"http://127.0.0.1:%d\"\n    peer_url = \"http://127.0.0.1:%d\"\n    log_level = %q\n  }\n}\n",
				filepath.Join(t.TempDir(), "etcd"), etcdtest.FreePort(t), etcdtest.FreePort(t), level)
			cfg, err := configs.Parse([]byte(src), "etcd.hcl")
			if err != nil {
				t.Fatal(err)
			}
			var buf logtest.Buffer
			log := hclog.New(&hclog.LoggerOptions{Name: "berth", Output: &buf, Level: hclog.Debug}).Named("etcd-role")
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			s, err := Connect(ctx, cfg, log)
			if err != nil {
				t.Fatal(err)
			}
			const ready = "[INFO]  berth.etcd-role.etcd: ready to serve client requests"
			if level == "info" {
				defer s.Stop()
				testwait.Poll(t, 30*time.Second, fmt.Sprintf("%q in the log", ready), func() (bool, string) {
					out := buf.String()
					return strings.Contains(out, ready), "log:\n" + out
				})
				return
			}
			// stop closes the member, after which every start-up record
			// etcd would write has been written.
			s.Stop()
			if out := buf.String(); strings.Contains(out, "[INFO]  berth.etcd-role.etcd") {
				t.Errorf("etcd at warn logged info lines:\n%s", out)
			}
		})
	}
}
