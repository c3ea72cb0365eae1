package scheduler

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/internal/testwait"
	"github.com/berth-project/berth/placement"
)

// cloud is a small real cloud: embedded etcd, the placement service and a
// host manager, with hosts registered the way agents register them.
type cloud struct {
	t     *testing.T
	ctx   context.Context
	cli   *clientv3.Client
	keys  etcdschema.Keys
	place *placement.Service
	hosts *HostManager
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
	hm := NewHostManager(cli, keys, hclog.NewNullLogger())
	go hm.Run(ctx)
	if err := hm.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	return &cloud{t: t, ctx: ctx, cli: cli, keys: keys, place: p, hosts: hm}
}

// addHost registers a host with vcpus and ram, in cell, optionally disabled.
func (c *cloud) addHost(name, cell string, vcpus, ramMB int64, disabled bool) {
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
		if disabled {
			p.Traits = []string{placement.TraitComputeStatusDisabled}
		}
		return nil
	})
	if err != nil {
		c.t.Fatal(err)
	}
	svc := &etcdschema.Service{Host: name, Cell: cell, ProviderUUID: rp, Disabled: disabled}
	resp, err := c.cli.Txn(c.ctx).Then(
		clientv3.OpPut(c.keys.Service(name), etcdschema.MustEncode(svc)),
		clientv3.OpPut(c.keys.Alive(name), etcdschema.MustEncode(&etcdschema.Alive{Host: name})),
		clientv3.OpPut(c.keys.HostMapping(name), etcdschema.MustEncode(&etcdschema.HostMapping{Host: name, Cell: cell})),
	).Commit()
	if err != nil {
		c.t.Fatal(err)
	}
	c.sync(resp.Header.Revision)
	testwait.Poll(c.t, testwait.Timeout, "the host manager to see "+name+" up in "+cell, func() (bool, string) {
		if _, ok := c.hosts.HostForProvider(rp); !ok {
			return false, "no host for provider " + rp
		}
		v, ok := c.hosts.view(name)
		if !ok {
			return false, name + " not seen"
		}
		return v.Up && v.Cell == cell, fmt.Sprintf("%s up=%v in cell %q", name, v.Up, v.Cell)
	})
}

func (c *cloud) sync(rev int64) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(c.ctx, 10*time.Second)
	defer cancel()
	if err := c.place.WaitForRevision(ctx, rev); err != nil {
		c.t.Fatal(err)
	}
}

func (c *cloud) scheduler(cfg Config) *Scheduler {
	c.t.Helper()
	s, err := New(cfg, c.place, c.hosts, hclog.NewNullLogger())
	if err != nil {
		c.t.Fatal(err)
	}
	return s
}

func (c *cloud) usage(host string) int64 {
	p, err := c.place.Provider(c.ctx, "rp-"+host)
	if err != nil {
		c.t.Fatal(err)
	}
	return p.Usages[placement.VCPU]
}

func spec(vcpus, ram int, uuids ...string) *RequestSpec {
	return &RequestSpec{InstanceUUIDs: uuids, ProjectID: "p", UserID: "u",
		Flavor: etcdschema.Flavor{Name: "f", VCPUs: vcpus, RAMMB: ram}}
}

func TestSelectDestinationsClaimsAndSpreads(t *testing.T) {
	c := newCloud(t)
	c.addHost("a", "cell1", 4, 4096, false)
	c.addHost("b", "cell1", 4, 4096, false)
	c.addHost("off", "cell1", 64, 65536, true) // most room, but disabled
	s := c.scheduler(Config{MaxAttempts: 3, HostSubsetSize: 1, MaxPlacementResults: 1000,
		EnabledFilters: []string{"ComputeFilter"}, Weights: map[string]float64{"ram": 1}})

	sels, err := s.SelectDestinations(c.ctx, spec(2, 1024, "i1", "i2"))
	if err != nil {
		t.Fatal(err)
	}
	if sels[0][0].ServiceHost == sels[1][0].ServiceHost {
		t.Fatalf("two instances on %s; the RAM weigher should spread them", sels[0][0].ServiceHost)
	}
	for _, h := range []string{"a", "b"} {
		if got := c.usage(h); got != 2 {
			t.Errorf("%s uses %d VCPU, want 2 (one claimed instance)", h, got)
		}
	}
	if got := c.usage("off"); got != 0 {
		t.Errorf("disabled host was claimed: uses %d VCPU", got)
	}
	for i, list := range sels {
		for _, alt := range list[1:] {
			if alt.ServiceHost == "off" || alt.ServiceHost == list[0].ServiceHost {
				t.Errorf("instance %d: bad alternate %s", i, alt.ServiceHost)
			}
		}
	}
}

