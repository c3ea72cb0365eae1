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

	"github.com/berth-project/berth/configs"
)

// TestOpenStackCLILiveMigrate drives the live migration with the real
// `openstack` CLI (Debian's python3-openstackclient) against a dev stack
// of three fake hosts: `server migrate --live-migration --wait` moves a
// running server to another host, `--host compute-1` brings it back
// (from 2.68 the scheduler checks the host), and `server migration list`
// shows both live-migrations completed.
func TestOpenStackCLILiveMigrate(t *testing.T) {
	osc, err := exec.LookPath("openstack")
	if err != nil {
		t.Skip("the openstack CLI is not installed (apt-get install python3-openstackclient)")
	}
	r := newLiveRig(t, 3, func(*configs.Agent) {})
	id := r.boot("cli-runner", "m1.tiny", "compute-1")
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

	run("server", "migrate", "--live-migration", "--wait", id)
	r.waitStatus(id, "ACTIVE")
	s := show()
	dest := hostOf(s)
	if s["status"] != "ACTIVE" || dest == "compute-1" || dest == "" {
		t.Fatalf("after server migrate --live-migration --wait: %v on %q", s["status"], dest)
	}
	run("server", "migrate", "--live-migration", "--host", "compute-1", "--wait", id)
	r.waitStatus(id, "ACTIVE")
	if s = show(); hostOf(s) != "compute-1" {
		t.Fatalf("after --live-migration --host compute-1: on %s", hostOf(s))
	}
	var migs []map[string]any
	if err := json.Unmarshal([]byte(run("server", "migration", "list", "--server", id, "-f", "json")), &migs); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range migs {
		got = append(got, m["Type"].(string)+" "+m["Status"].(string)+" "+m["Dest Compute"].(string))
	}
	want := "[live-migration completed compute-1 live-migration completed " + dest + "]"
	if len(got) != 2 || "["+strings.Join(got, " ")+"]" != want {
		t.Errorf("server migration list: %v, want %s", got, want)
	}
}
