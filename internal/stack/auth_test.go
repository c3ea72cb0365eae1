package stack

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/configs"
	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/internal/logtest"
	"github.com/berth-project/berth/scheduler"
)

// authDirectory is the identity block's users, projects and roles:
// admin (admin of project admin) and alice (member of demo); each
// password is "<name>-pw" at bcrypt's minimum cost.
const authDirectory = `
  user "admin" {
    password_hash = "$2a$04$O/tEIMbalrfK/ARV9sBA1OpZwm.IaJMBU904y8c/L6FRKaSN8qorq"
  }
  user "alice" {
    password_hash = "$2a$04$lor8NbSq/K4dbN1L7kq6kuuilUyd5/.L8UYJWVkosBOggE7rHk8BK"
  }
  project "admin" {}
  project "demo" {}
  assignment {
    user    = "admin"
    project = "admin"
    role    = "admin"
  }
  assignment {
    user    = "alice"
    project = "demo"
    role    = "member"
  }
`

// startServerFromHCL starts `berth server`'s roles of hcl on cli, logging
// to log (nil: nowhere).
func startServerFromHCL(t *testing.T, cli *clientv3.Client, hcl string, log hclog.Logger) *Stack {
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
	if log == nil {
		log = hclog.NewNullLogger()
	}
	s := New(cfg, log)
	s.Attach(cli)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.StartServerRoles(ctx); err != nil {
		t.Fatalf("start server roles: %v", err)
	}
	t.Cleanup(s.Stop)
	return s
}

// login is a password login on the identity API at url; the token.
func login(t *testing.T, url, user, password, project string) string {
	t.Helper()
	body := fmt.Sprintf(`{"auth": {"identity": {"methods": ["password"], "password": {"user": {"name": %q, "domain": {"id": "default"}, "password": %q}}}, "scope": {"project": {"name": %q, "domain": {"id": "default"}}}}}`, user, password, project)
	resp, err := http.Post(url+"/v3/auth/tokens", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("login %s: %d", user, resp.StatusCode)
	}
	return resp.Header.Get("X-Subject-Token")
}

