package agent

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/internal/testwait"
	"github.com/berth-project/berth/placement"
)

// evacRig is one host's agent ("h1") that can be stopped and started
// again over the same fake driver, as a process restart keeps the
// guests of a hypervisor.
type evacRig struct {
	t    *testing.T
	cli  *clientv3.Client
	keys etcdschema.Keys
	p    *placement.Service
	drv  *FakeDriver
	cfg  Config
}

func newEvacRig(t *testing.T) *evacRig {
	cli := etcdtest.Client(t)
	keys := etcdschema.New("/t")
	return &evacRig{t: t, cli: cli, keys: keys, p: placement.New(cli, keys, hclog.NewNullLogger()),
		drv: NewFakeDriver("h1", FakeConfig{}),
		cfg: Config{Host: "h1", Cell: "cell1", ReportInterval: time.Second, TrackInstanceChanges: true,
			Inventory: Inventory{VCPUs: 4, MemoryMB: 4096, DiskGB: 10}}}
}

// start runs an agent until the returned stop is called (and returns).
func (r *evacRig) start() (*Agent, func()) {
	r.t.Helper()
	return r.startOn(r.drv)
}

// startOn is start with the agent driving drv (r.drv, perhaps wrapped).
func (r *evacRig) startOn(drv Driver) (*Agent, func()) {
	r.t.Helper()
	a, err := New(r.cfg, r.cli, r.keys, r.p, drv, hclog.NewNullLogger())
	if err != nil {
		r.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	testwait.Until(r.t, "the agent's builds informer synced", func() bool { return a.builds.WaitSynced(ctx) == nil })
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			if err := <-done; err != nil {
				r.t.Errorf("agent run: %v", err)
			}
		}
	}
	r.t.Cleanup(stop)
	return a, stop
}

// server records uuid in cell1 on host with an allocation on h1 held by
// holder (the instance, or an evacuation's migration), h1's instance
// info for it, and its guest running in h1's driver.
func (r *evacRig) server(uuid, host, status, task, holder string) {
	r.t.Helper()
	ctx := context.Background()
	in := &etcdschema.Instance{UUID: uuid, Name: uuid, Status: status, TaskState: task, Host: host, Cell: "cell1",
		Flavor: etcdschema.Flavor{ID: "1", Name: "m1.tiny", VCPUs: 1}}
	info := &etcdschema.InstanceInfo{UUID: uuid, Host: "h1", FlavorID: "1", Flavor: "m1.tiny", State: "active"}
	if _, err := r.cli.Txn(ctx).Then(
		clientv3.OpPut(r.keys.CellInstance("cell1", uuid), etcdschema.MustEncode(in)),
		clientv3.OpPut(r.keys.HostInstance("h1", uuid), etcdschema.MustEncode(info))).Commit(); err != nil {
		r.t.Fatal(err)
	}
	if err := r.p.PutAllocations(ctx, holder, placement.AllocationWrite{ProjectID: "p", UserID: "u",
		Allocations: map[string]placement.ProviderAllocation{ProviderUUIDForHost("h1"): {Resources: map[string]int64{"VCPU": 1}}}}); err != nil {
		r.t.Fatal(err)
	}
	if err := r.drv.Resume(ctx, &etcdschema.Build{InstanceUUID: uuid}); err != nil {
		r.t.Fatal(err)
	}
}

// evacuation records an evacuation of uuid from h1 in status.
func (r *evacRig) evacuation(mig, uuid, status string) {
	r.t.Helper()
	m := &etcdschema.Migration{UUID: mig, InstanceUUID: uuid, Cell: "cell1", MigrationType: etcdschema.MigrationTypeEvacuation,
		Status: status, SourceHost: "h1", SourceNode: "h1", DestHost: "h2", DestNode: "h2", CreatedAt: time.Now().UTC()}
	if _, err := r.cli.Txn(context.Background()).Then(
		clientv3.OpPut(r.keys.Migration("cell1", mig), etcdschema.MustEncode(m)),
		clientv3.OpPut(r.keys.MigrationMapping(mig), etcdschema.MustEncode(&etcdschema.InstanceMapping{InstanceUUID: uuid, Cell: "cell1"})),
	).Commit(); err != nil {
		r.t.Fatal(err)
	}
}

