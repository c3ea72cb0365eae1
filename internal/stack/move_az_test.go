package stack

import (
	"fmt"
	"net/http"
	"testing"
)

// TestMovesTakeTheDestinationsZone: each compute host in a zone of its
// own, one server moved by every kind; after each move GET
// /servers/{id} shows the zone of the host it is on (Nova sets
// instance.availability_zone to the destination's zone in the
// conductor for a cold move, a live migration, an evacuation and an
// unshelve, and back to the source's in revert_resize).
func TestMovesTakeTheDestinationsZone(t *testing.T) {
	r := newMoveRig(t, 3, nil)
	for i := 1; i <= 3; i++ {
		code, out := r.nova("POST", "/os-aggregates",
			map[string]any{"aggregate": map[string]any{"name": fmt.Sprintf("agg%d", i), "availability_zone": fmt.Sprintf("az%d", i)}})
		if code != http.StatusOK {
			t.Fatalf("create aggregate az%d: %d %v", i, code, out)
		}
		agg := out["aggregate"].(map[string]any)["id"]
		if code, out := r.nova("POST", fmt.Sprintf("/os-aggregates/%v/action", agg),
			map[string]any{"add_host": map[string]any{"host": fmt.Sprintf("compute-%d", i)}}); code != http.StatusOK {
			t.Fatalf("add compute-%d to az%d: %d %v", i, i, code, out)
		}
	}
	id := r.boot("roamer", "m1.tiny", "compute-1")
	where := func(step, status, host, zone string) {
		t.Helper()
		srv := r.waitStatus(id, status)
		if hostOf(srv) != host || srv["OS-EXT-AZ:availability_zone"] != zone {
			t.Errorf("%s: on %s in %v, want %s in %s", step, hostOf(srv), srv["OS-EXT-AZ:availability_zone"], host, zone)
		}
	}
	where("booted", "ACTIVE", "compute-1", "az1")

	r.action(id, map[string]any{"migrate": map[string]any{"host": "compute-2"}}, http.StatusAccepted)
	where("cold migration finished", "VERIFY_RESIZE", "compute-2", "az2")
	r.action(id, map[string]any{"revertResize": nil}, http.StatusAccepted)
	where("reverted", "ACTIVE", "compute-1", "az1")
	r.action(id, map[string]any{"migrate": map[string]any{"host": "compute-2"}}, http.StatusAccepted)
	where("migrated again", "VERIFY_RESIZE", "compute-2", "az2")
	r.action(id, map[string]any{"confirmResize": nil}, http.StatusNoContent)
	where("confirmed", "ACTIVE", "compute-2", "az2")

	r.action(id, map[string]any{"os-migrateLive": map[string]any{"host": "compute-3", "block_migration": "auto"}},
		http.StatusAccepted)
	r.waitMigration(id, "completed")
	where("live-migrated", "ACTIVE", "compute-3", "az3")

	r.forceDown("compute-3", true)
	r.action(id, map[string]any{"evacuate": map[string]any{"host": "compute-2"}}, http.StatusOK)
	r.evacuation(id, "completed")
	where("evacuated", "ACTIVE", "compute-2", "az2")
	r.forceDown("compute-3", false)

	r.action(id, map[string]any{"shelve": nil}, http.StatusAccepted)
	r.waitStatus(id, "SHELVED_OFFLOADED")
	r.action(id, map[string]any{"unshelve": map[string]any{"host": "compute-3"}}, http.StatusAccepted)
	where("unshelved", "ACTIVE", "compute-3", "az3")
}
