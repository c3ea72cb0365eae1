package stack

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestOpenStackCLIEvacuate drives evacuate with the real `openstack`
// CLI against a dev stack of three fake hosts: refused while the
// server's host is up, then `compute service set --down` and `server
// evacuate` rebuild it on another host, ACTIVE in `server show`,
// and `server event list` names the evacuate action.
func TestOpenStackCLIEvacuate(t *testing.T) {
	r := newMoveRig(t, 3, nil)
	id := r.boot("cli-evac", "m1.tiny", "compute-1")
	cli := newAdminOSC(t, r.ctx, r.s.Endpoint("compute API")+"/v2.1")

	if out, err := cli.try("server", "evacuate", id); err == nil || !strings.Contains(out, "Compute service of compute-1 is still in use.") {
		t.Fatalf("server evacuate from an up host: %v\n%s", err, out)
	}
	cli.run("compute", "service", "set", "--down", "compute-1", "nova-compute")
	// The Zed CLI (openstackclient 6.0) posts the evacuate, then reads
	// .id off the tuple novaclient returns and crashes, whatever the
	// cloud (fixed in later releases): accept that crash, or a clean
	// exit from a fixed CLI, and wait for the server through the API.
	if out, err := cli.try("server", "evacuate", "--wait", id); err != nil &&
		!strings.Contains(out, "'TupleWithMeta' object has no attribute 'id'") {
		t.Fatalf("openstack server evacuate --wait: %v\n%s", err, out)
	}
	r.waitStatus(id, "ACTIVE")
	var s map[string]any
	if err := json.Unmarshal([]byte(cli.run("server", "show", "-f", "json", id)), &s); err != nil {
		t.Fatal(err)
	}
	if h, _ := s["OS-EXT-SRV-ATTR:host"].(string); s["status"] != "ACTIVE" || h == "compute-1" || h == "" {
		t.Fatalf("after server evacuate --wait: %v on %q", s["status"], h)
	}
	if out := cli.run("server", "event", "list", "-f", "value", "-c", "Action", id); !strings.Contains(out, "evacuate") {
		t.Errorf("server event list: %q, want an evacuate action", out)
	}
}
