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
)

// TestOpenStackCLIResizeAndMigrate drives the cold moves with the real
// `openstack` CLI (Debian's python3-openstackclient) against a dev stack
// of three fake hosts: `server resize --flavor m1.small --wait` ends in
// VERIFY_RESIZE on another host, `server resize confirm` makes it ACTIVE
// there with m1.small, `server migrate --wait` moves it on, and `server
// resize revert` brings it back, each checked with `server show`.
func TestOpenStackCLIResizeAndMigrate(t *testing.T) {
	osc, err := exec.LookPath("openstack")
	if err != nil {
		t.Skip("the openstack CLI is not installed (apt-get install python3-openstackclient)")
	}
	r := newMoveRig(t, 3, nil)
	id := r.boot("cli-mover", "m1.tiny", "compute-1")
	dir := t.TempDir()
	compute := r.s.Endpoint("compute API") + "/v2.1"
	clouds := "clouds:\n  berth:\n    auth_type: admin_token\n    auth:\n      token: admin:admin\n" +
		"      endpoint: " + compute + "\n    compute_endpoint_override: " + compute + "\n"
	if err := os.WriteFile(filepath.Join(dir, "clouds.yaml"), []byte(clouds), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) string {
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
	show := func() map[string]any {
		t.Helper()
		var s map[string]any
		if err := json.Unmarshal([]byte(run("server", "show", "-f", "json", id)), &s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	hostOf := func(s map[string]any) string { h, _ := s["OS-EXT-SRV-ATTR:host"].(string); return h }

	run("server", "resize", "--flavor", "m1.small", "--wait", id)
	s := show()
	dest := hostOf(s)
	if s["status"] != "VERIFY_RESIZE" || dest == "compute-1" || !strings.Contains(fmt.Sprint(s["flavor"]), "m1.small") {
		t.Fatalf("after server resize --wait: %v on %s, flavor %v", s["status"], dest, s["flavor"])
	}
	run("server", "resize", "confirm", id)
	r.waitStatus(id, "ACTIVE")
	if s = show(); hostOf(s) != dest || !strings.Contains(fmt.Sprint(s["flavor"]), "m1.small") {
		t.Fatalf("after server resize confirm: on %s, flavor %v", hostOf(s), s["flavor"])
	}

	run("server", "migrate", "--wait", id)
	s = show()
	if s["status"] != "VERIFY_RESIZE" || hostOf(s) == dest {
		t.Fatalf("after server migrate --wait: %v on %s", s["status"], hostOf(s))
	}
	run("server", "resize", "revert", id)
	r.waitStatus(id, "ACTIVE")
	if s = show(); hostOf(s) != dest || !strings.Contains(fmt.Sprint(s["flavor"]), "m1.small") {
		t.Fatalf("after server resize revert: on %s, flavor %v", hostOf(s), s["flavor"])
	}
}
