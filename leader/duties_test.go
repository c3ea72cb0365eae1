package leader

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/testwait"
	"github.com/berth-project/berth/placement"
)

// lead wins the scheduler election in c and returns the term's fence and
// its session (closing the session deposes it).
func (c *cloud) lead() (Fence, *concurrency.Session) {
	c.t.Helper()
	sess, err := concurrency.NewSession(c.cli, concurrency.WithTTL(5))
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { sess.Close() })
	e := concurrency.NewElection(sess, c.keys.Election(testElection))
	if err := e.Campaign(c.ctx, "test"); err != nil {
		c.t.Fatal(err)
	}
	return Fence{Key: e.Key(), Rev: e.Rev()}, sess
}

type fixedCount int

func (n fixedCount) Count() int { return int(n) }

func (c *cloud) duties(now time.Time, sups int) *duties {
	return &duties{DutyConfig: DutyConfig{Client: c.cli, Keys: c.keys, Placement: c.place, Hosts: c.hosts,
		Superconductors: fixedCount(sups), ID: "test", Interval: time.Second, DownHostGrace: time.Minute,
		OrphanGrace: 10 * time.Minute, StuckBuildRequestTimeout: 10 * time.Minute,
		Log: hclog.NewNullLogger(), Now: func() time.Time { return now }}}
}

