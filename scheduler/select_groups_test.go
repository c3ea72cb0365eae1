package scheduler

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/testwait"
	"github.com/berth-project/berth/placement"
)

// groupConfig enables the server-group filters.
func groupConfig() Config {
	c := DefaultConfig()
	c.EnabledFilters = []string{"ComputeFilter", "ServerGroupAntiAffinityFilter", "ServerGroupAffinityFilter"}
	return c
}

// addGroup stores a server group as the API does.
func (c *cloud) addGroup(uuid, policy string, maxPerHost int) {
	c.t.Helper()
	g := &etcdschema.ServerGroup{UUID: uuid, Name: uuid, Policy: policy,
		Rules: etcdschema.ServerGroupRules{MaxServerPerHost: maxPerHost}, ProjectID: "p", UserID: "u"}
	if _, err := c.cli.Put(c.ctx, c.keys.ServerGroup(uuid), etcdschema.MustEncode(g)); err != nil {
		c.t.Fatal(err)
	}
}

// request makes instances exist as the API does (mapping, group member)
// and returns a spec for them in group.
func (c *cloud) request(group string, uuids ...string) *RequestSpec {
	c.t.Helper()
	var ops []clientv3.Op
	for _, u := range uuids {
		ops = append(ops, clientv3.OpPut(c.keys.InstanceMapping(u),
			etcdschema.MustEncode(&etcdschema.InstanceMapping{InstanceUUID: u, ProjectID: "p"})))
		if group != "" {
			ops = append(ops, clientv3.OpPut(c.keys.ServerGroupMember(group, u),
				etcdschema.MustEncode(&etcdschema.ServerGroupMember{InstanceUUID: u})))
		}
	}
	if _, err := c.cli.Txn(c.ctx).Then(ops...).Commit(); err != nil {
		c.t.Fatal(err)
	}
	s := spec(1, 256, uuids...)
	s.Hints.Group = group
	return s
}

// hostsOf is where each instance's allocation is, by host.
func (c *cloud) hostsOf(uuids ...string) map[string]string {
	c.t.Helper()
	out := map[string]string{}
	for _, u := range uuids {
		cons, err := c.place.GetAllocations(c.ctx, u)
		if errors.Is(err, placement.ErrNotFound) {
			continue
		}
		if err != nil {
			c.t.Fatal(err)
		}
		for rp := range cons.Allocations {
			out[u] = strings.TrimPrefix(rp, "rp-")
		}
	}
	return out
}

func uuids(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d", prefix, i)
	}
	return out
}

