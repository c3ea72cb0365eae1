package stack

import (
	"net/http"
	"testing"
	"time"

	"github.com/berth-project/berth/api"
	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/testwait"
)

// TestMigrateKeepsAntiAffinity: a cold migration schedules with the
// instance's server group as its build did, so a member of an
// anti-affinity group whose every other host holds a member cannot move
// (NoValidHost: the migration in error, the server ACTIVE where it was)
// rather than join another member.
func TestMigrateKeepsAntiAffinity(t *testing.T) {
	r := newMoveRig(t, 3, nil)
	code, out := r.nova("POST", "/os-server-groups", map[string]any{"server_group": map[string]any{
		"name": "apart", "policy": "anti-affinity"}})
	if code != http.StatusOK {
		t.Fatalf("group create: %d %v", code, out)
	}
	group := out["server_group"].(map[string]any)["id"].(string)
	var ids []string
	for _, host := range []string{"compute-1", "compute-2", "compute-3"} {
		resp, err := r.c.CreateServers(r.ctx, api.CreateRequest{Name: "member", Flavor: "m1.tiny", Count: 1, Host: host,
			Hints: map[string]any{"group": group}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, resp.Servers[0].ID)
		if got := hostOf(r.waitStatus(resp.Servers[0].ID, "ACTIVE")); got != host {
			t.Fatalf("member booted on %s, want %s", got, host)
		}
	}
	r.action(ids[0], map[string]any{"migrate": nil}, http.StatusAccepted)
	var mig etcdschema.Migration
	testwait.Poll(t, time.Minute, "the migration settled", func() (bool, string) {
		mig = r.migration(ids[0])
		return mig.Status == etcdschema.MigrationError || mig.Status == etcdschema.MigrationFinished, mig.Status
	})
	if mig.Status != etcdschema.MigrationError {
		t.Fatalf("the migration %s to %s, want error: every other host holds a member", mig.Status, mig.DestHost)
	}
	srv := r.waitStatus(ids[0], "ACTIVE")
	if hostOf(srv) != "compute-1" || srv["OS-EXT-STS:task_state"] != nil {
		t.Errorf("after the refused migration: on %s, task %v", hostOf(srv), srv["OS-EXT-STS:task_state"])
	}
}

// TestRevertGivesTheGroupPlaceBack: a migrated anti-affinity member's
// group place follows it to its destination (the move's claim records
// it) and back to its source on a revert, so the group's records say
// where it is; the destination is free for another member again.
func TestRevertGivesTheGroupPlaceBack(t *testing.T) {
	r := newMoveRig(t, 3, nil)
	code, out := r.nova("POST", "/os-server-groups", map[string]any{"server_group": map[string]any{
		"name": "apart", "policy": "anti-affinity"}})
	if code != http.StatusOK {
		t.Fatalf("group create: %d %v", code, out)
	}
	group := out["server_group"].(map[string]any)["id"].(string)
	boot := func(host string) string {
		t.Helper()
		resp, err := r.c.CreateServers(r.ctx, api.CreateRequest{Name: "member", Flavor: "m1.tiny", Count: 1, Host: host,
			Hints: map[string]any{"group": group}})
		if err != nil {
			t.Fatal(err)
		}
		return resp.Servers[0].ID
	}
	id := boot("compute-1")
	r.waitStatus(id, "ACTIVE")
	memberHost := func() string {
		t.Helper()
		resp, err := r.s.cli.Get(r.ctx, r.s.keys.ServerGroupMember(group, id))
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("member record: %v", err)
		}
		var m etcdschema.ServerGroupMember
		if err := etcdschema.Decode(string(resp.Kvs[0].Key), resp.Kvs[0].Value, &m); err != nil {
			t.Fatal(err)
		}
		return m.Host
	}
	r.action(id, map[string]any{"migrate": map[string]any{"host": "compute-2"}}, http.StatusAccepted)
	r.waitStatus(id, "VERIFY_RESIZE")
	if h := memberHost(); h != "compute-2" {
		t.Errorf("group place during the migration on %q, want compute-2", h)
	}
	r.action(id, map[string]any{"revertResize": nil}, http.StatusAccepted)
	if h := hostOf(r.waitStatus(id, "ACTIVE")); h != "compute-1" {
		t.Fatalf("reverted onto %s", h)
	}
	if h := memberHost(); h != "compute-1" {
		t.Errorf("group place after the revert on %q, want compute-1", h)
	}
	// compute-2 is free for a member again.
	other := boot("compute-2")
	if h := hostOf(r.waitStatus(other, "ACTIVE")); h != "compute-2" {
		t.Errorf("a new member on %s, want compute-2", h)
	}
}
