package identity

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// TestOpenStackCLITokenIssue logs in with the real `openstack` CLI
// (Debian's python3-openstackclient, keystoneauth1 underneath) through a
// clouds.yaml, as an operator would: discovery of auth_url, the password
// login, and the token it prints. A wrong password must fail with 401.
func TestOpenStackCLITokenIssue(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the openstack CLI (seconds of Python start-up)")
	}
	cli, err := exec.LookPath("openstack")
	if err != nil {
		t.Skip("no openstack CLI (apt-get install python3-openstackclient)")
	}
	svc, err := New(testConfig(t), testKey) // the real clock: the CLI checks expires_at
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(NewAPI(svc, hclog.NewNullLogger())) // loopback, a free port
	t.Cleanup(srv.Close)

	home := t.TempDir()
	clouds := `clouds:
  berth:
    auth:
      auth_url: ` + srv.URL + `/v3
      username: alice
      password: alice-pw
      project_name: demo
      user_domain_name: Default
      project_domain_name: Default
    region_name: RegionOne
    identity_api_version: 3
  berth-wrong:
    auth:
      auth_url: ` + srv.URL + `/v3
      username: alice
      password: not-alice-pw
      project_name: demo
      user_domain_name: Default
      project_domain_name: Default
    identity_api_version: 3
`
	cfgPath := filepath.Join(home, "clouds.yaml")
	if err := os.WriteFile(cfgPath, []byte(clouds), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(cloud string) (stdout, stderr string, err error) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, cli, "--os-cloud", cloud, "token", "issue", "-f", "json")
		// Only this clouds.yaml, no OS_* from the environment, no cache
		// in the real home.
		cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "OS_CLIENT_CONFIG_FILE=" + cfgPath}
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		err = cmd.Run()
		return o.String(), e.String(), err
	}

	out, errOut, err := run("berth")
	if err != nil {
		t.Fatalf("openstack token issue as a member: %v\nstdout: %s\nstderr: %s", err, out, errOut)
	}
	var tok map[string]string
	if err := json.Unmarshal([]byte(out), &tok); err != nil {
		t.Fatalf("token issue printed %q: %v", out, err)
	}
	if tok["project_id"] != DerivedID("project", "demo") || tok["user_id"] != DerivedID("user", "alice") || tok["id"] == "" {
		t.Errorf("token issue = %v", tok)
	}
	if _, err := svc.Verify(tok["id"]); err != nil {
		t.Errorf("the printed token does not verify: %v", err)
	}

	out, errOut, err = run("berth-wrong")
	if err == nil {
		t.Fatalf("a wrong password logged in: %s", out)
	}
	if !strings.Contains(errOut, "HTTP 401") {
		t.Errorf("wrong password: stderr %q, want HTTP 401", errOut)
	}
}