func TestSelectDestinationsIsAllOrNothing(t *testing.T) {
	c := newCloud(t)
	c.addHost("a", "cell1", 4, 8192, false)
	s := c.scheduler(DefaultConfig())
	// Two fit on "a", the third cannot: nothing may stay claimed.
	_, err := s.SelectDestinations(c.ctx, spec(2, 1024, "x1", "x2", "x3"))
	var nvh *NoValidHostError
	if !errors.As(err, &nvh) {
		t.Fatalf("want NoValidHostError, got %v", err)
	}
	if got := c.usage("a"); got != 0 {
		t.Fatalf("a uses %d VCPU after a failed request, want 0", got)
	}
	for _, u := range []string{"x1", "x2", "x3"} {
		if cons, err := c.place.GetAllocations(c.ctx, u); err == nil && cons != nil && len(cons.Allocations) > 0 {
			t.Errorf("%s still has allocations", u)
		}
	}
}

func TestAlternatesComeFromTheChosenCellOnly(t *testing.T) {
	c := newCloud(t)
	for i := 1; i <= 4; i++ {
		cell := "cell1"
		if i%2 == 0 {
			cell = "cell2"
		}
		c.addHost(fmt.Sprintf("h%d", i), cell, 8, 8192, false)
	}
	s := c.scheduler(Config{MaxAttempts: 5, HostSubsetSize: 1, MaxPlacementResults: 1000,
		EnabledFilters: []string{"ComputeFilter"}, Weights: map[string]float64{"ram": 1}})
	sels, err := s.SelectDestinations(c.ctx, spec(1, 512, "only"))
	if err != nil {
		t.Fatal(err)
	}
	list := sels[0]
	if len(list) != 2 {
		t.Fatalf("want the chosen host plus the one other host of its cell, got %d selections", len(list))
	}
	if list[1].Cell != list[0].Cell || list[1].ServiceHost == list[0].ServiceHost {
		t.Fatalf("alternate %s/%s for chosen %s/%s", list[1].ServiceHost, list[1].Cell, list[0].ServiceHost, list[0].Cell)
	}
	if list[1].AllocationRequest == "" {
		t.Fatal("alternate carries no allocation request to claim")
	}
	if c.usage(list[1].ServiceHost) != 0 {
		t.Fatal("alternate was claimed; alternates must stay unclaimed")
	}
}

func TestConcurrentSchedulersNeverOverAllocate(t *testing.T) {
	c := newCloud(t)
	c.addHost("a", "cell1", 4, 65536, false)
	c.addHost("b", "cell1", 4, 65536, false)
	// Three schedulers share one etcd and race for 8 vCPUs with 12 requests.
	var scheds []*Scheduler
	for i := 0; i < 3; i++ {
		scheds = append(scheds, c.scheduler(DefaultConfig()))
	}
	type result struct{ err error }
	results := make(chan result, 12)
	for i := 0; i < 12; i++ {
		go func(i int) {
			_, err := scheds[i%3].SelectDestinations(c.ctx, spec(1, 128, fmt.Sprintf("r%d", i)))
			results <- result{err}
		}(i)
	}
	placed, refused := 0, 0
	for i := 0; i < 12; i++ {
		r := <-results
		var nvh *NoValidHostError
		switch {
		case r.err == nil:
			placed++
		case errors.As(r.err, &nvh):
			refused++
		default:
			t.Errorf("unexpected error: %v", r.err)
		}
	}
	if placed > 8 {
		t.Fatalf("%d instances placed on 8 vCPUs", placed)
	}
	if c.usage("a") > 4 || c.usage("b") > 4 {
		t.Fatalf("over capacity: a=%d b=%d", c.usage("a"), c.usage("b"))
	}
	if placed+refused != 12 {
		t.Fatalf("placed %d + refused %d != 12", placed, refused)
	}
}
