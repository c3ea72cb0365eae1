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

// TestOpenStackCLIResetState drives os-resetState with the real
// `openstack` CLI (`server set --state`): ERROR, then ACTIVE again, as
// `server show` reads it, and `server event list` names the resetState
// actions.
func TestOpenStackCLIResetState(t *testing.T) {
	osc, err := exec.LookPath("openstack")
	if err != nil {
		t.Skip("the openstack CLI is not installed (apt-get install python3-openstackclient)")
	}
	r := newMoveRig(t, 1, nil)
	id := r.boot("cli-reset", "m1.tiny", "compute-1")
	dir := t.TempDir()
	compute := r.s.Endpoint("compute API") + "/v2.1"
	clouds := "clouds:\n  berth:\n    auth_type: admin_token\n    auth:\n      token: admin:admin\n" +
		"      endpoint: " + compute + "\n    compute_endpoint_override: " + compute + "\n"
	if err := os.WriteFile(filepath.Join(dir, "clouds.yaml"), []byte(clouds), 0o600); err != nil {
		t.Fatal(err)
	}
	must := func(args ...string) string {
		t.Helper()
		cctx, cancel := context.WithTimeout(r.ctx, 90*time.Second)
		defer cancel()
		cmd := exec.CommandContext(cctx, osc, append([]string{"--os-cloud", "berth", "--os-compute-api-version", "2.latest"}, args...)...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "OS_CLIENT_CONFIG_FILE="+filepath.Join(dir, "clouds.yaml"))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("openstack %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	status := func() string {
		t.Helper()
		var show map[string]any
		out := must("server", "show", "-f", "json", id)
		if err := json.Unmarshal([]byte(out), &show); err != nil {
			t.Fatalf("server show: %v\n%s", err, out)
		}
		return show["status"].(string)
	}

	must("server", "set", "--state", "error", id)
	if st := status(); st != "ERROR" {
		t.Fatalf("after server set --state error: %s", st)
	}
	must("server", "set", "--state", "active", id)
	if st := status(); st != "ACTIVE" {
		t.Fatalf("after server set --state active: %s", st)
	}
	if out := must("server", "event", "list", id); strings.Count(out, "resetState") != 2 {
		t.Errorf("server event list, want two resetState actions:\n%s", out)
	}
}
