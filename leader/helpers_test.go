package leader

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/placement"
	"github.com/berth-project/berth/scheduler"
)

// testElection is the election the tests' candidates campaign in.
const testElection = scheduler.Role

// cloud is embedded etcd with placement and a scheduler's host manager:
// what the duties read and write.
type cloud struct {
	t     *testing.T
	ctx   context.Context
	cli   *clientv3.Client
	keys  etcdschema.Keys
	place *placement.Service
	hosts *scheduler.HostManager
}

func newCloud(t *testing.T) *cloud {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	cli := etcdtest.Client(t)
	keys := etcdschema.New("/t")
	p := placement.New(cli, keys, hclog.NewNullLogger())
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	hm := scheduler.NewHostManager(cli, keys, hclog.NewNullLogger())
	go hm.Run(ctx)
	if err := hm.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	return &cloud{t: t, ctx: ctx, cli: cli, keys: keys, place: p, hosts: hm}
}

// addHost registers an up host with vcpus and ram in cell, and waits
// until placement and the host manager have seen it.
func (c *cloud) addHost(name, cell string, vcpus, ramMB int64) {
	c.t.Helper()
	rp := "rp-" + name
	if err := c.place.EnsureProvider(c.ctx, rp, name, ""); err != nil {
		c.t.Fatal(err)
	}
	err := c.place.UpdateProvider(c.ctx, rp, func(p *etcdschema.Provider) error {
		p.Inventories = map[string]etcdschema.Inventory{
			placement.VCPU:     {Total: vcpus, MinUnit: 1, MaxUnit: vcpus, StepSize: 1, AllocationRatio: 1},
			placement.MemoryMB: {Total: ramMB, MinUnit: 1, MaxUnit: ramMB, StepSize: 1, AllocationRatio: 1},
		}
		return nil
	})
	if err != nil {
		c.t.Fatal(err)
	}
	svc := &etcdschema.Service{Host: name, Cell: cell, ProviderUUID: rp}
	resp, err := c.cli.Txn(c.ctx).Then(
		clientv3.OpPut(c.keys.Service(name), etcdschema.MustEncode(svc)),
		clientv3.OpPut(c.keys.Alive(name), etcdschema.MustEncode(&etcdschema.Alive{Host: name})),
		clientv3.OpPut(c.keys.HostMapping(name), etcdschema.MustEncode(&etcdschema.HostMapping{Host: name, Cell: cell})),
	).Commit()
	if err != nil {
		c.t.Fatal(err)
	}
	c.sync(resp.Header.Revision)
	ctx, cancel := context.WithTimeout(c.ctx, 10*time.Second)
	defer cancel()
	if err := c.hosts.WaitForRevision(ctx, resp.Header.Revision); err != nil {
		c.t.Fatalf("host manager never saw %s: %v", name, err)
	}
}

// sync waits until placement's index has applied rev.
func (c *cloud) sync(rev int64) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(c.ctx, 10*time.Second)
	defer cancel()
	if err := c.place.WaitForRevision(ctx, rev); err != nil {
		c.t.Fatal(err)
	}
}

// usage is the VCPU used on host's provider.
func (c *cloud) usage(host string) int64 {
	p, err := c.place.Provider(c.ctx, "rp-"+host)
	if err != nil {
		c.t.Fatal(err)
	}
	return p.Usages[placement.VCPU]
}

func (c *cloud) put(key string, v etcdschema.Versioned) int64 {
	c.t.Helper()
	resp, err := c.cli.Put(c.ctx, key, etcdschema.MustEncode(v))
	if err != nil {
		c.t.Fatal(err)
	}
	return resp.Header.Revision
}

func (c *cloud) exists(key string) bool {
	c.t.Helper()
	resp, err := c.cli.Get(c.ctx, key)
	if err != nil {
		c.t.Fatal(err)
	}
	return len(resp.Kvs) > 0
}

func (c *cloud) claim(consumer, host string) {
	c.t.Helper()
	err := c.place.PutAllocations(c.ctx, consumer, placement.AllocationWrite{ProjectID: "p", UserID: "u",
		Allocations: map[string]placement.ProviderAllocation{"rp-" + host: {Resources: map[string]int64{placement.VCPU: 1}}}})
	if err != nil {
		c.t.Fatal(err)
	}
}
