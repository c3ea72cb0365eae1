package conductor

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/internal/testwait"
	"github.com/berth-project/berth/placement"
	"github.com/berth-project/berth/scheduler"
)

// dyingSelector claims for real, says so, and then never answers: the
// superconductor asking it is killed mid-request.
type dyingSelector struct {
	s       scheduler.Selector
	claimed chan struct{}
}

func (d dyingSelector) SelectDestinations(ctx context.Context, spec *scheduler.RequestSpec) ([][]etcdschema.Selection, error) {
	if _, err := d.s.SelectDestinations(ctx, spec); err != nil {
		return nil, err
	}
	d.claimed <- struct{}{}
	<-ctx.Done()
	return nil, ctx.Err()
}

// liveRig is real etcd, Placement, a host manager and a scheduler over
// hosts a (the source), b and c, with one instance on a whose live
// migration was accepted (as servers.Store.LiveMigrate writes it).
type liveRig struct {
	t      *testing.T
	ctx    context.Context
	srvURL string
	cli    *clientv3.Client
	keys   etcdschema.Keys
	place  *placement.Service
	sched  *scheduler.Scheduler
	inst   etcdschema.Instance
	mig    etcdschema.Migration
}

const liveVCPU = 2

func newLiveRig(t *testing.T) *liveRig {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	srv, cli := etcdtest.NetClient(t)
	keys := etcdschema.New("/t")
	log := hclog.NewNullLogger()
	place := placement.New(cli, keys, log)
	if err := place.Start(ctx); err != nil {
		t.Fatal(err)
	}
	hm := scheduler.NewHostManager(cli, keys, log)
	go hm.Run(ctx)
	var rev int64
	for _, h := range []string{"a", "b", "c"} {
		rp := "rp-" + h
		if err := place.EnsureProvider(ctx, rp, h, ""); err != nil {
			t.Fatal(err)
		}
		if err := place.UpdateProvider(ctx, rp, func(p *etcdschema.Provider) error {
			p.Inventories = map[string]etcdschema.Inventory{
				placement.VCPU:     {Total: 8, MinUnit: 1, MaxUnit: 8, StepSize: 1, AllocationRatio: 1},
				placement.MemoryMB: {Total: 8192, MinUnit: 1, MaxUnit: 8192, StepSize: 1, AllocationRatio: 1},
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		resp, err := cli.Txn(ctx).Then(
			clientv3.OpPut(keys.Service(h), etcdschema.MustEncode(&etcdschema.Service{Host: h, Cell: "cell1", ProviderUUID: rp, CanLiveMigrate: true})),
			clientv3.OpPut(keys.Alive(h), etcdschema.MustEncode(&etcdschema.Alive{Host: h})),
			clientv3.OpPut(keys.HostMapping(h), etcdschema.MustEncode(&etcdschema.HostMapping{Host: h, Cell: "cell1"})),
		).Commit()
		if err != nil {
			t.Fatal(err)
		}
		rev = resp.Header.Revision
	}
	if err := place.WaitForRevision(ctx, rev); err != nil {
		t.Fatal(err)
	}
	if err := hm.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	testwait.Poll(t, testwait.Timeout, "the host manager to see a, b and c", func() (bool, string) {
		n := 0
		for _, h := range []string{"a", "b", "c"} {
			if _, ok := hm.HostForProvider("rp-" + h); ok {
				n++
			}
		}
		return n == 3, fmt.Sprintf("%d seen", n)
	})
	sched, err := scheduler.New(scheduler.DefaultConfig(), place, hm, log)
	if err != nil {
		t.Fatal(err)
	}
	r := &liveRig{t: t, ctx: ctx, srvURL: srv.ClientURL(), cli: cli, keys: keys, place: place, sched: sched}
	now := time.Now().UTC()
	flavor := etcdschema.Flavor{ID: "1", Name: "f", VCPUs: liveVCPU, RAMMB: 512}
	r.inst = etcdschema.Instance{UUID: "11111111-0000-4000-8000-000000000001", Name: "live", Cell: "cell1",
		Host: "a", Node: "a", ProjectID: "p", UserID: "u", Flavor: flavor, Status: etcdschema.StatusActive,
		TaskState: etcdschema.TaskMigrating, MigrationUUID: "22222222-0000-4000-8000-000000000002", CreatedAt: now}
	r.mig = etcdschema.Migration{UUID: r.inst.MigrationUUID, InstanceUUID: r.inst.UUID, Cell: "cell1", ProjectID: "p",
		UserID: "u", MigrationType: etcdschema.MigrationTypeLiveMigration, Status: etcdschema.MigrationAccepted,
		SourceHost: "a", SourceNode: "a", OldFlavor: flavor, NewFlavor: flavor, BlockMigration: "auto",
		RequestID: "req-live", CreatedAt: now, UpdatedAt: now}
	if err := place.PutAllocations(ctx, r.inst.UUID, placement.AllocationWrite{ProjectID: "p", UserID: "u",
		Allocations: map[string]placement.ProviderAllocation{"rp-a": {Resources: map[string]int64{
			placement.VCPU: liveVCPU, placement.MemoryMB: 512}}}}); err != nil {
		t.Fatal(err)
	}
	req := &etcdschema.MoveRequest{InstanceUUID: r.inst.UUID, Cell: "cell1", MigrationUUID: r.mig.UUID,
		RequestID: "req-live", CreatedAt: now, Kind: etcdschema.MigrationTypeLiveMigration}
	if _, err := cli.Txn(ctx).Then(
		clientv3.OpPut(keys.CellInstance("cell1", r.inst.UUID), etcdschema.MustEncode(&r.inst)),
		clientv3.OpPut(keys.Migration("cell1", r.mig.UUID), etcdschema.MustEncode(&r.mig)),
		clientv3.OpPut(keys.MoveRequest(r.inst.UUID), etcdschema.MustEncode(req)),
	).Commit(); err != nil {
		t.Fatal(err)
	}
	return r
}

// superconductor runs one over cli with the given scheduler until the
// returned stop is called.
func (r *liveRig) superconductor(cli *clientv3.Client, holder string, sel scheduler.Selector) (stop func()) {
	r.t.Helper()
	ctx, cancel := context.WithCancel(r.ctx)
	sc := NewSuperconductor(SuperconductorConfig{Client: cli, Keys: r.keys, Placement: r.place, Holder: holder,
		Workers: 8, LeaseTTL: 2 * time.Second, SelectTimeout: time.Minute, MaxAttempts: 3,
		Schedulers: fixedTargets{{Name: holder, Selector: sel}}, Log: hclog.NewNullLogger()})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = sc.Run(ctx)
	}()
	return func() { cancel(); <-done }
}

func (r *liveRig) migration() etcdschema.Migration {
	r.t.Helper()
	resp, err := r.cli.Get(r.ctx, r.keys.Migration("cell1", r.mig.UUID))
	if err != nil || len(resp.Kvs) != 1 {
		r.t.Fatalf("read migration: %v", err)
	}
	var m etcdschema.Migration
	if err := etcdschema.Decode("", resp.Kvs[0].Value, &m); err != nil {
		r.t.Fatal(err)
	}
	return m
}

// holds is consumer's allocation: provider → VCPU (none: empty).
func (r *liveRig) holds(consumer string) map[string]int64 {
	r.t.Helper()
	out := map[string]int64{}
	c, err := r.place.GetAllocations(r.ctx, consumer)
	if err != nil {
		return out
	}
	for rp, a := range c.Allocations {
		out[rp] = a.Resources[placement.VCPU]
	}
	return out
}

// checkHeld waits until the instance and the migration hold exactly
// what is given and no provider counts anything else.
func (r *liveRig) checkHeld(what string, inst, mig map[string]int64) {
	r.t.Helper()
	testwait.Poll(r.t, testwait.Timeout, what, func() (bool, string) {
		gi, gm := r.holds(r.inst.UUID), r.holds(r.mig.UUID)
		total := int64(0)
		for _, h := range []string{"a", "b", "c"} {
			p, err := r.place.Provider(r.ctx, "rp-"+h)
			if err != nil {
				return false, err.Error()
			}
			total += p.Usages[placement.VCPU]
		}
		want := int64(0)
		for _, m := range []map[string]int64{inst, mig} {
			for _, v := range m {
				want += v
			}
		}
		return fmt.Sprint(gi) == fmt.Sprint(inst) && fmt.Sprint(gm) == fmt.Sprint(mig) && total == want,
			fmt.Sprintf("instance %v migration %v (in use %d); want %v %v (%d)", gi, gm, total, inst, mig, want)
	})
}

// failPreCheck is what the destination's agent writes when its driver
// refuses the guest (agent/live_migrate.go liveCheck): its claim freed,
// the reason on the attempt, the migration accepted again and the
// MoveRequest filed again, the cast ended.
func (r *liveRig) failPreCheck(host string) {
	r.t.Helper()
	if err := r.place.DeleteAllocations(r.ctx, r.inst.UUID); err != nil {
		r.t.Fatal(err)
	}
	m := r.migration()
	m.Attempts[len(m.Attempts)-1].Reason = "refused by " + host
	m.Status, m.DestHost, m.DestNode = etcdschema.MigrationAccepted, "", ""
	req := &etcdschema.MoveRequest{InstanceUUID: r.inst.UUID, Cell: "cell1", MigrationUUID: m.UUID,
		RequestID: m.RequestID, CreatedAt: time.Now().UTC(), Kind: etcdschema.MigrationTypeLiveMigration}
	if _, err := r.cli.Txn(r.ctx).Then(
		clientv3.OpPut(r.keys.Migration("cell1", m.UUID), etcdschema.MustEncode(&m)),
		clientv3.OpPut(r.keys.MoveRequest(r.inst.UUID), etcdschema.MustEncode(req)),
		clientv3.OpDelete(r.keys.Build(host, r.inst.UUID)),
	).Commit(); err != nil {
		r.t.Fatal(err)
	}
}

// waitCast waits for the pre-check cast of the migration's attempt n
// and returns its host.
func (r *liveRig) waitCast(n int) string {
	r.t.Helper()
	var m etcdschema.Migration
	testwait.Poll(r.t, 30*time.Second, fmt.Sprintf("pre-check cast of attempt %d", n), func() (bool, string) {
		m = r.migration()
		if m.Status != etcdschema.MigrationPreparing || len(m.Attempts) != n {
			return false, fmt.Sprintf("%s with %d attempts", m.Status, len(m.Attempts))
		}
		resp, err := r.cli.Get(r.ctx, r.keys.Build(m.DestHost, r.inst.UUID))
		if err != nil || len(resp.Kvs) != 1 {
			return false, fmt.Sprintf("no cast on %s (%v)", m.DestHost, err)
		}
		var b etcdschema.Build
		if err := etcdschema.Decode("", resp.Kvs[0].Value, &b); err != nil || b.Move == nil ||
			b.Move.Step != etcdschema.LiveCheck || b.Move.Kind != etcdschema.MigrationTypeLiveMigration {
			return false, fmt.Sprintf("cast %+v (%v)", b.Move, err)
		}
		return true, ""
	})
	return m.DestHost
}

// TestLiveMigrationSurvivesSuperconductorKill: a superconductor is
// killed (its client cut, no lease revoked) after it handed the source's
// allocation to the migration and its scheduler claimed a destination;
// a second one takes the request once the lease expires, frees the dead
// one's claim, claims its own and casts the pre-check. Then both other
// hosts fail their pre-check in turn: the second is the stored
// alternate, and after it the scheduler has no host left, so the
// migration ends in error with both reasons and the source's allocation
// back with the instance. At every point no allocation is orphaned or
// doubled.
func TestLiveMigrationSurvivesSuperconductorKill(t *testing.T) {
	r := newLiveRig(t)
	dead, err := clientv3.New(clientv3.Config{Endpoints: []string{r.srvURL}, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	claimed := make(chan struct{}, 1)
	stopA := r.superconductor(dead, "sc-a", dyingSelector{s: r.sched, claimed: claimed})
	select {
	case <-claimed:
	case <-time.After(30 * time.Second):
		t.Fatal("the first superconductor never asked its scheduler")
	}
	// Mid-migration: the source held by the migration, a destination
	// claimed by the instance, nothing recorded yet.
	gi := r.holds(r.inst.UUID)
	if len(gi) != 1 || gi["rp-a"] != 0 {
		t.Fatalf("instance holds %v mid-way, want one destination claim", gi)
	}
	r.checkHeld("the dying superconductor's state", gi, map[string]int64{"rp-a": liveVCPU})
	dead.Close() // the kill: no lease revoked, no keepalive
	stopA()

	stopB := r.superconductor(r.cli, "sc-b", r.sched)
	defer stopB()
	first := r.waitCast(1)
	if first == "a" {
		t.Fatal("the source was chosen as the destination")
	}
	m := r.migration()
	if len(m.Remaining) != 1 || m.Remaining[0].ServiceHost == first || m.Remaining[0].ServiceHost == "a" {
		t.Fatalf("alternates %+v after choosing %s", m.Remaining, first)
	}
	r.checkHeld("after the takeover", map[string]int64{"rp-" + first: liveVCPU}, map[string]int64{"rp-a": liveVCPU})

	r.failPreCheck(first)
	second := r.waitCast(2)
	if second == first || second == "a" {
		t.Fatalf("second attempt on %s (first %s)", second, first)
	}
	r.checkHeld("on the alternate", map[string]int64{"rp-" + second: liveVCPU}, map[string]int64{"rp-a": liveVCPU})

	r.failPreCheck(second)
	testwait.Poll(t, 30*time.Second, "the migration in error", func() (bool, string) {
		m = r.migration()
		return m.Status == etcdschema.MigrationError, m.Status
	})
	if len(m.Attempts) != 2 || m.Attempts[0].Reason == "" || m.Attempts[1].Reason == "" {
		t.Errorf("attempts %+v", m.Attempts)
	}
	for _, want := range []string{"refused by " + first, "refused by " + second} {
		if !strings.Contains(m.Error, want) {
			t.Errorf("error %q does not say %q", m.Error, want)
		}
	}
	r.checkHeld("after the error", map[string]int64{"rp-a": liveVCPU}, map[string]int64{})
	resp, err := r.cli.Get(r.ctx, r.keys.CellInstance("cell1", r.inst.UUID))
	if err != nil {
		t.Fatal(err)
	}
	var in etcdschema.Instance
	if err := etcdschema.Decode("", resp.Kvs[0].Value, &in); err != nil {
		t.Fatal(err)
	}
	if in.Host != "a" || in.TaskState != "" || in.MigrationUUID != "" || in.Status != etcdschema.StatusActive {
		t.Errorf("instance after the error: %+v", in)
	}
}

// TestLiveMigrationAbortedInQueue: a live migration aborted while its
// request waits for a superconductor (2.65's abort of a queued one) is
// cancelled there: no destination claimed, the source's allocation with
// the instance, the server ACTIVE on its source.
func TestLiveMigrationAbortedInQueue(t *testing.T) {
	r := newLiveRig(t)
	m := r.migration()
	m.AbortRequestID = "req-abort"
	if _, err := r.cli.Put(r.ctx, r.keys.Migration("cell1", m.UUID), etcdschema.MustEncode(&m)); err != nil {
		t.Fatal(err)
	}
	stop := r.superconductor(r.cli, "sc", r.sched)
	defer stop()
	testwait.Poll(t, 30*time.Second, "the migration cancelled", func() (bool, string) {
		m = r.migration()
		return m.Status == etcdschema.MigrationCancelled, m.Status
	})
	if len(m.Attempts) != 0 || !strings.Contains(m.Error, "req-abort") {
		t.Errorf("cancelled migration: attempts %+v, error %q", m.Attempts, m.Error)
	}
	r.checkHeld("after the abort", map[string]int64{"rp-a": liveVCPU}, map[string]int64{})
	resp, err := r.cli.Get(r.ctx, r.keys.MoveRequest(r.inst.UUID), clientv3.WithCountOnly())
	if err != nil || resp.Count != 0 {
		t.Errorf("move request left: %v %v", resp, err)
	}
}

// TestHoldSourceFreesAStaleClaim: the first holder of a move hands the
// source's allocation to the migration; a second holder (the first died
// after its scheduler claimed a destination under the instance) must
// free that claim, not move it over the source's allocation.
func TestHoldSourceFreesAStaleClaim(t *testing.T) {
	r := newLiveRig(t)
	s := &Superconductor{cfg: SuperconductorConfig{Placement: r.place}}
	rd := &moveRead{inst: r.inst, mig: r.mig}
	holdsOnly := func(consumer, rp string) {
		t.Helper()
		c, err := r.place.GetAllocations(r.ctx, consumer)
		if rp == "" {
			if err == nil && len(c.Allocations) > 0 {
				t.Fatalf("%s holds %v, want nothing", consumer, c.Allocations)
			}
			return
		}
		if err != nil || len(c.Allocations) != 1 || c.Allocations[rp].Resources[placement.VCPU] != liveVCPU {
			t.Fatalf("%s holds %+v (%v), want only %s", consumer, c, err, rp)
		}
	}
	if err := s.holdSource(r.ctx, r.place, rd); err != nil {
		t.Fatal(err)
	}
	holdsOnly(r.mig.UUID, "rp-a")
	holdsOnly(r.inst.UUID, "")
	// The dead holder's destination claim.
	if err := r.place.PutAllocations(r.ctx, r.inst.UUID, placement.AllocationWrite{ProjectID: "p", UserID: "u",
		Allocations: map[string]placement.ProviderAllocation{"rp-b": {Resources: map[string]int64{
			placement.VCPU: liveVCPU, placement.MemoryMB: 512}}}}); err != nil {
		t.Fatal(err)
	}
	if err := s.holdSource(r.ctx, r.place, rd); err != nil {
		t.Fatal(err)
	}
	holdsOnly(r.mig.UUID, "rp-a")
	holdsOnly(r.inst.UUID, "")
}
