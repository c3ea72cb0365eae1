package stack

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/berth-project/berth/etcdschema"
)

// TestResetStateThenMoveAServerLeftOnAReturnedSource: an evacuation that
// found no host leaves the server ERROR on its source, and the source
// comes back. Nothing moves an ERROR server (migrate wants it ACTIVE, as
// Nova's; evacuate wants its host down): an admin's os-resetState makes
// it ACTIVE again, and a cold migration then takes it to another host,
// its allocations exactly there. A reset is refused while that move is
// in flight (Berth's rule: it would strand the move).
func TestResetStateThenMoveAServerLeftOnAReturnedSource(t *testing.T) {
	r := newMoveRig(t, 2, nil)
	hosts := []string{"compute-1", "compute-2"}
	id := r.boot("stranded", "m1.tiny", "compute-1")
	r.forceDown("compute-1", true)
	r.disableHost("compute-2")
	r.action(id, map[string]any{"evacuate": map[string]any{}}, http.StatusOK)
	r.evacuation(id, etcdschema.MigrationError)
	if srv := r.waitStatus(id, "ERROR"); hostOf(srv) != "compute-1" {
		t.Fatalf("failed evacuation left the server on %s", hostOf(srv))
	}
	r.forceDown("compute-1", false) // the source is back
	code, out := r.nova("GET", "/os-services?binary=nova-compute&host=compute-2", nil)
	if code != http.StatusOK {
		t.Fatalf("find compute-2's service: %d %v", code, out)
	}
	sid := out["services"].([]any)[0].(map[string]any)["id"].(string)
	if code, out := r.nova("PUT", "/os-services/"+sid, map[string]any{"status": "enabled"}); code != http.StatusOK {
		t.Fatalf("enable compute-2: %d %v", code, out)
	}

	path := "/servers/" + id + "/action"
	member := "alice:" + r.server(id)["tenant_id"].(string)
	migrate := map[string]any{"migrate": map[string]any{"host": "compute-2"}}
	for _, tc := range []struct {
		desc, token string
		body        any
		code        int
		has         string
	}{
		{"migrate an ERROR server", "admin:admin", migrate, 409, "while it is in vm_state error"},
		{"evacuate from a host that is back", "admin:admin", map[string]any{"evacuate": map[string]any{}}, 400,
			"Compute service of compute-1 is still in use."},
		{"reset to a state Nova does not offer", "admin:admin", map[string]any{"os-resetState": map[string]any{"state": "stopped"}},
			400, "Invalid input for field/attribute state"},
		{"reset without a state", "admin:admin", map[string]any{"os-resetState": map[string]any{}}, 400,
			"'state' is a required property"},
		{"reset by the server's own member", member, map[string]any{"os-resetState": map[string]any{"state": "active"}},
			403, "os_compute_api:os-admin-actions:reset_state"},
	} {
		if code, body := r.novaText(tc.token, "2.93", "POST", path, tc.body); code != tc.code || !strings.Contains(body, tc.has) {
			t.Errorf("%s: %d %s, want %d with %q", tc.desc, code, body, tc.code, tc.has)
		}
	}

	if code, body := r.novaText("admin:admin", "2.93", "POST", path,
		map[string]any{"os-resetState": map[string]any{"state": "active"}}); code != http.StatusAccepted || body != "" {
		t.Fatalf("reset to active: %d %s", code, body)
	}
	srv := r.server(id)
	if srv["status"] != "ACTIVE" || srv["OS-EXT-STS:task_state"] != nil || hostOf(srv) != "compute-1" || srv["fault"] != nil {
		t.Fatalf("after the reset: %v/%v on %s, fault %v", srv["status"], srv["OS-EXT-STS:task_state"], hostOf(srv), srv["fault"])
	}
	if acts := r.actionsOf(id); len(acts) == 0 || acts[0] != "resetState:" {
		t.Errorf("instance actions %v, want resetState first with no events", acts)
	}

	r.action(id, migrate, http.StatusAccepted)
	r.waitStatus(id, "VERIFY_RESIZE")
	code, body := r.novaText("admin:admin", "2.93", "POST", path, map[string]any{"os-resetState": map[string]any{"state": "error"}})
	if code != http.StatusConflict || !strings.Contains(body, "while its migration") {
		t.Errorf("reset during the move: %d %s, want 409", code, body)
	}
	r.action(id, map[string]any{"confirmResize": nil}, http.StatusNoContent)
	if srv := r.waitStatus(id, "ACTIVE"); hostOf(srv) != "compute-2" {
		t.Fatalf("moved to %s, want compute-2", hostOf(srv))
	}
	r.checkUsages("only the destination", hosts, map[string]usage{"compute-2": flavorUsage(tiny)},
		map[string]map[string]usage{id: {"compute-2": flavorUsage(tiny)}})
	if !slices.Contains(r.actionsOf(id), "resetState:") {
		t.Error("the resetState action is gone after the move")
	}

	// An admin may also put a server in ERROR on purpose.
	if code, body := r.novaText("admin:admin", "2.93", "POST", path,
		map[string]any{"os-resetState": map[string]any{"state": "error"}}); code != http.StatusAccepted {
		t.Fatalf("reset to error: %d %s", code, body)
	}
	if srv := r.server(id); srv["status"] != "ERROR" {
		t.Errorf("after a reset to error: %v", srv["status"])
	}
}
