package agent

import (
	"context"
	"slices"
	"testing"

	"github.com/berth-project/berth/etcdschema"
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
	if err := a.SyncInstances(ctx); err != nil {
		t.Fatal(err)
	}
	resp, err := cli.Get(ctx, keys.HostSync("h1"))
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("no sync record: %v", err)
	}
	var hs etcdschema.HostSync
	if err := etcdschema.Decode(keys.HostSync("h1"), resp.Kvs[0].Value, &hs); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(hs.UUIDs, []string{"here", "moved"}) || !slices.Equal(hs.FlavorIDs, []string{"2", ""}) {
		t.Fatalf("sync uuids %v flavors %v, want [here moved] [2 \"\"]", hs.UUIDs, hs.FlavorIDs)
	}
}
