package stack

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// oscCLI runs the real `openstack` CLI (Debian's python3-openstackclient)
// as the admin against one dev stack: a clouds.yaml of its own with the
// admin token and the endpoints overridden, so no Keystone is needed.
type oscCLI struct {
	t   *testing.T
	ctx context.Context
	bin string
	dir string
}

// newAdminOSC skips the test when the CLI is not installed, and writes a
// cloud "berth" whose compute endpoint is compute (".../v2.1"); extra
// adds lines to the cloud (e.g. an image_endpoint_override).
func newAdminOSC(t *testing.T, ctx context.Context, compute string, extra ...string) *oscCLI {
	t.Helper()
	bin, err := exec.LookPath("openstack")
	if err != nil {
		t.Skip("the openstack CLI is not installed (apt-get install python3-openstackclient)")
	}
	dir := t.TempDir()
	clouds := "clouds:\n  berth:\n    auth_type: admin_token\n    auth:\n      token: admin:admin\n" +
		"      endpoint: " + compute + "\n    compute_endpoint_override: " + compute + "\n"
	for _, line := range extra {
		clouds += "    " + line + "\n"
	}
	if err := os.WriteFile(filepath.Join(dir, "clouds.yaml"), []byte(clouds), 0o600); err != nil {
		t.Fatal(err)
	}
	return &oscCLI{t: t, ctx: ctx, bin: bin, dir: dir}
}

// try runs `openstack --os-cloud berth --os-compute-api-version 2.latest
// args...` and returns its combined output and error.
func (c *oscCLI) try(args ...string) (string, error) {
	c.t.Helper()
	cctx, cancel := context.WithTimeout(c.ctx, 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(cctx, c.bin, append([]string{"--os-cloud", "berth", "--os-compute-api-version", "2.latest"}, args...)...)
	cmd.Dir = c.dir
	cmd.Env = append(os.Environ(), "OS_CLIENT_CONFIG_FILE="+filepath.Join(c.dir, "clouds.yaml"))
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// run is try that fails the test on an error.
func (c *oscCLI) run(args ...string) string {
	c.t.Helper()
	out, err := c.try(args...)
	if err != nil {
		c.t.Fatalf("openstack %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// showServer is `server show -f json id`, decoded.
func (c *oscCLI) showServer(id string) map[string]any {
	c.t.Helper()
	var s map[string]any
	if err := json.Unmarshal([]byte(c.run("server", "show", "-f", "json", id)), &s); err != nil {
		c.t.Fatal(err)
	}
	return s
}