func (r *evacRig) migration(uuid string) etcdschema.Migration {
	r.t.Helper()
	var m etcdschema.Migration
	resp, err := r.cli.Get(context.Background(), r.keys.Migration("cell1", uuid))
	if err != nil || len(resp.Kvs) != 1 {
		r.t.Fatalf("read migration %s: %v", uuid, err)
	}
	if err := etcdschema.Decode("m", resp.Kvs[0].Value, &m); err != nil {
		r.t.Fatal(err)
	}
	return m
}

func (r *evacRig) count(key string) int64 {
	r.t.Helper()
	resp, err := r.cli.Get(context.Background(), key, clientv3.WithCountOnly())
	if err != nil {
		r.t.Fatal(err)
	}
	return resp.Count
}

func (r *evacRig) holds(consumer string) bool {
	r.t.Helper()
	_, err := r.p.GetAllocations(context.Background(), consumer)
	if errors.Is(err, placement.ErrNotFound) {
		return false
	}
	if err != nil {
		r.t.Fatal(err)
	}
	return true
}

func (r *evacRig) runs(uuid string) bool {
	l, _ := r.drv.List(context.Background())
	return slices.Contains(l, uuid)
}

// TestAgentDestroysEvacuatedCopiesAtStart: servers evacuated while the
// host was down still run in its driver when the agent starts again; it
// destroys them and drops its instance info for them, a done evacuation
// ends completed with the source's allocation freed, one in flight is
// left to its destination (not taken for a lost server), and a server
// that was not evacuated keeps running.
func TestAgentDestroysEvacuatedCopiesAtStart(t *testing.T) {
	r := newEvacRig(t)
	_, stop := r.start() // registers h1 and its provider
	stop()

	r.server("done", "h2", etcdschema.StatusActive, "", "mig-done")
	r.evacuation("mig-done", "done", etcdschema.MigrationDone)
	r.server("inflight", "h1", etcdschema.StatusActive, etcdschema.TaskRebuilding, "mig-inflight")
	r.evacuation("mig-inflight", "inflight", etcdschema.MigrationPreMigrating)
	r.server("stays", "h1", etcdschema.StatusActive, "", "stays")
	// An evacuation that failed earlier leaves its server alone, and so
	// does one done whose server has come back here since.
	r.server("failed", "h1", etcdschema.StatusActive, "", "failed")
	r.evacuation("mig-failed", "failed", etcdschema.MigrationFailed)
	r.server("back", "h1", etcdschema.StatusActive, "", "back")
	r.evacuation("mig-back", "back", etcdschema.MigrationDone)

	r.start()
	for uuid, want := range map[string]bool{"done": false, "inflight": false, "stays": true, "failed": true, "back": true} {
		if got := r.runs(uuid); got != want {
			t.Errorf("%s runs after the restart: %v, want %v", uuid, got, want)
		}
		if got := r.count(r.keys.HostInstance("h1", uuid)) == 1; got != want {
			t.Errorf("h1's instance info has %s: %v, want %v", uuid, got, want)
		}
	}
	if m := r.migration("mig-done"); m.Status != etcdschema.MigrationCompleted {
		t.Errorf("done evacuation after the source's cleanup: %s, want completed", m.Status)
	}
	if r.holds("mig-done") || r.count(r.keys.MigrationMapping("mig-done")) != 0 {
		t.Error("the done evacuation's source allocation or mapping is left")
	}
	if m := r.migration("mig-inflight"); m.Status != etcdschema.MigrationPreMigrating || !r.holds("mig-inflight") {
		t.Errorf("in-flight evacuation touched: %s, source held %v", m.Status, r.holds("mig-inflight"))
	}
	in := instance(t, r.cli, r.keys, "inflight")
	if in.Status != etcdschema.StatusActive || in.TaskState != etcdschema.TaskRebuilding {
		t.Errorf("in-flight evacuated server: %s/%s, want ACTIVE/rebuilding", in.Status, in.TaskState)
	}
	if m := r.migration("mig-back"); m.Status != etcdschema.MigrationCompleted {
		t.Errorf("the old evacuation of a server back here: %s, want completed", m.Status)
	}
	if !r.holds("stays") || !r.holds("failed") || !r.holds("back") {
		t.Error("a server that was not evacuated lost its allocation")
	}
}

