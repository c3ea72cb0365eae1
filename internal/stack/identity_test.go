package stack

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/configs"
	"github.com/berth-project/berth/internal/etcdtest"
)

// identityHCL is a server with the identity role alone; alice's hash is
// of "alice-pw" at bcrypt's minimum cost.
const identityHCL = `
etcd {
  prefix = "%PREFIX%"
}
identity {
  bind = "127.0.0.1:0"
  user "alice" {
    password_hash = "$2a$04$lor8NbSq/K4dbN1L7kq6kuuilUyd5/.L8UYJWVkosBOggE7rHk8BK"
  }
  project "demo" {}
  assignment {
    user    = "alice"
    project = "demo"
    role    = "member"
  }
}
`

// startIdentityServer starts `berth server`'s roles from identityHCL on
// cli under prefix and returns its identity URL.
func startIdentityServer(t *testing.T, cli *clientv3.Client, prefix string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "server.hcl")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(identityHCL, "%PREFIX%", prefix)), 0o600); err != nil {
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
	s.Attach(cli)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.StartServerRoles(ctx); err != nil {
		t.Fatalf("start server roles: %v", err)
	}
	t.Cleanup(s.Stop)
	url := s.Endpoint("identity")
	if url == "" {
		t.Fatalf("no identity endpoint in %v", s.Endpoints)
	}
	return url
}

// TestIdentityTokensAcceptedByEveryServer: a token one server issues is
// valid on another of the same deployment (they share the signing key in
// etcd), and on no other deployment's.
func TestIdentityTokensAcceptedByEveryServer(t *testing.T) {
	cli := etcdtest.Client(t)
	a := startIdentityServer(t, cli, "/deploy-a")
	b := startIdentityServer(t, cli, "/deploy-a")
	other := startIdentityServer(t, cli, "/deploy-b")

	body := `{"auth": {"identity": {"methods": ["password"], "password": {"user": {"name": "alice", "domain": {"id": "default"}, "password": "alice-pw"}}}, "scope": {"project": {"name": "demo", "domain": {"id": "default"}}}}}`
	resp, err := http.Post(a+"/v3/auth/tokens", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	token := resp.Header.Get("X-Subject-Token")
	if resp.StatusCode != http.StatusCreated || token == "" {
		t.Fatalf("login on server a: %d, token %q", resp.StatusCode, token)
	}
	for _, tc := range []struct {
		desc, url string
		want      int
	}{
		{"the issuing server", a, http.StatusOK},
		{"another server of the deployment", b, http.StatusOK},
		{"a server of another deployment", other, http.StatusUnauthorized},
	} {
		req, _ := http.NewRequest(http.MethodHead, tc.url+"/v3/auth/tokens", nil)
		req.Header.Set("X-Auth-Token", token)
		req.Header.Set("X-Subject-Token", token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s: HEAD /v3/auth/tokens = %d, want %d", tc.desc, resp.StatusCode, tc.want)
		}
	}
}