func TestAntiAffinityAcrossRequestsAndWithinOne(t *testing.T) {
	c := newCloud(t)
	for _, h := range []string{"a", "b", "c"} {
		c.addHost(h, "cell1", 8, 8192, false)
	}
	c.addGroup("g", etcdschema.PolicyAntiAffinity, 0)
	s := c.scheduler(groupConfig())
	if _, err := s.SelectDestinations(c.ctx, c.request("g", "x0", "x1")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SelectDestinations(c.ctx, c.request("g", "x2")); err != nil {
		t.Fatal(err)
	}
	placed := c.hostsOf("x0", "x1", "x2")
	seen := map[string]bool{}
	for _, h := range placed {
		seen[h] = true
	}
	if len(placed) != 3 || len(seen) != 3 {
		t.Fatalf("members on %v; anti-affinity wants three hosts", placed)
	}
	_, err := s.SelectDestinations(c.ctx, c.request("g", "x3"))
	var nvh *NoValidHostError
	if !errors.As(err, &nvh) || !strings.Contains(err.Error(), "ServerGroupAntiAffinityFilter removed 3") {
		t.Fatalf("fourth member: want NoValidHost naming the filter, got %v", err)
	}
	// Each of the three hosts says why, up to maxSampleReasons of them.
	for _, fc := range nvh.Removed {
		if fc.Filter != "ServerGroupAntiAffinityFilter" {
			continue
		}
		if len(fc.Reasons) != 3 {
			t.Fatalf("anti-affinity reasons %q, want one per host", fc.Reasons)
		}
		for _, r := range fc.Reasons {
			if _, why, _ := strings.Cut(r, ": "); why != "holds 1 member(s) of anti-affinity group g (max_server_per_host 1)" {
				t.Errorf("anti-affinity reason %q", r)
			}
		}
	}
}

func TestAntiAffinityMaxServerPerHostAndRollback(t *testing.T) {
	c := newCloud(t)
	c.addHost("a", "cell1", 8, 8192, false)
	c.addHost("b", "cell1", 8, 8192, false)
	c.addGroup("g", etcdschema.PolicyAntiAffinity, 2)
	s := c.scheduler(groupConfig())
	// Five members cannot fit two per host on two hosts: nothing stays.
	_, err := s.SelectDestinations(c.ctx, c.request("g", uuids("y", 5)...))
	var nvh *NoValidHostError
	if !errors.As(err, &nvh) {
		t.Fatalf("want NoValidHost, got %v", err)
	}
	if got := c.hostsOf(uuids("y", 5)...); len(got) != 0 {
		t.Fatalf("claims left after all-or-nothing failure: %v", got)
	}
	// The rolled-back places are free again: four fit, two a host.
	if _, err := s.SelectDestinations(c.ctx, c.request("g", uuids("z", 4)...)); err != nil {
		t.Fatalf("after rollback: %v", err)
	}
	per := map[string]int{}
	for _, h := range c.hostsOf(uuids("z", 4)...) {
		per[h]++
	}
	if per["a"] != 2 || per["b"] != 2 {
		t.Fatalf("members per host = %v, want 2 and 2", per)
	}
	if n := s.guardLosses.Load(); n != 0 {
		t.Fatalf("one scheduler lost %d guards to its own earlier picks", n)
	}
}

func TestAffinityKeepsTheGroupOnOneHost(t *testing.T) {
	c := newCloud(t)
	for _, h := range []string{"a", "b", "c"} {
		c.addHost(h, "cell1", 8, 8192, false)
	}
	c.addGroup("g", etcdschema.PolicyAffinity, 0)
	s := c.scheduler(groupConfig())
	if _, err := s.SelectDestinations(c.ctx, c.request("g", "x0", "x1")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SelectDestinations(c.ctx, c.request("g", "x2")); err != nil {
		t.Fatal(err)
	}
	placed := c.hostsOf("x0", "x1", "x2")
	if len(placed) != 3 || placed["x0"] != placed["x1"] || placed["x1"] != placed["x2"] {
		t.Fatalf("affinity members on %v, want one host", placed)
	}
	if n := s.guardLosses.Load(); n != 0 {
		t.Fatalf("one scheduler lost %d guards to its own earlier picks", n)
	}
}

func TestDeletedMembersFreeTheirPlace(t *testing.T) {
	c := newCloud(t)
	c.addHost("a", "cell1", 8, 8192, false)
	c.addGroup("g", etcdschema.PolicyAntiAffinity, 0)
	s := c.scheduler(groupConfig())
	if _, err := s.SelectDestinations(c.ctx, c.request("g", "old")); err != nil {
		t.Fatal(err)
	}
	// The server is deleted: its mapping and allocation go, as the agent's
	// destroy does; the group records are left for the scheduler to clean.
	if err := c.place.DeleteAllocations(c.ctx, "old"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.cli.Delete(c.ctx, c.keys.InstanceMapping("old")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SelectDestinations(c.ctx, c.request("g", "new")); err != nil {
		t.Fatalf("the deleted member still holds the host: %v", err)
	}
	resp, err := c.cli.Get(c.ctx, c.keys.ServerGroupPrefix("g"), clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range resp.Kvs {
		if strings.Contains(string(kv.Key), "old") {
			t.Errorf("stale record %s was not cleaned up", kv.Key)
		}
	}
}

func TestGroupPolicyNeedsItsFilter(t *testing.T) {
	c := newCloud(t)
	c.addHost("a", "cell1", 8, 8192, false)
	c.addGroup("g", etcdschema.PolicyAntiAffinity, 0)
	s := c.scheduler(DefaultConfig()) // ComputeFilter only
	_, err := s.SelectDestinations(c.ctx, c.request("g", "x"))
	var nvh *NoValidHostError
	if !errors.As(err, &nvh) || !strings.Contains(err.Error(), "ServerGroupAntiAffinityFilter") {
		t.Fatalf("want NoValidHost naming the missing filter, got %v", err)
	}
	_, err = s.SelectDestinations(c.ctx, c.request("nope", "y"))
	if !errors.As(err, &nvh) || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("unknown group: want NoValidHost, got %v", err)
	}
}

// TestRacingSchedulersKeepAntiAffinity boots members of one anti-affinity
// group through two schedulers, each with its own host manager, all at
// once. Every scheduler weighs the hosts the same way, so they collide on
// the same host first; the slot guard in the claim transaction must make
// one of them move on, and no host may end up with two members.
func TestRacingSchedulersKeepAntiAffinity(t *testing.T) {
	c := newCloud(t)
	const hosts, boots = 4, 10
	for i := 0; i < hosts; i++ {
		c.addHost(fmt.Sprintf("h%d", i), "cell1", 16, 16384, false)
	}
	c.addGroup("g", etcdschema.PolicyAntiAffinity, 0)
	var scheds []*Scheduler
	for i := 0; i < 2; i++ {
		hm := NewHostManager(c.cli, c.keys, hclog.NewNullLogger())
		go hm.Run(c.ctx)
		if err := hm.WaitSynced(c.ctx); err != nil {
			t.Fatal(err)
		}
		s, err := New(groupConfig(), c.place, hm, hclog.NewNullLogger())
		if err != nil {
			t.Fatal(err)
		}
		scheds = append(scheds, s)
	}
	ids := uuids("r", boots)
	specs := make([]*RequestSpec, boots)
	for i, u := range ids {
		specs[i] = c.request("g", u)
	}
	var wg sync.WaitGroup
	errs := make([]error, boots)
	start := make(chan struct{})
	for i := range ids {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			<-start
			_, errs[i] = scheds[i%2].SelectDestinations(c.ctx, specs[i])
		}(i)
	}
	close(start)
	wg.Wait()
	placed, refused := 0, 0
	for i, err := range errs {
		var nvh *NoValidHostError
		switch {
		case err == nil:
			placed++
		case errors.As(err, &nvh):
			refused++
		default:
			t.Errorf("boot %d: %v", i, err)
		}
	}
	where := c.hostsOf(ids...)
	per := map[string][]string{}
	for u, h := range where {
		per[h] = append(per[h], u)
	}
	for h, us := range per {
		if len(us) > 1 {
			t.Errorf("anti-affinity broken: %s holds %v", h, us)
		}
	}
	t.Logf("guards lost to the other scheduler: %d", scheds[0].guardLosses.Load()+scheds[1].guardLosses.Load())
	if placed != hosts || refused != boots-hosts || len(where) != hosts {
		t.Fatalf("placed %d, refused %d, allocations %d; want %d placed (one per host) and %d refused",
			placed, refused, len(where), hosts, boots-hosts)
	}
}

// TestAvailabilityZoneOverPlacement places by AZ through the request
// filter alone (no AvailabilityZoneFilter): the AZ aggregate is mirrored
// to the host's provider, as the aggregates API does.
func TestAvailabilityZoneOverPlacement(t *testing.T) {
	c := newCloud(t)
	c.addHost("east", "cell1", 8, 8192, false)
	c.addHost("west", "cell1", 8, 8192, false)
	c.addHost("plain", "cell1", 8, 8192, false)
	c.addAggregate(&etcdschema.Aggregate{UUID: "agg-east", Name: "east", Hosts: []string{"east"},
		Metadata: map[string]string{"availability_zone": "az-east"}})
	c.addAggregate(&etcdschema.Aggregate{UUID: "agg-west", Name: "west", Hosts: []string{"west"},
		Metadata: map[string]string{"availability_zone": "az-west"}})
	s := c.scheduler(DefaultConfig())
	for _, tc := range []struct{ az, host string }{{"az-east", "east"}, {"az-west", "west"}, {"nova", "plain"}} {
		for i := 0; i < 3; i++ {
			sp := spec(1, 256, fmt.Sprintf("%s-%d", tc.az, i))
			sp.AvailabilityZone = tc.az
			sels, err := s.SelectDestinations(c.ctx, sp)
			if err != nil {
				t.Fatalf("%s: %v", tc.az, err)
			}
			if sels[0][0].ServiceHost != tc.host || sels[0][0].AvailabilityZone != tc.az {
				t.Fatalf("AZ %s placed on %s (zone %q), want %s", tc.az, sels[0][0].ServiceHost, sels[0][0].AvailabilityZone, tc.host)
			}
			for _, alt := range sels[0][1:] {
				if alt.AvailabilityZone != tc.az {
					t.Fatalf("AZ %s got an alternate in %s", tc.az, alt.AvailabilityZone)
				}
			}
		}
	}
}

// addAggregate stores an aggregate and puts its hosts' providers in it,
// then waits until the host manager and placement see both.
func (c *cloud) addAggregate(a *etcdschema.Aggregate) {
	c.t.Helper()
	resp, err := c.cli.Put(c.ctx, c.keys.Aggregate(a.UUID), etcdschema.MustEncode(a))
	if err != nil {
		c.t.Fatal(err)
	}
	rev := resp.Header.Revision
	for _, h := range a.Hosts {
		err := c.place.UpdateProvider(c.ctx, "rp-"+h, func(p *etcdschema.Provider) error {
			p.Aggregates = append(p.Aggregates, a.UUID)
			return nil
		})
		if err != nil {
			c.t.Fatal(err)
		}
		p, err := c.place.Provider(c.ctx, "rp-"+h)
		if err != nil {
			c.t.Fatal(err)
		}
		_ = p
	}
	cur, err := c.cli.Get(c.ctx, c.keys.Aggregate(a.UUID))
	if err != nil {
		c.t.Fatal(err)
	}
	c.sync(max(rev, cur.Header.Revision))
	testwait.Until(c.t, "the host manager to see aggregate "+a.UUID, func() bool {
		return slices.ContainsFunc(c.hosts.Aggregates(), func(got *etcdschema.Aggregate) bool { return got.UUID == a.UUID })
	})
}

// TestRacingSchedulersKeepAffinity boots the first members of an affinity
// group through two schedulers at once. Each sees a group with no host
// yet and picks by its own weighing; the affinity-host key created in the
// claim transaction must make every member land on one host.
func TestRacingSchedulersKeepAffinity(t *testing.T) {
	c := newCloud(t)
	for i := 0; i < 4; i++ {
		c.addHost(fmt.Sprintf("h%d", i), "cell1", 16, 16384, false)
	}
	c.addGroup("g", etcdschema.PolicyAffinity, 0)
	var scheds []*Scheduler
	for i := 0; i < 2; i++ {
		hm := NewHostManager(c.cli, c.keys, hclog.NewNullLogger())
		go hm.Run(c.ctx)
		if err := hm.WaitSynced(c.ctx); err != nil {
			t.Fatal(err)
		}
		cfg := groupConfig()
		cfg.HostSubsetSize = 4 // each scheduler picks a random host: they disagree
		s, err := New(cfg, c.place, hm, hclog.NewNullLogger())
		if err != nil {
			t.Fatal(err)
		}
		scheds = append(scheds, s)
	}
	ids := uuids("f", 8)
	specs := make([]*RequestSpec, len(ids))
	for i, u := range ids {
		specs[i] = c.request("g", u)
	}
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make([]error, len(ids))
	for i := range ids {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			<-start
			_, errs[i] = scheds[i%2].SelectDestinations(c.ctx, specs[i])
		}(i)
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("boot %d: %v", i, err)
		}
	}
	where := c.hostsOf(ids...)
	hosts := map[string]bool{}
	for _, h := range where {
		hosts[h] = true
	}
	if len(where) != len(ids) || len(hosts) != 1 {
		t.Fatalf("affinity members on %v, want all %d on one host", where, len(ids))
	}
}

func TestSoftPoliciesPackAndSpread(t *testing.T) {
	c := newCloud(t)
	for i := 0; i < 3; i++ {
		c.addHost(fmt.Sprintf("h%d", i), "cell1", 16, 16384, false)
	}
	c.addGroup("pack", etcdschema.PolicySoftAffinity, 0)
	c.addGroup("spread", etcdschema.PolicySoftAntiAffinity, 0)
	// The RAM weigher alone would spread; soft-affinity at 1e6 outweighs it.
	cfg := groupConfig()
	cfg.Weights = map[string]float64{"ram": 1, "soft_affinity": 1e6, "soft_anti_affinity": 1e6}
	s := c.scheduler(cfg)
	for _, u := range uuids("p", 3) {
		if _, err := s.SelectDestinations(c.ctx, c.request("pack", u)); err != nil {
			t.Fatal(err)
		}
	}
	packed := map[string]bool{}
	for _, h := range c.hostsOf(uuids("p", 3)...) {
		packed[h] = true
	}
	if len(packed) != 1 {
		t.Fatalf("soft-affinity members on %v, want one host", packed)
	}
	// Soft-anti-affinity spreads even against RAM at -1, which stacks onto
	// the fullest host; a fourth member must share a host, not fail.
	cfg.Weights = map[string]float64{"ram": -1, "soft_anti_affinity": 1e6}
	s = c.scheduler(cfg)
	for _, u := range uuids("s", 4) {
		if _, err := s.SelectDestinations(c.ctx, c.request("spread", u)); err != nil {
			t.Fatal(err)
		}
	}
	per := map[string]int{}
	for _, h := range c.hostsOf(uuids("s", 4)...) {
		per[h]++
	}
	if len(per) != 3 {
		t.Fatalf("soft-anti-affinity members per host %v, want all three hosts used", per)
	}
}