func getStatus(t *testing.T, url, token string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if token != "" {
		req.Header.Set("X-Auth-Token", token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// TestStackAuth: two servers of one deployment. The first serves
// identity, the compute API and Placement in keystone mode, and a
// scheduler; the second has the identity block only to check tokens
// (bind = "") for its own compute API. A token from the first works on
// both; the scheduler refuses anonymous and user callers, and takes the
// second server's service token (minted with the key both read from
// etcd) as its superconductor sends it.
func TestStackAuth(t *testing.T) {
	cli := etcdtest.Client(t)
	first := startServerFromHCL(t, cli, `
etcd {
  prefix = "/auth"
}
api {
  bind = "127.0.0.1:0"
  auth = "keystone"
}
placement {
  bind = "127.0.0.1:0"
  auth = "keystone"
}
scheduler {
  bind = "127.0.0.1:0"
}
identity {
  bind = "127.0.0.1:0"
`+authDirectory+`}
`, nil)
	second := startServerFromHCL(t, cli, `
etcd {
  prefix = "/auth"
}
api {
  bind = "127.0.0.1:0"
  auth = "keystone"
}
identity {
  bind = ""
`+authDirectory+`}
`, nil)
	if ep := second.Endpoint("identity"); ep != "" {
		t.Errorf("bind = \"\" served identity at %s", ep)
	}
	alice := login(t, first.Endpoint("identity"), "alice", "alice-pw", "demo")
	admin := login(t, first.Endpoint("identity"), "admin", "admin-pw", "admin")
	for _, tc := range []struct {
		desc, url, token string
		want             int
	}{
		{"compute, anonymous", first.Endpoint("compute API") + "/v2.1/flavors", "", 401},
		{"compute, noauth2's admin token", first.Endpoint("compute API") + "/v2.1/flavors", "admin:admin", 401},
		{"compute, alice", first.Endpoint("compute API") + "/v2.1/flavors", alice, 200},
		{"compute of the server without an identity API, alice", second.Endpoint("compute API") + "/v2.1/flavors", alice, 200},
		{"compute of the server without an identity API, anonymous", second.Endpoint("compute API") + "/v2.1/flavors", "", 401},
		{"compute, version document", first.Endpoint("compute API") + "/v2.1", "", 200},
		{"placement, anonymous", first.Endpoint("placement") + "/resource_providers", "", 401},
		{"placement, alice (member, not admin)", first.Endpoint("placement") + "/resource_providers", alice, 403},
		{"placement, admin", first.Endpoint("placement") + "/resource_providers", admin, 200},
	} {
		if got := getStatus(t, tc.url, tc.token); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.desc, got, tc.want)
		}
	}

	// The scheduler: a user's token, even an admin's, is no service's.
	sched := first.Endpoint("scheduler")
	spec := `{"instance_uuids": ["9a0f8e4c-0d1b-4d2e-8f3a-1b2c3d4e5f60"], "flavor": {"vcpus": 1, "memory_mb": 64}}`
	for _, token := range []string{"", "garbage", admin} {
		req, _ := http.NewRequest(http.MethodPost, sched+scheduler.SelectPath, strings.NewReader(spec))
		if token != "" {
			req.Header.Set("X-Auth-Token", token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("select_destinations with token %.8q: %d, want 401", token, resp.StatusCode)
		}
	}
	client, err := second.schedulerClient(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var rs scheduler.RequestSpec
	if err := json.Unmarshal([]byte(spec), &rs); err != nil {
		t.Fatal(err)
	}
	// No host exists: an authenticated call gets NoValidHost, not 401.
	_, err = (&scheduler.Remote{URL: sched, Client: client}).SelectDestinations(context.Background(), &rs)
	var nvh *scheduler.NoValidHostError
	if !errors.As(err, &nvh) {
		t.Errorf("select_destinations with the second server's service token: %v, want NoValidHost", err)
	}
}

// TestOpenStackCLIKeystone: the real `openstack` CLI logs in through a
// clouds.yaml against a server with identity and the compute API in
// keystone mode, finds compute in the token's catalog, lists flavors as
// a member, is refused flavor create as a member (403) and allowed it as
// an admin, and gets 401 for a wrong password.
func TestOpenStackCLIKeystone(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the openstack CLI (seconds of Python start-up)")
	}
	osc, err := exec.LookPath("openstack")
	if err != nil {
		t.Skip("no openstack CLI (apt-get install python3-openstackclient)")
	}
	idPort, apiPort := etcdtest.FreePort(t), etcdtest.FreePort(t)
	s := startServerFromHCL(t, etcdtest.Client(t), fmt.Sprintf(`
api {
  bind = "127.0.0.1:%[2]d"
  auth = "keystone"
}
identity {
  bind = "127.0.0.1:%[1]d"
  endpoint "compute" {
    public = "http://127.0.0.1:%[2]d/v2.1"
  }
  endpoint "identity" {
    public = "http://127.0.0.1:%[1]d/v3"
  }
`+authDirectory+`}
`, idPort, apiPort), nil)
	home := t.TempDir()
	cfgPath := writeClouds(t, home, s.Endpoint("identity"), cloudEntry{"member", "alice", "alice-pw", "demo"},
		cloudEntry{"admin", "admin", "admin-pw", "admin"}, cloudEntry{"wrong", "alice", "not-alice-pw", "demo"})
	run := func(cloud string, args ...string) (string, string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, osc, append([]string{"--os-cloud", cloud, "--os-compute-api-version", "2.latest"}, args...)...)
		cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "OS_CLIENT_CONFIG_FILE=" + cfgPath}
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		return o.String(), e.String(), err
	}
	out, errOut, err := run("member", "flavor", "list", "-f", "value", "-c", "Name")
	if err != nil || !strings.Contains(out, "m1.tiny") {
		t.Fatalf("flavor list as a member: %v\n%s%s", err, out, errOut)
	}
	create := []string{"flavor", "create", "--ram", "256", "--vcpus", "1", "--disk", "1", "cli.small"}
	out, errOut, err = run("member", create...)
	if err == nil || !strings.Contains(errOut, "403") ||
		!strings.Contains(errOut, "Policy doesn't allow os_compute_api:os-flavor-manage:create to be performed.") {
		t.Errorf("flavor create as a member: %v, want 403 and Nova's policy message\n%s%s", err, out, errOut)
	}
	if out, errOut, err = run("admin", create...); err != nil {
		t.Errorf("flavor create as an admin: %v\n%s%s", err, out, errOut)
	}
	out, errOut, err = run("wrong", "flavor", "list")
	if err == nil || !strings.Contains(errOut, "HTTP 401") {
		t.Errorf("wrong password: %v, want HTTP 401\n%s%s", err, out, errOut)
	}
}

