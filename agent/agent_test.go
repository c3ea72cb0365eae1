package agent

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/internal/testwait"
	"github.com/berth-project/berth/placement"
)

func startAgent(t *testing.T, fake FakeConfig) (*clientv3.Client, etcdschema.Keys, *placement.Service, *Agent) {
	t.Helper()
	return startAgentOn(t, etcdtest.Client(t), fake)
}

// startAgentOn is startAgent with a client of the test's.
func startAgentOn(t *testing.T, cli *clientv3.Client, fake FakeConfig) (*clientv3.Client, etcdschema.Keys, *placement.Service, *Agent) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	keys := etcdschema.New("/t")
	p := placement.New(cli, keys, hclog.NewNullLogger())
	a, err := New(Config{Host: "h1", Cell: "cell1", ReportInterval: time.Second, TrackInstanceChanges: true,
		Inventory: Inventory{VCPUs: 4, MemoryMB: 4096, DiskGB: 10}},
		cli, keys, p, NewFakeDriver("h1", fake), hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	go a.Run(ctx)
	testwait.Until(t, "the agent's builds informer synced", func() bool { return a.builds.WaitSynced(ctx) == nil })
	return cli, keys, p, a
}

// waitFollowed waits until the agent's follow of its service record and
// instance info (host_follow.go) has seen every write made so far: its
// periodic syncs answer from it, as of what its watch delivered.
func waitFollowed(t *testing.T, cli *clientv3.Client, a *Agent) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, "/")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.followInf.WaitForRevision(ctx, resp.Header.Revision); err != nil {
		t.Fatal(err)
	}
}

// cast does what the superconductor's hand-off does: claim, instance
// record, build cast.
func cast(t *testing.T, cli *clientv3.Client, keys etcdschema.Keys, p *placement.Service, a *Agent, uuid string) {
	t.Helper()
	ctx := context.Background()
	err := p.PutAllocations(ctx, uuid, placement.AllocationWrite{ProjectID: "p", UserID: "u",
		Allocations: map[string]placement.ProviderAllocation{a.ProviderUUID(): {Resources: map[string]int64{"VCPU": 1}}}})
	if err != nil {
		t.Fatal(err)
	}
	inst := &etcdschema.Instance{UUID: uuid, Name: "x", Status: etcdschema.StatusBuild, Host: "h1", Cell: "cell1"}
	b := &etcdschema.Build{Op: etcdschema.OpBuild, InstanceUUID: uuid, Cell: "cell1", Attempt: 1}
	if _, err := cli.Txn(ctx).Then(
		clientv3.OpPut(keys.CellInstance("cell1", uuid), etcdschema.MustEncode(inst)),
		clientv3.OpPut(keys.Build("h1", uuid), etcdschema.MustEncode(b))).Commit(); err != nil {
		t.Fatal(err)
	}
}

func instance(t *testing.T, cli *clientv3.Client, keys etcdschema.Keys, uuid string) etcdschema.Instance {
	t.Helper()
	var in etcdschema.Instance
	readRecord(t, cli, keys.CellInstance("cell1", uuid), &in)
	return in
}

// readRecord reads the record at key into v; the test fails if it is
// missing or unreadable.
func readRecord(t *testing.T, cli *clientv3.Client, key string, v etcdschema.Versioned) {
	t.Helper()
	resp, err := cli.Get(context.Background(), key)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("no record at %s: %v", key, err)
	}
	if err := etcdschema.Decode(key, resp.Kvs[0].Value, v); err != nil {
		t.Fatal(err)
	}
}

func TestAgentRegistersAndBuilds(t *testing.T) {
	cli, keys, p, a := startAgent(t, FakeConfig{})
	ctx := context.Background()
	prov, err := p.Provider(ctx, a.ProviderUUID())
	if err != nil || prov.Inventories["VCPU"].Total != 4 || prov.Name != "h1" {
		t.Fatalf("provider not reported: %+v %v", prov, err)
	}
	cast(t, cli, keys, p, a, "i1")
	testwait.Until(t, "instance i1 ACTIVE", func() bool { return instance(t, cli, keys, "i1").Status == etcdschema.StatusActive })
	resp, _ := cli.Get(ctx, keys.Build("h1", "i1"))
	if len(resp.Kvs) != 0 {
		t.Fatal("cast left behind after the build")
	}
	if resp, _ := cli.Get(ctx, keys.HostInstance("h1", "i1")); len(resp.Kvs) != 1 {
		t.Fatal("no instance info for the schedulers")
	}
}

