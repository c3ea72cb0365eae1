package stack

import (
	"fmt"
	"strings"
	"testing"
)

// TestOpenStackCLIResizeAndMigrate drives the cold moves with the real
// `openstack` CLI (Debian's python3-openstackclient) against a dev stack
// of three fake hosts: `server resize --flavor m1.small --wait` ends in
// VERIFY_RESIZE on another host, `server resize confirm` makes it ACTIVE
// there with m1.small, `server migrate --wait` moves it on, and `server
// resize revert` brings it back, each checked with `server show`.
func TestOpenStackCLIResizeAndMigrate(t *testing.T) {
	r := newMoveRig(t, 3, nil)
	id := r.boot("cli-mover", "m1.tiny", "compute-1")
	cli := newAdminOSC(t, r.ctx, r.s.Endpoint("compute API")+"/v2.1")

	cli.run("server", "resize", "--flavor", "m1.small", "--wait", id)
	s := cli.showServer(id)
	dest := hostOf(s)
	if s["status"] != "VERIFY_RESIZE" || dest == "compute-1" || !strings.Contains(fmt.Sprint(s["flavor"]), "m1.small") {
		t.Fatalf("after server resize --wait: %v on %s, flavor %v", s["status"], dest, s["flavor"])
	}
	cli.run("server", "resize", "confirm", id)
	r.waitStatus(id, "ACTIVE")
	if s = cli.showServer(id); hostOf(s) != dest || !strings.Contains(fmt.Sprint(s["flavor"]), "m1.small") {
		t.Fatalf("after server resize confirm: on %s, flavor %v", hostOf(s), s["flavor"])
	}

	cli.run("server", "migrate", "--wait", id)
	s = cli.showServer(id)
	if s["status"] != "VERIFY_RESIZE" || hostOf(s) == dest {
		t.Fatalf("after server migrate --wait: %v on %s", s["status"], hostOf(s))
	}
	cli.run("server", "resize", "revert", id)
	r.waitStatus(id, "ACTIVE")
	if s = cli.showServer(id); hostOf(s) != dest || !strings.Contains(fmt.Sprint(s["flavor"]), "m1.small") {
		t.Fatalf("after server resize revert: on %s, flavor %v", hostOf(s), s["flavor"])
	}
}