// TestNoAuthWithIdentityTokens: a compute API in noauth (berth dev's) with
// an identity block takes noauth2's tokens and the identity's, each with
// its own roles, and says loudly at start-up that it is noauth.
func TestNoAuthWithIdentityTokens(t *testing.T) {
	var logs logtest.Buffer
	s := startServerFromHCL(t, etcdtest.Client(t), `
api {
  bind = "127.0.0.1:0"
}
placement {
  bind = "127.0.0.1:0"
}
identity {
  bind = "127.0.0.1:0"
`+authDirectory+`}
`, hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Info}))
	for _, api := range []string{"compute", "placement"} {
		if !strings.Contains(logs.String(), "[WARN]  auth: noauth — every caller is admin; for development only: api="+api) {
			t.Errorf("no noauth warning for %s in:\n%s", api, logs.String())
		}
	}
	alice := login(t, s.Endpoint("identity"), "alice", "alice-pw", "demo")
	flavors := s.Endpoint("compute API") + "/v2.1/flavors"
	for _, tc := range []struct {
		desc, token string
		want        int
	}{
		{"noauth2's admin", "admin:admin", 200},
		{"noauth2's user", "bob:p1", 403},
		{"alice's identity token: a member", alice, 403},
		{"anonymous: the token noauth2's 204 would hand out, admin:admin", "", 200},
	} {
		req, _ := http.NewRequest(http.MethodPost, flavors, strings.NewReader(`{"flavor": {"name": "f-`+fmt.Sprint(tc.want)+`-`+strings.ReplaceAll(tc.desc[:5], " ", "")+`", "ram": 64, "vcpus": 1, "disk": 0}}`))
		req.Header.Set("Content-Type", "application/json")
		if tc.token != "" {
			req.Header.Set("X-Auth-Token", tc.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("flavor create as %s: %d %s, want %d", tc.desc, resp.StatusCode, b, tc.want)
		}
	}
	if got := getStatus(t, flavors, alice); got != 200 {
		t.Errorf("flavor list with alice's token: %d", got)
	}
}

// cloudEntry is one clouds.yaml entry: user logs in to project.
type cloudEntry struct{ name, user, password, project string }

// writeClouds writes the openstack CLI's clouds.yaml with entries, all
// logging in at identityURL (the identity API's base), into dir, and
// returns its path.
func writeClouds(t *testing.T, dir, identityURL string, entries ...cloudEntry) string {
	t.Helper()
	clouds := "clouds:\n"
	for _, e := range entries {
		clouds += fmt.Sprintf(`  %s:
    auth:
      auth_url: %s/v3
      username: %s
      password: %s
      project_name: %s
      user_domain_name: Default
      project_domain_name: Default
    region_name: RegionOne
    identity_api_version: 3
`, e.name, identityURL, e.user, e.password, e.project)
	}
	path := filepath.Join(dir, "clouds.yaml")
	if err := os.WriteFile(path, []byte(clouds), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