func TestAgentFailedBuildFreesClaimAndFilesRetry(t *testing.T) {
	cli, keys, p, a := startAgent(t, FakeConfig{Fail: true, FailReschedulable: true})
	ctx := context.Background()
	cast(t, cli, keys, p, a, "i2")
	testwait.Until(t, "a retry filed for i2", func() bool {
		resp, _ := cli.Get(ctx, keys.Retry("cell1", "i2"))
		return len(resp.Kvs) == 1
	})
	in := instance(t, cli, keys, "i2")
	if in.Host != "" || in.TaskState != etcdschema.TaskScheduling {
		t.Fatalf("instance after a reschedulable failure: %+v", in)
	}
	prov, _ := p.Provider(ctx, a.ProviderUUID())
	if prov.Usages["VCPU"] != 0 {
		t.Fatalf("claim not freed: provider uses %d VCPU", prov.Usages["VCPU"])
	}
}

// TestAgentSendsHostSyncAtStart checks the first uuid list is written when
// the agent starts, not one instance_sync_interval (120 s here) later:
// until then the schedulers read the host's instances from its cell.
func TestAgentSendsHostSyncAtStart(t *testing.T) {
	cli, keys, _, _ := startAgent(t, FakeConfig{})
	testwait.Until(t, "h1's HostSync written at start", func() bool {
		resp, err := cli.Get(context.Background(), keys.HostSync("h1"))
		return err == nil && len(resp.Kvs) == 1
	})
}

// TestAgentDestroysABuildTakenBackWhileBuilding: the leader takes a build
// back from a host that read down (it deletes the cast and reschedules
// the instance) while the agent, cut off but running, is still building
// it. When the build ends the agent must not keep the instance: it runs
// elsewhere now.
func TestAgentDestroysABuildTakenBackWhileBuilding(t *testing.T) {
	cli, keys, p, a := startAgent(t, FakeConfig{BuildTime: 500 * time.Millisecond})
	ctx := context.Background()
	cast(t, cli, keys, p, a, "i4")
	inFlight := func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		return a.inFlight["i4"]
	}
	testwait.Until(t, "the build of i4 started", inFlight)
	// What the down-host duty does: the instance back to scheduling, a
	// retry filed, the cast deleted.
	in := instance(t, cli, keys, "i4")
	in.Host, in.TaskState = "", etcdschema.TaskScheduling
	retry := &etcdschema.Retry{InstanceUUID: "i4", Cell: "cell1", FailedHost: "h1", Reason: "host h1 is down"}
	if _, err := cli.Txn(ctx).Then(
		clientv3.OpPut(keys.CellInstance("cell1", "i4"), etcdschema.MustEncode(&in)),
		clientv3.OpPut(keys.Retry("cell1", "i4"), etcdschema.MustEncode(retry)),
		clientv3.OpDelete(keys.Build("h1", "i4"))).Commit(); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, "the build of i4 ended", func() bool { return !inFlight() })
	assertNotKept(t, cli, keys, a, "i4", "")
}

// assertNotKept checks that agent a (host h1) neither runs uuid nor wrote
// it as its own: the instance is still BUILD on host (its new place) and
// h1 reports no instance info for it.
func assertNotKept(t *testing.T, cli *clientv3.Client, keys etcdschema.Keys, a *Agent, uuid, host string) {
	t.Helper()
	ctx := context.Background()
	if running, _ := a.driver.List(ctx); len(running) != 0 {
		t.Fatalf("driver runs %v, though %s is not this host's", running, uuid)
	}
	if got := instance(t, cli, keys, uuid); got.Status != etcdschema.StatusBuild || got.Host != host {
		t.Fatalf("the agent wrote over an instance not its own: %+v", got)
	}
	if resp, _ := cli.Get(ctx, keys.HostInstance("h1", uuid)); len(resp.Kvs) != 0 {
		t.Fatalf("instance info written on h1 for %s", uuid)
	}
}

// TestAgentDoesNotBuildAnInstanceThatNamesAnotherHost: a cast whose
// instance has moved on to another host (taken back and cast elsewhere
// before this agent got to it) must not be built here: no second copy,
// no ACTIVE written over the other host's build, the stale cast removed.
func TestAgentDoesNotBuildAnInstanceThatNamesAnotherHost(t *testing.T) {
	cli, keys, _, a := startAgent(t, FakeConfig{})
	ctx := context.Background()
	inst := &etcdschema.Instance{UUID: "i6", Name: "x", Status: etcdschema.StatusBuild, Host: "h2", Cell: "cell1"}
	b := &etcdschema.Build{Op: etcdschema.OpBuild, InstanceUUID: "i6", Cell: "cell1", Attempt: 1}
	if _, err := cli.Txn(ctx).Then(
		clientv3.OpPut(keys.CellInstance("cell1", "i6"), etcdschema.MustEncode(inst)),
		clientv3.OpPut(keys.Build("h1", "i6"), etcdschema.MustEncode(b))).Commit(); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, "the stale cast of i6 ended", func() bool {
		resp, err := cli.Get(ctx, keys.Build("h1", "i6"))
		return err == nil && len(resp.Kvs) == 0
	})
	assertNotKept(t, cli, keys, a, "i6", "h2")
}