func TestDutyDownHostReschedulesAndDeletesLocally(t *testing.T) {
	c := newCloud(t)
	c.addHost("a", "cell1", 8, 8192)
	f, _ := c.lead()
	k := c.keys
	// A build waiting on a, and a delete waiting on a.
	c.claim("i-build", "a")
	c.claim("i-del", "a")
	for _, u := range []string{"i-build", "i-del"} {
		c.put(k.CellInstance("cell1", u), &etcdschema.Instance{UUID: u, Status: etcdschema.StatusBuild, Host: "a", Cell: "cell1"})
		c.put(k.InstanceMapping(u), &etcdschema.InstanceMapping{InstanceUUID: u, Cell: "cell1"})
	}
	c.put(k.Build("a", "i-build"), &etcdschema.Build{Op: etcdschema.OpBuild, InstanceUUID: "i-build", Cell: "cell1", Attempt: 1})
	c.put(k.Build("a", "i-del"), &etcdschema.Build{Op: etcdschema.OpDelete, InstanceUUID: "i-del", Cell: "cell1"})
	// A resize whose destination is a, before its prep, and one whose
	// guest was being started there (finish): the first is retried on
	// an alternate with the server left on its source, the second waits.
	for _, m := range []struct{ uuid, step string }{{"i-prep", etcdschema.MovePrep}, {"i-finish", etcdschema.MoveFinish}} {
		c.put(k.CellInstance("cell1", m.uuid), &etcdschema.Instance{UUID: m.uuid, Status: etcdschema.StatusActive, Host: "src",
			Cell: "cell1", TaskState: etcdschema.TaskResizePrep, MigrationUUID: "mig-" + m.uuid})
		c.put(k.Build("a", m.uuid), &etcdschema.Build{Op: etcdschema.OpMove, InstanceUUID: m.uuid, Cell: "cell1",
			Move: &etcdschema.MoveStep{MigrationUUID: "mig-" + m.uuid, Step: m.step}})
	}
	// An evacuation whose destination is a, before its rebuild: retried
	// on an alternate as a prep is.
	c.put(k.CellInstance("cell1", "i-evac"), &etcdschema.Instance{UUID: "i-evac", Status: etcdschema.StatusActive, Host: "src",
		Cell: "cell1", TaskState: etcdschema.TaskRebuilding, MigrationUUID: "mig-i-evac"})
	c.put(k.Build("a", "i-evac"), &etcdschema.Build{Op: etcdschema.OpMove, InstanceUUID: "i-evac", Cell: "cell1",
		Move: &etcdschema.MoveStep{MigrationUUID: "mig-i-evac", Step: etcdschema.MoveEvacuateRebuild, Kind: etcdschema.MigrationTypeEvacuation}})
	// A server being evacuated from a, deleted meanwhile: its delete
	// cast waits on a, and the local delete frees the migration's
	// consumer (a's allocation) with the instance's.
	c.claim("i-delmove", "a")
	c.claim("mig-i-delmove", "a")
	c.put(k.CellInstance("cell1", "i-delmove"), &etcdschema.Instance{UUID: "i-delmove", Status: etcdschema.StatusActive, Host: "a",
		Cell: "cell1", TaskState: etcdschema.TaskDeleting, MigrationUUID: "mig-i-delmove"})
	c.put(k.InstanceMapping("i-delmove"), &etcdschema.InstanceMapping{InstanceUUID: "i-delmove", Cell: "cell1"})
	c.put(k.MigrationMapping("mig-i-delmove"), &etcdschema.InstanceMapping{InstanceUUID: "i-delmove", Cell: "cell1"})
	c.put(k.Build("a", "i-delmove"), &etcdschema.Build{Op: etcdschema.OpDelete, InstanceUUID: "i-delmove", Cell: "cell1",
		Move: &etcdschema.MoveStep{MigrationUUID: "mig-i-delmove"}})
	if _, err := c.cli.Delete(c.ctx, k.Alive("a")); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, "a seen down", func() bool { down, _ := c.hosts.DownHosts(); return slices.Contains(down, "a") })

	now := time.Now()
	if err := c.duties(now, 1).downHosts(c.ctx, f); err != nil {
		t.Fatal(err)
	}
	if !c.exists(k.HostDown("a")) {
		t.Fatal("down host not recorded")
	}
	if !c.exists(k.Build("a", "i-build")) {
		t.Fatal("casts taken from a host before the grace ran out")
	}
	if err := c.duties(now.Add(2*time.Minute), 1).downHosts(c.ctx, f); err != nil {
		t.Fatal(err)
	}
	if c.exists(k.Build("a", "i-build")) || c.exists(k.Build("a", "i-del")) {
		t.Fatal("build and delete casts to the down host are still there")
	}
	resp, _ := c.cli.Get(c.ctx, k.Retry("cell1", "i-build"))
	var r etcdschema.Retry
	if len(resp.Kvs) != 1 || etcdschema.Decode("retry", resp.Kvs[0].Value, &r) != nil || r.FailedHost != "a" {
		t.Fatalf("no retry filed for the build on the down host: %v", resp.Kvs)
	}
	resp, _ = c.cli.Get(c.ctx, k.CellInstance("cell1", "i-build"))
	var inst etcdschema.Instance
	if etcdschema.Decode("inst", resp.Kvs[0].Value, &inst) != nil || inst.Host != "" || inst.TaskState != etcdschema.TaskScheduling {
		t.Fatalf("instance not handed back for rescheduling: %+v", inst)
	}
	resp, _ = c.cli.Get(c.ctx, k.Retry("cell1", "i-prep"))
	if len(resp.Kvs) != 1 || c.exists(k.Build("a", "i-prep")) {
		t.Fatalf("a move's prep on the down host was not filed for retry: %v", resp.Kvs)
	}
	resp, _ = c.cli.Get(c.ctx, k.CellInstance("cell1", "i-prep"))
	var moving etcdschema.Instance
	if etcdschema.Decode("inst", resp.Kvs[0].Value, &moving) != nil || moving.Host != "src" || moving.Status != etcdschema.StatusActive {
		t.Fatalf("a moving server was taken off its source: %+v", moving)
	}
	if !c.exists(k.Build("a", "i-finish")) || c.exists(k.Retry("cell1", "i-finish")) {
		t.Fatal("a move's later step on the down host did not wait for it")
	}
	if !c.exists(k.Retry("cell1", "i-evac")) || c.exists(k.Build("a", "i-evac")) {
		t.Fatal("an evacuation's rebuild on the down host was not filed for retry")
	}
	for _, consumer := range []string{"i-delmove", "mig-i-delmove"} {
		if _, err := c.place.GetAllocations(c.ctx, consumer); !errors.Is(err, placement.ErrNotFound) {
			t.Errorf("%s still holds allocations after the local delete: %v", consumer, err)
		}
	}
	if c.exists(k.CellInstance("cell1", "i-delmove")) || c.exists(k.MigrationMapping("mig-i-delmove")) {
		t.Error("a moving server deleted on its down host left its record or its migration's mapping")
	}
	if c.exists(k.CellInstance("cell1", "i-del")) || c.exists(k.InstanceMapping("i-del")) {
		t.Fatal("instance on the down host was not deleted locally")
	}
	if _, err := c.place.GetAllocations(c.ctx, "i-del"); !errors.Is(err, placement.ErrNotFound) {
		t.Fatalf("deleted instance still holds allocations: %v", err)
	}

	// Back up: the record goes.
	c.put(k.Alive("a"), &etcdschema.Alive{Host: "a"})
	testwait.Until(t, "a seen up", func() bool { down, _ := c.hosts.DownHosts(); return !slices.Contains(down, "a") })
	testwait.Equal(t, "down record seen", 1, func() int { _, back := c.hosts.DownHosts(); return len(back) })
	if err := c.duties(now, 1).downHosts(c.ctx, f); err != nil {
		t.Fatal(err)
	}
	if c.exists(k.HostDown("a")) {
		t.Fatal("down record kept for a host that is up")
	}
}

