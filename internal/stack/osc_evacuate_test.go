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

// TestOpenStackCLIEvacuate drives evacuate with the real `openstack`
// CLI against a dev stack of three fake hosts: refused while the
// server's host is up, then `compute service set --down` and `server
// evacuate` rebuild it on another host, ACTIVE in `server show`,
// and `server event list` names the evacuate action.
func TestOpenStackCLIEvacuate(t *testing.T) {
	osc, err := exec.LookPath("openstack")
	if err != nil {
		t.Skip("the openstack CLI is not installed (apt-get install python3-openstackclient)")
	}
	r := newMoveRig(t, 3, nil)
	id := r.boot("cli-evac", "m1.tiny", "compute-1")
	dir := t.TempDir()
	compute := r.s.Endpoint("compute API") + "/v2.1"
	clouds := "clouds:\n  berth:\n    auth_type: admin_token\n    auth:\n      token: admin:admin\n" +
		"      endpoint: " + compute + "\n    compute_endpoint_override: " + compute + "\n"
	if err := os.WriteFile(filepath.Join(dir, "clouds.yaml"), []byte(clouds), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (string, error) {
		t.Helper()
		cctx, cancel := context.WithTimeout(r.ctx, 90*time.Second)
		defer cancel()
		cmd := exec.CommandContext(cctx, osc, append([]string{"--os-cloud", "berth", "--os-compute-api-version", "2.latest"}, args...)...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "OS_CLIENT_CONFIG_FILE="+filepath.Join(dir, "clouds.yaml"))
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	must := func(args ...string) string {
		t.Helper()
		out, err := run(args...)
		if err != nil {
			t.Fatalf("openstack %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}

	if out, err := run("server", "evacuate", id); err == nil || !strings.Contains(out, "Compute service of compute-1 is still in use.") {
		t.Fatalf("server evacuate from an up host: %v\n%s", err, out)
	}
	must("compute", "service", "set", "--down", "compute-1", "nova-compute")
	// The Zed CLI (openstackclient 6.0) posts the evacuate, then reads
	// .id off the tuple novaclient returns and crashes, whatever the
	// cloud (fixed in later releases): accept that crash, or a clean
	// exit from a fixed CLI, and wait for the server through the API.
	if out, err := run("server", "evacuate", "--wait", id); err != nil &&
		!strings.Contains(out, "'TupleWithMeta' object has no attribute 'id'") {
		t.Fatalf("openstack server evacuate --wait: %v\n%s", err, out)
	}
	r.waitStatus(id, "ACTIVE")
	var s map[string]any
	if err := json.Unmarshal([]byte(must("server", "show", "-f", "json", id)), &s); err != nil {
		t.Fatal(err)
	}
	if h, _ := s["OS-EXT-SRV-ATTR:host"].(string); s["status"] != "ACTIVE" || h == "compute-1" || h == "" {
		t.Fatalf("after server evacuate --wait: %v on %q", s["status"], h)
	}
	if out := must("server", "event", "list", "-f", "value", "-c", "Action", id); !strings.Contains(out, "evacuate") {
		t.Errorf("server event list: %q, want an evacuate action", out)
	}
}