// The failed_builds count: +1 per failure, 0 after a success. An agent
// that starts with a count left by its previous run must reset it on its
// first success, though it skips the service read once it knows the
// count is 0.
func TestAgentFailedBuildsCountSurvivesRestartAndResets(t *testing.T) {
	cli, keys, _, a := startAgent(t, FakeConfig{})
	ctx := context.Background()
	failed := func() (int, int64) {
		t.Helper()
		resp, err := cli.Get(ctx, keys.Service("h1"))
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("service: %v", err)
		}
		var s etcdschema.Service
		if err := etcdschema.Decode("service", resp.Kvs[0].Value, &s); err != nil {
			t.Fatal(err)
		}
		return s.FailedBuilds, resp.Kvs[0].ModRevision
	}
	a.noteBuildResult(ctx, false)
	a.noteBuildResult(ctx, false)
	if n, _ := failed(); n != 2 {
		t.Fatalf("failed_builds %d after two failures, want 2", n)
	}
	// A new agent process for the host (as after a restart) knows nothing
	// until it registers, which reads the record.
	b, err := New(a.cfg, cli, keys, a.placement, a.driver, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	if b.failedBuilds != -1 {
		t.Fatalf("a new agent knows failed_builds %d before registering", b.failedBuilds)
	}
	if err := b.Register(ctx); err != nil {
		t.Fatal(err)
	}
	if b.failedBuilds != 2 {
		t.Fatalf("failed_builds %d learnt at registration, want 2", b.failedBuilds)
	}
	b.noteBuildResult(ctx, true)
	n, rev := failed()
	if n != 0 {
		t.Fatalf("failed_builds %d after a success, want 0", n)
	}
	b.noteBuildResult(ctx, true)
	if n2, rev2 := failed(); n2 != 0 || rev2 != rev {
		t.Fatalf("a second success rewrote the service (%d at %d, was %d)", n2, rev2, rev)
	}
	b.noteBuildResult(ctx, false)
	if n, _ := failed(); n != 1 {
		t.Fatalf("failed_builds %d after a failure following successes, want 1", n)
	}
}

// TestAgentProviderSyncWritesOnlyOnChange: an idle periodic provider sync
// leaves the provider (and its generation) alone, since every write would
// race the claims on the host; a disabled service is still reported.
func TestAgentProviderSyncWritesOnlyOnChange(t *testing.T) {
	cli, keys, _, a := startAgent(t, FakeConfig{})
	ctx := context.Background()
	rev := func() int64 {
		t.Helper()
		resp, err := cli.Get(ctx, keys.Provider(a.ProviderUUID()))
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("read provider: %v", err)
		}
		return resp.Kvs[0].ModRevision
	}
	// The cell exists, so the sync's host mapping step succeeds too.
	if _, err := cli.Put(ctx, keys.Cell("cell1"), etcdschema.MustEncode(&etcdschema.Cell{Name: "cell1", UUID: "c1"})); err != nil {
		t.Fatal(err)
	}
	before := rev()
	for i := 0; i < 3; i++ {
		if err := a.SyncProvider(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if after := rev(); after != before {
		t.Fatalf("idle provider syncs rewrote the provider (mod revision %d -> %d)", before, after)
	}
	if err := a.updateService(ctx, func(s *etcdschema.Service) { s.Disabled = true }); err != nil {
		t.Fatal(err)
	}
	waitFollowed(t, cli, a)
	if err := a.SyncProvider(ctx); err != nil {
		t.Fatal(err)
	}
	if rev() == before {
		t.Fatal("a disabled service did not reach the provider")
	}
}

// TestAgentRenewAliveRegrantsALostLease: a beat on a revoked lease grants
// a new one and writes the alive key again under it.
func TestAgentRenewAliveRegrantsALostLease(t *testing.T) {
	cli, keys, _, a := startAgent(t, FakeConfig{})
	ctx := context.Background()
	lease, err := a.GrantAlive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewLeaseRenewer(cli, 5*time.Second, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got, err := a.RenewAlive(ctx, r, lease); err != nil || got != lease {
		t.Fatalf("renew a live lease: %v, %v (want %v)", got, err, lease)
	}
	if _, err := cli.Revoke(ctx, lease); err != nil {
		t.Fatal(err)
	}
	got, err := a.RenewAlive(ctx, r, lease)
	if err != nil || got == lease || got == 0 {
		t.Fatalf("renew a revoked lease: %v, %v", got, err)
	}
	resp, err := cli.Get(ctx, keys.Alive("h1"))
	if err != nil || len(resp.Kvs) != 1 || clientv3.LeaseID(resp.Kvs[0].Lease) != got {
		t.Fatalf("alive key not rewritten under the new lease %v: %v %v", got, resp, err)
	}
}
