package agent

import (
	"context"
	"errors"
	"testing"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/testwait"
	"github.com/berth-project/berth/placement"
)

// TestAgentReportsCapacityAndRecreatesItsProvider: the agent reports its
// inventories and its instances' usage (HostCapacity) at registration and
// at each provider sync when they changed, and a provider deleted from
// Placement is created again at the first provider sync once the
// provider refresh is due, so an empty Placement fills up again (the
// scheduler's fallback waits for it).
func TestAgentReportsCapacityAndRecreatesItsProvider(t *testing.T) {
	cli, keys, p, a := startAgent(t, FakeConfig{})
	ctx := context.Background()
	read := func() *etcdschema.HostCapacity {
		resp, err := cli.Get(ctx, keys.HostCapacity("h1"))
		if err != nil || len(resp.Kvs) == 0 {
			return nil
		}
		var hc etcdschema.HostCapacity
		if err := etcdschema.Decode(keys.HostCapacity("h1"), resp.Kvs[0].Value, &hc); err != nil {
			t.Fatal(err)
		}
		return &hc
	}
	testwait.Until(t, "the capacity report at registration", func() bool { return read() != nil })
	if hc := read(); hc.Inventories[placement.VCPU].Total != 4 || hc.Used[placement.VCPU] != 0 {
		t.Fatalf("capacity at start %+v, want 4 VCPU, none used", hc)
	}

	// An instance of this host (its record and instance info).
	f := etcdschema.Flavor{ID: "2", Name: "m", VCPUs: 2, RAMMB: 1024, DiskGB: 1, SwapMB: 512}
	if _, err := cli.Put(ctx, keys.CellInstance("cell1", "i1"), etcdschema.MustEncode(&etcdschema.Instance{
		UUID: "i1", Cell: "cell1", Host: "h1", Status: etcdschema.StatusActive, Flavor: f})); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, keys.HostInstance("h1", "i1"), etcdschema.MustEncode(&etcdschema.InstanceInfo{
		UUID: "i1", Host: "h1", FlavorID: f.ID, Flavor: f.Name})); err != nil {
		t.Fatal(err)
	}
	waitFollowed(t, cli, a)
	// Placement emptied behind the agent's back (its delete waits for
	// the index, which startAgent's placement does not run otherwise).
	pctx, stop := context.WithCancel(ctx)
	defer stop()
	if err := p.Start(pctx); err != nil {
		t.Fatal(err)
	}
	if err := p.DeleteProvider(ctx, a.ProviderUUID()); err != nil {
		t.Fatal(err)
	}
	// Within the provider refresh of the registration the sync trusts what it
	// wrote, as Nova's report client trusts its provider tree, and does
	// not read the provider: it is not back yet.
	if syncErr, _ := a.providerTick(ctx); syncErr != nil {
		t.Fatal(syncErr)
	}
	if _, err := p.Provider(ctx, a.ProviderUUID()); !errors.Is(err, placement.ErrProviderNotFound) {
		t.Fatalf("provider read before the refresh was due: %v, want it still missing", err)
	}
	// Once the refresh is due the sync reads the provider, finds it
	// gone and creates it again.
	a.seenMu.Lock()
	a.seen.at = a.seen.at.Add(-DefaultProviderRefresh)
	a.seenMu.Unlock()
	if syncErr, _ := a.providerTick(ctx); syncErr != nil {
		t.Fatal(syncErr)
	}
	rp, err := p.Provider(ctx, a.ProviderUUID())
	if err != nil || rp.Inventories[placement.VCPU].Total != 4 {
		t.Fatalf("provider after the sync: %+v, %v; want it back with its inventory", rp, err)
	}
	hc := read()
	if hc.Used[placement.VCPU] != 2 || hc.Used[placement.MemoryMB] != 1024 || hc.Used[placement.DiskGB] != 2 {
		t.Fatalf("used %v, want the instance's 2 VCPU, 1024 MB, 1+1 GB (swap rounded up)", hc.Used)
	}
}
