package stack

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/berth-project/berth/configs"
	"github.com/berth-project/berth/images"
	"github.com/berth-project/berth/internal/etcdtest"
)

// TestOpenStackCLIServers drives the real `openstack` CLI (Debian's
// python3-openstackclient) through a server's life against a dev stack
// (server roles with the image API, a cell conductor, one host whose
// agent runs the process driver): create from the default image
// berth-sleep with --wait (the CLI resolves --image through the image
// API, the compute API through the same image store, and the agent runs
// its `sleep infinity`), list, show, delete with --wait. The CLI calls
// as noauth2's admin (admin_token admin:admin); the image API is in
// noauth mode.
func TestOpenStackCLIServers(t *testing.T) {
	osc, err := exec.LookPath("openstack")
	if err != nil {
		t.Skip("the openstack CLI is not installed (apt-get install python3-openstackclient)")
	}
	imageID := images.DefaultID(images.DefaultSleepImage)
	cfg := configs.Defaults()
	cfg.EnableAllRoles()
	cfg.Etcd.Embedded = nil
	cfg.API.Bind, cfg.Placement.Bind, cfg.Scheduler.Bind = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	cfg.Image = &configs.Image{Bind: "127.0.0.1:0", Auth: configs.AuthNoAuth}
	cfg.Agent.Driver = configs.DriverProcess
	procDir := t.TempDir()
	cfg.Agent.Process.StateDir = procDir
	cfg.Agent.Process.StopGrace = 5 * time.Second
	s := New(cfg, hclog.NewNullLogger())
	s.Attach(etcdtest.Client(t))
	t.Cleanup(s.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := Dev(DevOptions{Hosts: 1, Cells: 1, DataDir: t.TempDir()})(ctx, s); err != nil {
		t.Fatalf("start dev: %v", err)
	}
	dir := t.TempDir()
	clouds := "clouds:\n  berth:\n    auth_type: admin_token\n    auth:\n      token: admin:admin\n" +
		"      endpoint: " + s.Endpoint("compute API") + "/v2.1\n" +
		"    compute_endpoint_override: " + s.Endpoint("compute API") + "/v2.1\n" +
		"    image_endpoint_override: " + s.Endpoint("image") + "/v2\n"
	if err := os.WriteFile(filepath.Join(dir, "clouds.yaml"), []byte(clouds), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) string {
		t.Helper()
		cctx, ccancel := context.WithTimeout(ctx, 90*time.Second)
		defer ccancel()
		cmd := exec.CommandContext(cctx, osc, append([]string{"--os-cloud", "berth", "--os-compute-api-version", "2.latest"}, args...)...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "OS_CLIENT_CONFIG_FILE="+filepath.Join(dir, "clouds.yaml"))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("openstack %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	var created map[string]any
	if err := json.Unmarshal([]byte(run("server", "create", "--flavor", "m1.tiny", "--image", images.DefaultSleepImage, "--network", "none",
		"--wait", "-f", "json", "web-1")), &created); err != nil {
		t.Fatal(err)
	}
	if created["status"] != "ACTIVE" || created["name"] != "web-1" {
		t.Errorf("server create --wait: %v", created)
	}
	id, _ := created["id"].(string)
	// The agent runs the image's command: the process driver's record
	// names a live `sleep infinity`.
	var rec struct{ PID int }
	raw, err := os.ReadFile(filepath.Join(procDir, "compute-1", id+".json"))
	if err != nil || json.Unmarshal(raw, &rec) != nil || rec.PID <= 0 {
		t.Fatalf("process driver record of %s: %v %s", id, err, raw)
	}
	// The driver runs the argv through /bin/sh -c, each word quoted.
	if cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", rec.PID)); err != nil || !strings.Contains(string(cmdline), "'sleep' 'infinity'") {
		t.Errorf("server %s runs %q (%v), want sleep infinity", id, cmdline, err)
	}
	var list []map[string]any
	if err := json.Unmarshal([]byte(run("server", "list", "-f", "json")), &list); err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0]["ID"] != id || list[0]["Status"] != "ACTIVE" || list[0]["Flavor"] != "m1.tiny" {
		t.Errorf("server list: %v", list)
	}
	var show map[string]any
	if err := json.Unmarshal([]byte(run("server", "show", "-f", "json", id)), &show); err != nil {
		t.Fatal(err)
	}
	host, _ := show["OS-EXT-SRV-ATTR:host"].(string)
	if show["status"] != "ACTIVE" || !strings.HasPrefix(host, "compute-") || !strings.Contains(show["image"].(string), imageID) {
		t.Errorf("server show: %v", show)
	}
	run("server", "delete", "--wait", id)
	if _, err := os.Stat(filepath.Join(procDir, "compute-1", id+".json")); !os.IsNotExist(err) {
		t.Errorf("the process driver still records %s after the delete: %v", id, err)
	}
	if out := run("server", "list", "-f", "value", "-c", "ID"); strings.TrimSpace(out) != "" {
		t.Errorf("server list after delete: %q", out)
	}
}
