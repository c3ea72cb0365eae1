package agent

import (
	"context"
	"slices"
	"testing"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/testwait"
)

// TestHostSyncCarriesFlavors: the sync lists the host's instance info
// uuids, each with the flavor id of its instance record when that record
// places it here, and "" for an instance the record places elsewhere (the
// source of a move in flight keeps its info until the confirm).
func TestHostSyncCarriesFlavors(t *testing.T) {
	cli, keys, _, a := startAgent(t, FakeConfig{})
	ctx := context.Background()
	big := etcdschema.Flavor{ID: "2", Name: "big", VCPUs: 2}
	for _, in := range []struct{ uuid, host string }{{"here", "h1"}, {"moved", "h2"}} {
		if _, err := cli.Put(ctx, keys.CellInstance("cell1", in.uuid), etcdschema.MustEncode(&etcdschema.Instance{
			UUID: in.uuid, Cell: "cell1", Host: in.host, Status: etcdschema.StatusVerifyResize, Flavor: big})); err != nil {
			t.Fatal(err)
		}
		// Both infos say the old flavor: the flavor synced is the record's.
		if _, err := cli.Put(ctx, keys.HostInstance("h1", in.uuid), etcdschema.MustEncode(&etcdschema.InstanceInfo{
			UUID: in.uuid, Host: "h1", FlavorID: "1", Flavor: "small"})); err != nil {
			t.Fatal(err)
		}
	}
	waitFollowed(t, cli, a)
	if _, err := a.SyncInstances(ctx); err != nil {
		t.Fatal(err)
	}
	var hs etcdschema.HostSync
	readRecord(t, cli, keys.HostSync("h1"), &hs)
	if !slices.Equal(hs.UUIDs, []string{"here", "moved"}) || !slices.Equal(hs.FlavorIDs, []string{"2", ""}) {
		t.Fatalf("sync uuids %v flavors %v, want [here moved] [2 \"\"]", hs.UUIDs, hs.FlavorIDs)
	}
}

// TestHostSyncWrittenWhenChanged: a sync whose list is the one this agent
// last wrote writes nothing (the schedulers compared it when it came), a
// changed list is written at once, and an unchanged one is written again
// every syncRewriteEvery syncs.
func TestHostSyncWrittenWhenChanged(t *testing.T) {
	cli, keys, _, a := startAgent(t, FakeConfig{})
	ctx := context.Background()
	modRev := func() int64 {
		t.Helper()
		resp, err := cli.Get(ctx, keys.HostSync("h1"))
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("no sync record: %v", err)
		}
		return resp.Kvs[0].ModRevision
	}
	// sync runs one and checks that it says it wrote exactly when the
	// record's mod revision moved (berth bench counts the writes by it).
	sync := func() {
		t.Helper()
		before := modRev()
		wrote, err := a.SyncInstances(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if moved := modRev() != before; wrote != moved {
			t.Fatalf("SyncInstances said wrote=%v, the record moved=%v", wrote, moved)
		}
	}
	// The agent's start-up sync writes the first list.
	testwait.Until(t, "h1's HostSync written at start", func() bool {
		resp, err := cli.Get(ctx, keys.HostSync("h1"))
		return err == nil && len(resp.Kvs) == 1
	})
	written := modRev()
	for i := 0; i < syncRewriteEvery-1; i++ {
		sync()
		if got := modRev(); got != written {
			t.Fatalf("unchanged list rewritten at sync %d (mod revision %d, was %d)", i+1, got, written)
		}
	}
	// The syncRewriteEvery-th unchanged sync writes it again.
	sync()
	if got := modRev(); got == written {
		t.Fatalf("unchanged list not rewritten after %d syncs", syncRewriteEvery)
	}
	written = modRev()
	flavor := etcdschema.Flavor{ID: "1", Name: "small", VCPUs: 1}
	if _, err := cli.Put(ctx, keys.CellInstance("cell1", "new"), etcdschema.MustEncode(&etcdschema.Instance{
		UUID: "new", Cell: "cell1", Host: "h1", Status: etcdschema.StatusActive, Flavor: flavor})); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, keys.HostInstance("h1", "new"), etcdschema.MustEncode(&etcdschema.InstanceInfo{
		UUID: "new", Host: "h1", FlavorID: flavor.ID, Flavor: flavor.Name})); err != nil {
		t.Fatal(err)
	}
	waitFollowed(t, cli, a)
	sync()
	if got := modRev(); got == written {
		t.Fatal("a changed list was not written")
	}
	resp, err := cli.Get(ctx, keys.HostSync("h1"))
	if err != nil {
		t.Fatal(err)
	}
	var hs etcdschema.HostSync
	if err := etcdschema.Decode(keys.HostSync("h1"), resp.Kvs[0].Value, &hs); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(hs.UUIDs, []string{"new"}) || !slices.Equal(hs.FlavorIDs, []string{"1"}) {
		t.Fatalf("sync uuids %v flavors %v, want [new] [1]", hs.UUIDs, hs.FlavorIDs)
	}
}
