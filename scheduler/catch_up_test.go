package scheduler

import (
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/placement"
)

// TestRequestSeesHostsRegisteredBeforeIt registers hosts and, without
// waiting for any watch, schedules a request made at the revision of the
// last registration: with MinRevision the scheduler catches its views up
// first, so it finds the host rather than answering NoValidHost.
func TestRequestSeesHostsRegisteredBeforeIt(t *testing.T) {
	c := newCloud(t)
	s := c.scheduler(DefaultConfig())
	for i, name := range []string{"fresh-1", "fresh-2", "fresh-3"} {
		rp := "rp-" + name
		if err := c.place.EnsureProvider(c.ctx, rp, name, ""); err != nil {
			t.Fatal(err)
		}
		err := c.place.UpdateProvider(c.ctx, rp, func(p *etcdschema.Provider) error {
			p.Inventories = map[string]etcdschema.Inventory{
				placement.VCPU:     {Total: 8, MinUnit: 1, MaxUnit: 8, StepSize: 1, AllocationRatio: 1},
				placement.MemoryMB: {Total: 8192, MinUnit: 1, MaxUnit: 8192, StepSize: 1, AllocationRatio: 1},
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.cli.Txn(c.ctx).Then(
			clientv3.OpPut(c.keys.Service(name), etcdschema.MustEncode(&etcdschema.Service{Host: name, Cell: "cell1", ProviderUUID: rp})),
			clientv3.OpPut(c.keys.Alive(name), etcdschema.MustEncode(&etcdschema.Alive{Host: name})),
			clientv3.OpPut(c.keys.HostMapping(name), etcdschema.MustEncode(&etcdschema.HostMapping{Host: name, Cell: "cell1"})),
		).Commit()
		if err != nil {
			t.Fatal(err)
		}
		sp := spec(2, 1024, "fresh-instance-"+name)
		sp.RequestedDestination = &Destination{Host: name}
		sp.MinRevision = resp.Header.Revision
		sels, err := s.SelectDestinations(c.ctx, sp)
		if err != nil {
			t.Fatalf("host %d registered at revision %d, request made then: %v", i, resp.Header.Revision, err)
		}
		if sels[0][0].ServiceHost != name {
			t.Fatalf("placed on %s, want %s", sels[0][0].ServiceHost, name)
		}
	}
}
