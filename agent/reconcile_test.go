package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/internal/testwait"
	"github.com/berth-project/berth/placement"
)

// agentEnv is one etcd and placement that agents come and go on.
type agentEnv struct {
	cli  *clientv3.Client
	keys etcdschema.Keys
	p    *placement.Service
}

func newAgentEnv(t *testing.T) *agentEnv {
	cli := etcdtest.Client(t)
	keys := etcdschema.New("/t")
	return &agentEnv{cli: cli, keys: keys, p: placement.New(cli, keys, hclog.NewNullLogger())}
}

// run starts an agent for h1 with driver d; stop waits for Run to return.
func (e *agentEnv) run(t *testing.T, d Driver, maxBuilds int) (a *Agent, stop func()) {
	t.Helper()
	return e.runTracking(t, d, maxBuilds, true)
}

// runTracking is run with track_instance_changes set as given.
func (e *agentEnv) runTracking(t *testing.T, d Driver, maxBuilds int, track bool) (a *Agent, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	a, err := New(Config{Host: "h1", Cell: "cell1", ReportInterval: time.Second, TrackInstanceChanges: track,
		MaxConcurrentBuilds: maxBuilds, Inventory: Inventory{VCPUs: 8, MemoryMB: 4096, DiskGB: 10}},
		e.cli, e.keys, e.p, d, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = a.Run(ctx); close(done) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	if err := a.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	return a, stop
}

// castCommand casts a build of a flavor running command (for the process
// driver; ignored by the fake one).
func (e *agentEnv) castCommand(t *testing.T, uuid, command string) {
	t.Helper()
	ctx := context.Background()
	if err := e.p.PutAllocations(ctx, uuid, placement.AllocationWrite{ProjectID: "p", UserID: "u",
		Allocations: map[string]placement.ProviderAllocation{ProviderUUIDForHost("h1"): {Resources: map[string]int64{"VCPU": 1}}}}); err != nil {
		t.Fatal(err)
	}
	f := etcdschema.Flavor{Name: "proc", VCPUs: 1, ExtraSpecs: map[string]string{CommandExtraSpec: command}}
	inst := &etcdschema.Instance{UUID: uuid, Name: uuid, Status: etcdschema.StatusBuild, Host: "h1", Cell: "cell1", Flavor: f}
	b := &etcdschema.Build{Op: etcdschema.OpBuild, InstanceUUID: uuid, Name: uuid, Cell: "cell1", Flavor: f, Attempt: 1}
	if _, err := e.cli.Txn(ctx).Then(
		clientv3.OpPut(e.keys.CellInstance("cell1", uuid), etcdschema.MustEncode(inst)),
		clientv3.OpPut(e.keys.Build("h1", uuid), etcdschema.MustEncode(b))).Commit(); err != nil {
		t.Fatal(err)
	}
}

func (e *agentEnv) status(t *testing.T, uuid string) (string, string) {
	in := instance(t, e.cli, e.keys, uuid)
	msg := ""
	if in.Fault != nil {
		msg = in.Fault.Message
	}
	return in.Status, msg
}

func (e *agentEnv) waitStatus(t *testing.T, uuid, want string) string {
	t.Helper()
	var msg string
	testwait.Poll(t, testwait.Timeout, uuid+" "+want, func() (bool, string) {
		var got string
		got, msg = e.status(t, uuid)
		return got == want, fmt.Sprintf("%s (%s)", got, msg)
	})
	return msg
}

func TestAgentRestartResumesFakeInstancesAndDestroysOrphans(t *testing.T) {
	// With track_instance_changes the host's instance info indexes what it
	// runs; without, the agent lists its cell.
	for _, track := range []bool{true, false} {
		t.Run(fmt.Sprintf("track_instance_changes=%v", track), func(t *testing.T) {
			e := newAgentEnv(t)
			_, stop := e.runTracking(t, NewFakeDriver("h1", FakeConfig{}), 0, track)
			e.castCommand(t, "i1", "")
			e.waitStatus(t, "i1", etcdschema.StatusActive)
			stop()

			// The restarted agent's fake driver lost i1 and runs a stray "ghost".
			d := NewFakeDriver("h1", FakeConfig{})
			if err := d.Spawn(context.Background(), &etcdschema.Build{InstanceUUID: "ghost"}); err != nil {
				t.Fatal(err)
			}
			e.runTracking(t, d, 0, track)
			if ids, _ := d.List(context.Background()); strings.Join(ids, ",") != "i1" {
				t.Fatalf("driver runs %v after reconciliation, want [i1]", ids)
			}
			if st, _ := e.status(t, "i1"); st != etcdschema.StatusActive {
				t.Fatalf("resumed instance is %s", st)
			}
		})
	}
}

func TestAgentRestartWithProcessDriver(t *testing.T) {
	e := newAgentEnv(t)
	dir := t.TempDir()
	newDriver := func() *ProcessDriver {
		d, err := NewProcessDriver("h1", ProcessConfig{StateDir: dir, StopGrace: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	d1 := newDriver()
	_, stop := e.run(t, d1, 0)
	t.Cleanup(func() {
		for _, u := range []string{"kept", "lost", "ghost"} {
			_ = d1.Destroy(context.Background(), u)
		}
	})
	e.castCommand(t, "kept", "sleep 60")
	e.castCommand(t, "lost", "sleep 60")
	e.waitStatus(t, "kept", etcdschema.StatusActive)
	e.waitStatus(t, "lost", etcdschema.StatusActive)
	stop() // processes outlive their agent, as VMs outlive nova-compute

	// While the agent is down: "lost" dies, and a process etcd knows
	// nothing of appears in the driver's records.
	lostPID := pidOf(t, d1, "lost")
	if err := syscall.Kill(-lostPID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, "the lost process gone", func() bool { return !groupAlive(lostPID) })
	if err := d1.Spawn(context.Background(), procBuild("ghost", "sleep 60")); err != nil {
		t.Fatal(err)
	}
	ghostPID := pidOf(t, d1, "ghost")
	keptPID := pidOf(t, d1, "kept")

	d2 := newDriver()
	e.run(t, d2, 0)
	msg := e.waitStatus(t, "lost", etcdschema.StatusError)
	if !strings.Contains(msg, "was not running on h1 when its agent started") {
		t.Fatalf("lost instance's fault: %q", msg)
	}
	if st, _ := e.status(t, "kept"); st != etcdschema.StatusActive {
		t.Fatalf("adopted instance is %s", st)
	}
	testwait.Until(t, "the orphan process killed by reconciliation", func() bool { return !groupAlive(ghostPID) })
	if !groupAlive(keptPID) {
		t.Fatal("adopted process was killed")
	}
	if ids, _ := d2.List(context.Background()); strings.Join(ids, ",") != "kept" {
		t.Fatalf("driver runs %v, want [kept]", ids)
	}
	// An ERROR instance keeps its claim until deleted, as in Nova.
	prov, _ := e.p.Provider(context.Background(), ProviderUUIDForHost("h1"))
	if prov.Usages["VCPU"] != 2 {
		t.Fatalf("usage %d VCPU, want 2 (kept and lost)", prov.Usages["VCPU"])
	}
}

func TestAgentProcessExitSetsError(t *testing.T) {
	e := newAgentEnv(t)
	d, err := NewProcessDriver("h1", ProcessConfig{StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	e.run(t, d, 0)
	e.castCommand(t, "i1", "sleep 1; exit 3")
	// Not a build failure (that would file a retry): the exit after ACTIVE.
	msg := e.waitStatus(t, "i1", etcdschema.StatusError)
	if msg != "instance process on h1 exited with status 3" {
		t.Fatalf("fault %q", msg)
	}
}

// countingDriver wraps the fake driver and records how many spawns ran at
// once.
type countingDriver struct {
	*FakeDriver
	mu       sync.Mutex
	now, max int
}

func (c *countingDriver) Spawn(ctx context.Context, b *etcdschema.Build) error {
	c.mu.Lock()
	c.now++
	c.max = max(c.max, c.now)
	c.mu.Unlock()
	defer func() { c.mu.Lock(); c.now--; c.mu.Unlock() }()
	return c.FakeDriver.Spawn(ctx, b)
}

func TestAgentHonoursMaxConcurrentBuildsAndResetsFailedBuilds(t *testing.T) {
	e := newAgentEnv(t)
	d := &countingDriver{FakeDriver: NewFakeDriver("h1", FakeConfig{BuildTime: 200 * time.Millisecond})}
	ctx := context.Background()
	// Failed builds were counted by the host's agent before it restarted:
	// the record has them when this one registers, and a success resets
	// them (the agent is the count's only writer, so it learns it there).
	svc := etcdschema.Service{Host: "h1", FailedBuilds: 4}
	if _, err := e.cli.Put(ctx, e.keys.Service("h1"), etcdschema.MustEncode(&svc)); err != nil {
		t.Fatal(err)
	}
	a, _ := e.run(t, d, 2)
	a.failedMu.Lock()
	known := a.failedBuilds
	a.failedMu.Unlock()
	if known != 4 {
		t.Fatalf("the agent learnt failed_builds %d at registration, want 4", known)
	}
	var resp *clientv3.GetResponse
	for _, u := range []string{"a", "b", "c", "d", "e"} {
		e.castCommand(t, u, "")
	}
	for _, u := range []string{"a", "b", "c", "d", "e"} {
		e.waitStatus(t, u, etcdschema.StatusActive)
	}
	d.mu.Lock()
	most := d.max
	d.mu.Unlock()
	if most != 2 {
		t.Fatalf("%d builds ran at once, want max_concurrent_builds = 2", most)
	}
	resp, _ = e.cli.Get(ctx, e.keys.Service("h1"))
	svc = etcdschema.Service{}
	if err := json.Unmarshal(resp.Kvs[0].Value, &svc); err != nil || svc.FailedBuilds != 0 {
		t.Fatalf("failed_builds %d after successes, want 0 (%v)", svc.FailedBuilds, err)
	}
}

// A source agent that restarts between its move step (the guest stopped)
// and the destination's finish finds its server ACTIVE here, with no cast
// here, and running nowhere: that is the move's, not a lost guest. It
// neither resumes it (it would run twice once the destination starts it)
// nor sets it ERROR (the move would finish on an errored server).
func TestAgentRestartLeavesAMoveInFlightAlone(t *testing.T) {
	for _, tc := range []struct {
		desc string
		task string
	}{
		{"stopped for the move", etcdschema.TaskResizeMigrated},
		{"being stopped", etcdschema.TaskResizeMigrating},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			e := newAgentEnv(t)
			inst := &etcdschema.Instance{UUID: "i1", Name: "i1", Status: etcdschema.StatusActive, Host: "h1",
				Cell: "cell1", MigrationUUID: "m1", TaskState: tc.task}
			if _, err := e.cli.Put(context.Background(), e.keys.CellInstance("cell1", "i1"), etcdschema.MustEncode(inst)); err != nil {
				t.Fatal(err)
			}
			d := NewFakeDriver("h1", FakeConfig{}) // a GuestResumer: it would bring i1 back
			e.runTracking(t, d, 0, false)
			if ids, _ := d.List(context.Background()); len(ids) != 0 {
				t.Fatalf("driver runs %v after reconciliation, want nothing: the move starts the guest on its destination", ids)
			}
			if st, msg := e.status(t, "i1"); st != etcdschema.StatusActive {
				t.Fatalf("moving server set %s (%s)", st, msg)
			}
		})
	}
}
