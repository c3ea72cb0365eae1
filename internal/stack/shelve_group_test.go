package stack

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/berth-project/berth/api"
	"github.com/berth-project/berth/internal/testwait"
)

// TestShelveOffloadFreesTheGroupPlace: an offloaded anti-affinity
// member holds no host, so another member may take its old host; the
// unshelve schedules with the group, so with every host holding a member
// it finds none (offloaded again), and once one is free it lands there,
// not beside a member on the host the weighers prefer.
func TestShelveOffloadFreesTheGroupPlace(t *testing.T) {
	r := newMoveRig(t, 2, nil)
	code, out := r.nova("POST", "/os-server-groups", map[string]any{"server_group": map[string]any{
		"name": "apart", "policy": "anti-affinity"}})
	if code != http.StatusOK {
		t.Fatalf("group create: %d %v", code, out)
	}
	group := out["server_group"].(map[string]any)["id"].(string)
	member := func(name, host string) string {
		t.Helper()
		resp, err := r.c.CreateServers(r.ctx, api.CreateRequest{Name: name, Flavor: "m1.tiny", Count: 1, Host: host,
			Hints: map[string]any{"group": group}})
		if err != nil {
			t.Fatal(err)
		}
		id := resp.Servers[0].ID
		if got := hostOf(r.waitStatus(id, "ACTIVE")); got != host {
			t.Fatalf("%s booted on %s, want %s", name, got, host)
		}
		return id
	}
	a := member("a", "compute-1")
	member("b", "compute-2")
	r.boot("filler", "m1.large", "compute-1") // the weighers prefer compute-2
	r.action(a, map[string]any{"shelve": nil}, http.StatusAccepted)
	r.waitStatus(a, "SHELVED_OFFLOADED")

	c := member("c", "compute-1") // a's old host is free for the group
	r.action(a, map[string]any{"unshelve": nil}, http.StatusAccepted)
	testwait.Poll(t, time.Minute, "the unshelve refused by the group", func() (bool, string) {
		got := r.actionsOf(a)
		return len(got) > 0 && got[0] == "unshelve:schedule_instances/Error", fmt.Sprint(got)
	})
	if code, out := r.nova("DELETE", "/servers/"+c, nil); code != http.StatusNoContent {
		t.Fatalf("delete c: %d %v", code, out)
	}
	testwait.Poll(t, 30*time.Second, "c gone", func() (bool, string) {
		code, _ := r.nova("GET", "/servers/"+c, nil)
		return code == http.StatusNotFound, fmt.Sprint(code)
	})
	r.action(a, map[string]any{"unshelve": nil}, http.StatusAccepted)
	if got := hostOf(r.waitStatus(a, "ACTIVE")); got != "compute-1" {
		t.Errorf("a unshelved onto %s beside b, want compute-1", got)
	}
}
