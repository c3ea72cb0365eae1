package stack

import (
	"strings"
	"testing"
)

// TestOpenStackCLIResetState drives os-resetState with the real
// `openstack` CLI (`server set --state`): ERROR, then ACTIVE again, as
// `server show` reads it, and `server event list` names the resetState
// actions.
func TestOpenStackCLIResetState(t *testing.T) {
	r := newMoveRig(t, 1, nil)
	id := r.boot("cli-reset", "m1.tiny", "compute-1")
	cli := newAdminOSC(t, r.ctx, r.s.Endpoint("compute API")+"/v2.1")
	must := cli.run
	status := func() string { t.Helper(); return cli.showServer(id)["status"].(string) }

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