func TestDutyOrphanedAllocations(t *testing.T) {
	c := newCloud(t)
	c.addHost("a", "cell1", 8, 8192)
	f, sess := c.lead()
	c.claim("orphan", "a")
	c.claim("owned", "a")
	c.claim("moving", "a") // a migration's consumer, holding a resize's source
	c.put(c.keys.MigrationMapping("moving"), &etcdschema.InstanceMapping{InstanceUUID: "owned", Cell: "cell1"})
	rev := c.put(c.keys.InstanceMapping("owned"), &etcdschema.InstanceMapping{InstanceUUID: "owned", Cell: "cell1"})
	c.sync(rev)

	// Young allocations are left alone: they may be claims in flight.
	if err := c.duties(time.Now(), 1).orphanedAllocations(c.ctx, f); err != nil {
		t.Fatal(err)
	}
	if c.usage("a") != 3 {
		t.Fatal("a young allocation was freed")
	}
	later := time.Now().Add(time.Hour)
	if err := c.duties(later, 1).orphanedAllocations(c.ctx, f); err != nil {
		t.Fatal(err)
	}
	if _, err := c.place.GetAllocations(c.ctx, "orphan"); !errors.Is(err, placement.ErrNotFound) {
		t.Fatalf("orphaned allocation not freed: %v", err)
	}
	if _, err := c.place.GetAllocations(c.ctx, "owned"); err != nil {
		t.Fatalf("an instance's allocation was freed: %v", err)
	}
	if _, err := c.place.GetAllocations(c.ctx, "moving"); err != nil {
		t.Fatalf("a migration's allocation was freed: %v", err)
	}

	// A deposed leader frees nothing.
	c.claim("orphan2", "a")
	if _, err := c.cli.Revoke(c.ctx, sess.Lease()); err != nil {
		t.Fatal(err)
	}
	err := c.duties(later, 1).orphanedAllocations(c.ctx, f)
	if !errors.Is(err, ErrNotLeader) {
		t.Fatalf("deposed leader: want ErrNotLeader, got %v", err)
	}
	if _, err := c.place.GetAllocations(c.ctx, "orphan2"); err != nil {
		t.Fatalf("a deposed leader's free went through: %v", err)
	}
}