// windowDriver is the fake driver whose Resume of server lost first runs
// inWindow: the start-up reconcile resumes a lost ACTIVE server after
// its clean-up of evacuated servers and before the host goes up, the
// window in which the host still reads down.
type windowDriver struct {
	*FakeDriver
	lost     string
	inWindow func()
}

func (d *windowDriver) Resume(ctx context.Context, b *etcdschema.Build) error {
	if b.InstanceUUID == d.lost {
		d.inWindow()
	}
	return d.FakeDriver.Resume(ctx, b)
}

// TestAgentDestroysServersEvacuatedBeforeItIsUp: a server evacuated after
// the start-up reconcile cleaned up, while the host still reads down
// (its alive key not written yet), is destroyed here once the host is
// up. After that no evacuation from this host can be accepted (the API
// compares the alive key's absence), so nothing is left running twice.
func TestAgentDestroysServersEvacuatedBeforeItIsUp(t *testing.T) {
	r := newEvacRig(t)
	_, stop := r.start() // registers h1 and its provider
	stop()

	r.server("late", "h1", etcdschema.StatusActive, "", "late")
	r.server("lost", "h1", etcdschema.StatusActive, "", "lost")
	if err := r.drv.Destroy(context.Background(), "lost"); err != nil { // the driver lost it
		t.Fatal(err)
	}
	windowSeen := make(chan int64, 1)
	drv := &windowDriver{FakeDriver: r.drv, lost: "lost", inWindow: func() {
		// The operator evacuates "late" now: the host reads down.
		ctx := context.Background()
		alive, err := r.cli.Get(ctx, r.keys.Alive("h1"), clientv3.WithCountOnly())
		if err != nil {
			windowSeen <- -1
			return
		}
		in := &etcdschema.Instance{UUID: "late", Name: "late", Status: etcdschema.StatusActive, TaskState: etcdschema.TaskRebuilding,
			Host: "h1", Cell: "cell1", Flavor: etcdschema.Flavor{ID: "1", Name: "m1.tiny", VCPUs: 1}, MigrationUUID: "mig-late"}
		m := &etcdschema.Migration{UUID: "mig-late", InstanceUUID: "late", Cell: "cell1", MigrationType: etcdschema.MigrationTypeEvacuation,
			Status: etcdschema.MigrationAccepted, SourceHost: "h1", SourceNode: "h1", DestHost: "h2", DestNode: "h2", CreatedAt: time.Now().UTC()}
		if _, err := r.cli.Txn(ctx).Then(
			clientv3.OpPut(r.keys.CellInstance("cell1", "late"), etcdschema.MustEncode(in)),
			clientv3.OpPut(r.keys.Migration("cell1", "mig-late"), etcdschema.MustEncode(m)),
		).Commit(); err != nil {
			windowSeen <- -1
			return
		}
		windowSeen <- alive.Count
	}}
	r.startOn(drv)
	select {
	case n := <-windowSeen:
		if n != 0 {
			t.Fatalf("evacuation in the window: alive keys of h1 = %d (-1: etcd failed), want 0 (down)", n)
		}
	default:
		t.Fatal("the start-up reconcile did not resume the lost server: no window to evacuate in")
	}
	if r.count(r.keys.Alive("h1")) != 1 {
		t.Fatal("h1 is not up after its start")
	}
	if r.runs("late") {
		t.Error("the server evacuated before h1 was up still runs on h1")
	}
	if r.count(r.keys.HostInstance("h1", "late")) != 0 {
		t.Error("h1's instance info still has the server evacuated before it was up")
	}
	if !r.runs("lost") {
		t.Error("the lost server was not resumed")
	}
	if m := r.migration("mig-late"); m.Status != etcdschema.MigrationAccepted || !r.holds("late") {
		t.Errorf("the evacuation in flight touched: %s, allocation held %v", m.Status, r.holds("late"))
	}
}

