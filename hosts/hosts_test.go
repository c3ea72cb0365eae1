package hosts

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/berth-project/berth/agent"
	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/internal/testwait"
	"github.com/berth-project/berth/placement"
)

// startAgent runs a fake-driver agent for host against real etcd and
// placement until the test ends.
func startAgent(t *testing.T, s *Store, p *placement.Service, host string) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ag, err := agent.New(agent.Config{Host: host, Cell: "cell1", ReportInterval: time.Second,
		Inventory: agent.Inventory{VCPUs: 4, MemoryMB: 4096, DiskGB: 10}},
		s.cli, s.keys, p, agent.NewFakeDriver(host, agent.FakeConfig{}), hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = ag.Run(ctx); close(done) }()
	stop = func() { cancel(); <-done }
	t.Cleanup(stop)
	if err := ag.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, host+" up", func() bool {
		h, err := s.Get(context.Background(), host)
		return err == nil && h != nil && h.Up()
	})
	return stop
}

func newStore(t *testing.T) (*Store, *placement.Service) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	cli := etcdtest.Client(t)
	keys := etcdschema.New("/t")
	p := placement.New(cli, keys, hclog.NewNullLogger())
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return New(cli, keys, hclog.NewNullLogger()), p
}

func TestUpdateWaitsForTheAgentsTrait(t *testing.T) {
	s, p := newStore(t)
	startAgent(t, s, p, "h1")
	ctx := context.Background()
	yes := true
	reason := "maintenance"
	res, err := s.Update(ctx, "h1", Change{Disabled: &yes, DisabledReason: &reason}, 10*time.Second)
	if err != nil || res.Unconfirmed != nil {
		t.Fatalf("disable: %+v %v", res, err)
	}
	prov, err := p.Provider(ctx, agent.ProviderUUIDForHost("h1"))
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, tr := range prov.Traits {
		found = found || tr == placement.TraitComputeStatusDisabled
	}
	if !found || !res.Host.Service.Disabled || res.Host.Service.DisabledReason != "maintenance" {
		t.Fatalf("after disable: traits %v, service %+v", prov.Traits, res.Host.Service)
	}
	if _, err := s.Update(ctx, "nope", Change{Disabled: &yes}, time.Second); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown host: %v", err)
	}
}

func TestDecommission(t *testing.T) {
	s, p := newStore(t)
	startAgent(t, s, p, "h1")
	stopH2 := startAgent(t, s, p, "h2")
	ctx := context.Background()
	// h1 runs an instance: refused, nothing removed.
	if _, err := s.cli.Put(ctx, s.keys.HostInstance("h1", "i-1"), etcdschema.MustEncode(&etcdschema.InstanceInfo{UUID: "i-1", Host: "h1"})); err != nil {
		t.Fatal(err)
	}
	agg := &etcdschema.Aggregate{UUID: "a1", Name: "a1", Hosts: []string{"h1", "h2"}, Metadata: map[string]string{"availability_zone": "az1"}}
	if _, err := s.cli.Put(ctx, s.keys.Aggregate("a1"), etcdschema.MustEncode(agg)); err != nil {
		t.Fatal(err)
	}
	if err := s.Decommission(ctx, "h1"); !errors.Is(err, ErrHasInstances) {
		t.Fatalf("decommission with an instance: %v", err)
	}
	if h, _ := s.Get(ctx, "h1"); h == nil {
		t.Fatal("refused decommission removed the host")
	}
	// h2's agent stops (as an operator does first), then h2 goes.
	z, err := s.Zones(ctx)
	if err != nil || z.Of("h2") != "az1" || z.Of("h3") != "nova" {
		t.Fatalf("zones: %v", err)
	}
	stopH2()
	if err := s.Decommission(ctx, "h2"); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Provider(ctx, agent.ProviderUUIDForHost("h2")); !errors.Is(err, placement.ErrProviderNotFound) && !errors.Is(err, placement.ErrNotFound) {
		t.Fatalf("provider of h2 after decommission: %v", err)
	}
	aggs, _, err := s.Aggregates(ctx)
	if err != nil || len(aggs["a1"].Hosts) != 1 || aggs["a1"].Hosts[0] != "h1" {
		t.Fatalf("aggregate after decommission: %+v %v", aggs["a1"], err)
	}
	if err := s.Decommission(ctx, "h2"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second decommission: %v", err)
	}
}
