package stack

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/berth-project/berth/api"
	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/testwait"
	"github.com/berth-project/berth/scheduler"
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

// TestMoveKeepsTheSourceGroupPlace: an anti-affinity member keeps its
// place (its slot) on the source while a cold move is in flight, as
// Placement keeps the source's room under the migration's consumer, so
// no other member can take the source before a revert brings the server
// back; a failed move (every destination failing its prep) and a revert
// leave its place on the source alone, never on a destination that did
// not keep it; a confirm gives the source up. Each check asks the group's
// own records (scheduler.GroupRetryGuard, the claim's race guard), not
// the hosts' instance lists.
func TestMoveKeepsTheSourceGroupPlace(t *testing.T) {
	r := newMoveRig(t, 4, map[string]bool{"compute-4": true})
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
		if h := hostOf(r.waitStatus(resp.Servers[0].ID, "ACTIVE")); h != host {
			t.Fatalf("member booted on %s, want %s", h, host)
		}
		return resp.Servers[0].ID
	}
	member := func(id string) etcdschema.ServerGroupMember {
		t.Helper()
		resp, err := r.s.cli.Get(r.ctx, r.s.keys.ServerGroupMember(group, id))
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("member record: %v", err)
		}
		var m etcdschema.ServerGroupMember
		if err := etcdschema.Decode(string(resp.Kvs[0].Key), resp.Kvs[0].Value, &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	// taken says whether the group's records refuse another member on host.
	const newcomer = "0e0e0e0e-0000-4000-8000-000000000001"
	taken := func(host string) bool {
		t.Helper()
		_, _, err := scheduler.GroupRetryGuard(r.ctx, r.s.cli, r.s.keys, hclog.NewNullLogger(), group, host, newcomer)
		if err != nil && !errors.Is(err, scheduler.ErrGroupPolicy) {
			t.Fatal(err)
		}
		return err != nil
	}
	a := boot("compute-1")
	boot("compute-2")

	// A resize lands on compute-3 (compute-4 fails its prep if tried
	// first): compute-1 stays the group's until the move is settled.
	r.action(a, map[string]any{"resize": map[string]any{"flavorRef": "2"}}, http.StatusAccepted)
	if h := hostOf(r.waitStatus(a, "VERIFY_RESIZE")); h != "compute-3" {
		t.Fatalf("resized onto %s, want compute-3", h)
	}
	if m := member(a); m.Host != "compute-3" || m.MoveSource != "compute-1" {
		t.Fatalf("member during the resize: on %q, move source %q; want compute-3 keeping compute-1", m.Host, m.MoveSource)
	}
	if !taken("compute-1") || !taken("compute-3") || taken("compute-4") {
		t.Fatalf("during the resize: compute-1 taken %v, compute-3 %v, compute-4 %v; want the source and destination held",
			taken("compute-1"), taken("compute-3"), taken("compute-4"))
	}
	r.action(a, map[string]any{"revertResize": nil}, http.StatusAccepted)
	if h := hostOf(r.waitStatus(a, "ACTIVE")); h != "compute-1" {
		t.Fatalf("reverted onto %s", h)
	}
	if m := member(a); m.Host != "compute-1" || m.MoveSource != "" {
		t.Fatalf("member after the revert: %+v, want compute-1 alone", m)
	}
	if !taken("compute-1") || taken("compute-3") {
		t.Fatalf("after the revert: compute-1 taken %v, compute-3 %v; want the source only", taken("compute-1"), taken("compute-3"))
	}

	// With compute-3 another member's, only compute-4 is left, and it
	// fails: the move ends in error and the place stays on compute-1.
	c := boot("compute-3")
	r.action(a, map[string]any{"resize": map[string]any{"flavorRef": "2"}}, http.StatusAccepted)
	testwait.Poll(t, time.Minute, "the failed resize in error", func() (bool, string) {
		mig := r.migration(a)
		return mig.Status == etcdschema.MigrationError && mig.NewFlavor.Name == "m1.small" && len(mig.Attempts) > 0, mig.Status
	})
	r.waitStatus(a, "ACTIVE")
	if m := member(a); m.Host != "compute-1" || m.MoveSource != "" {
		t.Fatalf("member after the failed resize: %+v, want compute-1 alone", m)
	}
	if !taken("compute-1") || taken("compute-4") {
		t.Fatalf("after the failed resize: compute-1 taken %v, compute-4 %v", taken("compute-1"), taken("compute-4"))
	}

	// A confirm gives the source up.
	if code, out := r.nova("DELETE", "/servers/"+c, nil); code != http.StatusNoContent {
		t.Fatalf("delete: %d %v", code, out)
	}
	testwait.Poll(t, time.Minute, "compute-3 free for the group", func() (bool, string) { return !taken("compute-3"), "" })
	r.action(a, map[string]any{"migrate": map[string]any{"host": "compute-3"}}, http.StatusAccepted)
	r.waitStatus(a, "VERIFY_RESIZE")
	r.action(a, map[string]any{"confirmResize": nil}, http.StatusNoContent)
	if h := hostOf(r.waitStatus(a, "ACTIVE")); h != "compute-3" {
		t.Fatalf("confirmed on %s", h)
	}
	if m := member(a); m.Host != "compute-3" || m.MoveSource != "" {
		t.Fatalf("member after the confirm: %+v, want compute-3 alone", m)
	}
	if taken("compute-1") || !taken("compute-3") {
		t.Fatalf("after the confirm: compute-1 taken %v, compute-3 %v; want the destination only", taken("compute-1"), taken("compute-3"))
	}
}