// TestDutyOrphanedAllocationsPaged: each run reads one page of consumers
// from where the last stopped, and a walk over all of them frees every
// orphan, and only orphans, as one run over all did; at the end it wraps
// around to the first consumer.
func TestDutyOrphanedAllocationsPaged(t *testing.T) {
	c := newCloud(t)
	c.addHost("a", "cell1", 16, 8192)
	f, _ := c.lead()
	orphans := []string{"o1", "o2", "o3", "o4", "o5"}
	owned := []string{"w1", "w2", "w3"}
	for _, u := range orphans {
		c.claim(u, "a")
	}
	for _, u := range owned {
		c.claim(u, "a")
		c.put(c.keys.InstanceMapping(u), &etcdschema.InstanceMapping{InstanceUUID: u, Cell: "cell1"})
	}
	held := func(u string) bool {
		_, err := c.place.GetAllocations(c.ctx, u)
		if err != nil && !errors.Is(err, placement.ErrNotFound) {
			t.Fatal(err)
		}
		return err == nil
	}
	d := c.duties(time.Now().Add(time.Hour), 1)
	d.OrphanSweepPage = 2
	// Key order: o1 o2 | o3 o4 | o5 w1 | w2 w3.
	if err := d.orphanedAllocations(c.ctx, f); err != nil {
		t.Fatal(err)
	}
	if held("o1") || held("o2") || !held("o3") || !held("o5") {
		t.Fatalf("first run of pages of 2: o1 o2 o3 o5 held = %v %v %v %v, want false false true true",
			held("o1"), held("o2"), held("o3"), held("o5"))
	}
	for range 3 {
		if err := d.orphanedAllocations(c.ctx, f); err != nil {
			t.Fatal(err)
		}
	}
	for _, u := range orphans {
		if held(u) {
			t.Errorf("orphan %s not freed by a walk over every page", u)
		}
	}
	for _, u := range owned {
		if !held(u) {
			t.Errorf("an instance's allocation %s was freed", u)
		}
	}
	// The walk ended: the next run starts from the first consumer again.
	c.claim("o0", "a")
	if err := d.orphanedAllocations(c.ctx, f); err != nil {
		t.Fatal(err)
	}
	if held("o0") {
		t.Error("the sweep did not wrap around to the first consumer")
	}
}

func TestDutyStaleAlternates(t *testing.T) {
	c := newCloud(t)
	f, _ := c.lead()
	k := c.keys
	old := time.Now().Add(-time.Hour)
	alts := func(u string) *etcdschema.Alternates {
		return &etcdschema.Alternates{InstanceUUID: u, Cell: "cell1", Attempts: []etcdschema.Attempt{{Host: "a", At: old}}}
	}
	// gone: no mapping. errored: ERROR, no retry. building: BUILD.
	c.put(k.Alternates("gone"), alts("gone"))
	for u, st := range map[string]string{"errored": etcdschema.StatusError, "building": etcdschema.StatusBuild} {
		c.put(k.Alternates(u), alts(u))
		c.put(k.InstanceMapping(u), &etcdschema.InstanceMapping{InstanceUUID: u, Cell: "cell1"})
		c.put(k.CellInstance("cell1", u), &etcdschema.Instance{UUID: u, Status: st, Cell: "cell1"})
	}
	if err := c.duties(time.Now(), 1).staleAlternates(c.ctx, f); err != nil {
		t.Fatal(err)
	}
	for u, want := range map[string]bool{"gone": false, "errored": false, "building": true} {
		if got := c.exists(k.Alternates(u)); got != want {
			t.Errorf("alternates of %s kept = %v, want %v", u, got, want)
		}
	}
}

func TestDutyStuckBuildRequests(t *testing.T) {
	c := newCloud(t)
	f, _ := c.lead()
	k := c.keys
	old := time.Now().Add(-time.Hour)
	for _, u := range []string{"stuck", "leased"} {
		c.put(k.BuildRequest(u), &etcdschema.BuildRequest{InstanceUUID: u, Count: 1, CreatedAt: old})
		c.put(k.InstanceMapping(u), &etcdschema.InstanceMapping{InstanceUUID: u})
	}
	c.put(k.BuildRequestLease("leased"), &etcdschema.Lease{Holder: "someone"})

	// With superconductors registered an old request is a backlog.
	if err := c.duties(time.Now(), 1).stuckBuildRequests(c.ctx, f); err != nil {
		t.Fatal(err)
	}
	if !c.exists(k.BuildRequest("stuck")) {
		t.Fatal("buried a request while superconductors are registered")
	}
	if err := c.duties(time.Now(), 0).stuckBuildRequests(c.ctx, f); err != nil {
		t.Fatal(err)
	}
	if c.exists(k.BuildRequest("stuck")) || !c.exists(k.CellInstance(etcdschema.Cell0, "stuck")) {
		t.Fatal("stuck request not buried in cell0")
	}
	if !c.exists(k.BuildRequest("leased")) {
		t.Fatal("a leased request was buried")
	}
}