// TestAgentDestroysEvacuatedCopiesWhenItsLeaseIsBack: an agent that
// kept running while its lease was lost (the host read down and was
// evacuated) destroys its copy once a new lease is granted.
func TestAgentDestroysEvacuatedCopiesWhenItsLeaseIsBack(t *testing.T) {
	r := newEvacRig(t)
	a, _ := r.start()
	ctx := context.Background()
	r.server("moved", "h2", etcdschema.StatusActive, "", "mig-moved")
	r.evacuation("mig-moved", "moved", etcdschema.MigrationDone)
	lease, err := a.GrantAlive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rn, err := NewLeaseRenewer(r.cli, 5*time.Second, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer rn.Close()
	if _, err := r.cli.Revoke(ctx, lease); err != nil {
		t.Fatal(err)
	}
	if _, err := a.RenewAlive(ctx, rn, lease); err != nil {
		t.Fatal(err)
	}
	testwait.Poll(t, 10*time.Second, "the stale copy destroyed", func() (bool, string) {
		return !r.runs("moved") && r.migration("mig-moved").Status == etcdschema.MigrationCompleted, ""
	})
	if r.count(r.keys.HostInstance("h1", "moved")) != 0 {
		t.Error("h1's instance info still has the evacuated server")
	}
}

// TestAgentWorksTheEvacuationCleanupCast: a source forced down with its
// agent running gets the cell conductor's clean-up cast once its
// server's evacuation is done: the copy goes, its instance info too,
// the evacuation ends completed and the cast with it. A server back on
// this host since keeps its guest.
func TestAgentWorksTheEvacuationCleanupCast(t *testing.T) {
	r := newEvacRig(t)
	r.start()
	ctx := context.Background()
	r.server("moved", "h2", etcdschema.StatusActive, "", "mig-moved")
	r.evacuation("mig-moved", "moved", etcdschema.MigrationDone)
	r.server("back", "h1", etcdschema.StatusActive, "", "back")
	r.evacuation("mig-back", "back", etcdschema.MigrationDone)
	for _, c := range []struct{ uuid, mig string }{{"moved", "mig-moved"}, {"back", "mig-back"}} {
		b := &etcdschema.Build{Op: etcdschema.OpMove, InstanceUUID: c.uuid, Cell: "cell1",
			Move: &etcdschema.MoveStep{MigrationUUID: c.mig, Step: etcdschema.MoveEvacuateCleanup, Kind: etcdschema.MigrationTypeEvacuation}}
		if _, err := r.cli.Put(ctx, r.keys.Build("h1", c.uuid), etcdschema.MustEncode(b)); err != nil {
			t.Fatal(err)
		}
	}
	testwait.Poll(t, 10*time.Second, "both clean-up casts worked", func() (bool, string) {
		for _, c := range []string{"moved", "back"} {
			if r.count(r.keys.Build("h1", c)) != 0 {
				return false, c + "'s cast is still there"
			}
		}
		return true, ""
	})
	if r.runs("moved") || r.count(r.keys.HostInstance("h1", "moved")) != 0 || r.holds("mig-moved") {
		t.Error("the evacuated server's copy, instance info or source allocation is left on h1")
	}
	if !r.runs("back") || r.count(r.keys.HostInstance("h1", "back")) != 1 || !r.holds("back") {
		t.Error("a server back on h1 lost its guest, instance info or allocation")
	}
	for _, m := range []string{"mig-moved", "mig-back"} {
		if st := r.migration(m).Status; st != etcdschema.MigrationCompleted {
			t.Errorf("%s after the clean-up: %s, want completed", m, st)
		}
	}
}
