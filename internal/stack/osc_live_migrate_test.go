package stack

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/berth-project/berth/configs"
)

// TestOpenStackCLILiveMigrate drives the live migration with the real
// `openstack` CLI (Debian's python3-openstackclient) against a dev stack
// of three fake hosts: `server migrate --live-migration --wait` moves a
// running server to another host, `--host compute-1` brings it back
// (from 2.68 the scheduler checks the host), and `server migration list`
// shows both live-migrations completed.
func TestOpenStackCLILiveMigrate(t *testing.T) {
	r := newLiveRig(t, 3, func(*configs.Agent) {})
	id := r.boot("cli-runner", "m1.tiny", "compute-1")
	cli := newAdminOSC(t, r.ctx, r.s.Endpoint("compute API")+"/v2.1")

	cli.run("server", "migrate", "--live-migration", "--wait", id)
	r.waitStatus(id, "ACTIVE")
	s := cli.showServer(id)
	dest := hostOf(s)
	if s["status"] != "ACTIVE" || dest == "compute-1" || dest == "" {
		t.Fatalf("after server migrate --live-migration --wait: %v on %q", s["status"], dest)
	}
	cli.run("server", "migrate", "--live-migration", "--host", "compute-1", "--wait", id)
	r.waitStatus(id, "ACTIVE")
	if s = cli.showServer(id); hostOf(s) != "compute-1" {
		t.Fatalf("after --live-migration --host compute-1: on %s", hostOf(s))
	}
	var migs []map[string]any
	if err := json.Unmarshal([]byte(cli.run("server", "migration", "list", "--server", id, "-f", "json")), &migs); err != nil {
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
