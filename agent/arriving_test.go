package agent

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/etcdschema/records"
	"github.com/berth-project/berth/internal/testwait"
	"github.com/berth-project/berth/placement"
)

// putMigration writes a migration of uuid from source to dest.
func (r *evacRig) putMigration(mig, uuid, kind, status, source, dest string) {
	r.t.Helper()
	m := &etcdschema.Migration{UUID: mig, InstanceUUID: uuid, Cell: "cell1", MigrationType: kind, Status: status,
		SourceHost: source, SourceNode: source, DestHost: dest, DestNode: dest, CreatedAt: time.Now().UTC()}
	if _, err := r.cli.Put(context.Background(), r.keys.Migration("cell1", mig), etcdschema.MustEncode(m)); err != nil {
		r.t.Fatal(err)
	}
}

// guestElsewhere records uuid on host (naming migration mig, "" for
// none) while h1's driver runs a guest for it, and no cast for it is on
// h1: what a destination finds when it restarts after a live
// migration's live_start.
func (r *evacRig) guestElsewhere(uuid, host, mig string) {
	r.t.Helper()
	task := ""
	if mig != "" {
		task = etcdschema.TaskMigrating
	}
	in := &etcdschema.Instance{UUID: uuid, Name: uuid, Status: etcdschema.StatusActive, TaskState: task, Host: host,
		Cell: "cell1", MigrationUUID: mig, Flavor: etcdschema.Flavor{ID: "1", Name: "m1.tiny", VCPUs: 1}}
	if _, err := r.cli.Put(context.Background(), r.keys.CellInstance("cell1", uuid), etcdschema.MustEncode(in)); err != nil {
		r.t.Fatal(err)
	}
	if err := r.drv.Resume(context.Background(), &etcdschema.Build{InstanceUUID: uuid}); err != nil {
		r.t.Fatal(err)
	}
}

// TestAgentRestartKeepsTheGuestOfAServerMovingHere: a destination agent
// that restarts during a move finds guests etcd places elsewhere with no
// cast here. Those of a server whose migration is in flight to this
// host are the move's (live_out completes onto them, a rollback cast
// here destroys them) and stay; a stale copy goes: a migration in a
// final state, a server whose record names another migration, a
// deleted server.
func TestAgentRestartKeepsTheGuestOfAServerMovingHere(t *testing.T) {
	r := newEvacRig(t)
	_, stop := r.start() // registers h1
	stop()

	live, resize := etcdschema.MigrationTypeLiveMigration, etcdschema.MigrationTypeResize
	cases := []struct {
		desc, uuid string
		write      func(uuid string)
		keep       bool
	}{
		{"live migration to h1 running (live_out on the source)", "live-running", func(u string) {
			r.putMigration("m-"+u, u, live, etcdschema.MigrationRunning, "h2", "h1")
			r.guestElsewhere(u, "h2", "m-"+u)
		}, true},
		{"cold migration to h1 in flight", "cold-inflight", func(u string) {
			r.putMigration("m-"+u, u, etcdschema.MigrationTypeMigration, etcdschema.MigrationPostMigrating, "h2", "h1")
			r.guestElsewhere(u, "h2", "m-"+u)
		}, true},
		{"live migration to h1 rolled back", "live-failed", func(u string) {
			r.putMigration("m-"+u, u, live, etcdschema.MigrationFailed, "h2", "h1")
			r.guestElsewhere(u, "h2", "")
		}, false},
		{"a failed live migration the record still names", "live-failed-named", func(u string) {
			r.putMigration("m-"+u, u, live, etcdschema.MigrationFailed, "h2", "h1")
			r.guestElsewhere(u, "h2", "m-"+u)
		}, false},
		{"reverted resize", "reverted", func(u string) {
			r.putMigration("m-"+u, u, resize, etcdschema.MigrationReverted, "h2", "h1")
			r.guestElsewhere(u, "h2", "")
		}, false},
		{"server moving to another host", "elsewhere", func(u string) {
			r.putMigration("m-old-"+u, u, live, etcdschema.MigrationRunning, "h2", "h1") // stale record
			r.putMigration("m-"+u, u, live, etcdschema.MigrationRunning, "h2", "h3")
			r.guestElsewhere(u, "h2", "m-"+u)
		}, false},
		{"server deleted during its move", "deleted", func(u string) {
			r.putMigration("m-"+u, u, live, etcdschema.MigrationRunning, "h2", "h1")
			if err := r.drv.Resume(context.Background(), &etcdschema.Build{InstanceUUID: u}); err != nil {
				t.Fatal(err)
			}
		}, false},
	}
	for _, tc := range cases {
		tc.write(tc.uuid)
	}
	r.start()
	for _, tc := range cases {
		if got := r.runs(tc.uuid); got != tc.keep {
			t.Errorf("%s: guest runs after the restart: %v, want %v", tc.desc, got, tc.keep)
		}
	}
}

// TestAgentKeepsAnEvacuatedServerMovingBack: a server evacuated from h1
// (its evacuation done, not yet cleaned up here) is live-migrating back
// to h1 when h1's agent starts, or gets its lease back: the guest h1 runs
// is the migration's, not the stale copy, and stays; the old evacuation
// still ends completed.
func TestAgentKeepsAnEvacuatedServerMovingBack(t *testing.T) {
	for _, when := range []string{"agent start", "lease granted again"} {
		t.Run(when, func(t *testing.T) {
			r := newEvacRig(t)
			a, stop := r.start()
			if when == "agent start" {
				stop()
			}
			r.evacuation("mig-evac", "back", etcdschema.MigrationDone)
			r.putMigration("mig-live", "back", etcdschema.MigrationTypeLiveMigration, etcdschema.MigrationRunning, "h2", "h1")
			r.guestElsewhere("back", "h2", "mig-live")
			// A server evacuated from h1 and staying away loses its copy.
			r.evacuation("mig-gone", "gone", etcdschema.MigrationDone)
			r.guestElsewhere("gone", "h2", "")

			if when == "agent start" {
				r.start()
			} else {
				regrantLease(t, r, a)
			}
			testwait.Poll(t, 10*time.Second, "both old evacuations completed", func() (bool, string) {
				for _, m := range []string{"mig-evac", "mig-gone"} {
					if st := r.migration(m).Status; st != etcdschema.MigrationCompleted {
						return false, m + " " + st
					}
				}
				return true, ""
			})
			if !r.runs("back") {
				t.Error("the guest of the server moving back to h1 was destroyed")
			}
			if r.runs("gone") {
				t.Error("the stale copy of the evacuated server still runs")
			}
		})
	}
}

// regrantLease makes a's liveness lease lost and renewed, as when the
// host was cut off long enough to read down.
func regrantLease(t *testing.T, r *evacRig, a *Agent) {
	t.Helper()
	ctx := context.Background()
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
}

// TestDestinationRestartDuringLiveMigration: a real live migration,
// h2 to h1, with each driver. h1 starts the guest (live_start) and
// casts live_out to h2, whose agent is down; h1's agent restarts before
// h2 hands over (the process driver's next agent adopts the process;
// the fake one's guests outlive the agent here, as a hypervisor's do).
// The guest on h1 survives the restart's reconciliation, so when h2
// comes back and completes the move, the server runs on h1 and nowhere
// else.
func TestDestinationRestartDuringLiveMigration(t *testing.T) {
	for _, driver := range []string{"fake", "process"} {
		t.Run(driver, func(t *testing.T) { destinationRestartDuringLiveMigration(t, driver) })
	}
}

func destinationRestartDuringLiveMigration(t *testing.T, driver string) {
	e := newAgentEnv(t)
	dir := t.TempDir()
	fakes := map[string]*FakeDriver{}
	newDriver := func(host string) Driver {
		if driver == "fake" {
			if fakes[host] == nil {
				fakes[host] = NewFakeDriver(host, FakeConfig{})
			}
			return fakes[host]
		}
		d, err := NewProcessDriver(host, ProcessConfig{StateDir: dir, StopGrace: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	ctx := context.Background()
	runs := func(d Driver) bool {
		ids, err := d.List(ctx)
		return err == nil && slices.Contains(ids, "i1")
	}
	runHost := func(host string, d Driver) func() {
		t.Helper()
		rctx, cancel := context.WithCancel(ctx)
		a, err := New(Config{Host: host, Cell: "cell1", ReportInterval: time.Second, TrackInstanceChanges: true,
			Inventory: Inventory{VCPUs: 8, MemoryMB: 4096, DiskGB: 10}}, e.cli, e.keys, e.p, d, hclog.NewNullLogger())
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { _ = a.Run(rctx); close(done) }()
		stopped := false
		stop := func() {
			if !stopped {
				stopped = true
				cancel()
				<-done
			}
		}
		t.Cleanup(stop)
		if err := a.WaitSynced(rctx); err != nil {
			t.Fatal(err)
		}
		return stop
	}
	const uuid = "i1"
	f := etcdschema.Flavor{ID: "p", Name: "proc", VCPUs: 1, ExtraSpecs: map[string]string{CommandExtraSpec: "sleep 60"}}

	// h2 runs the server; its agent registers it and stops.
	src := newDriver("h2")
	t.Cleanup(func() { _ = src.Destroy(ctx, uuid) })
	if err := src.Spawn(ctx, &etcdschema.Build{InstanceUUID: uuid, Name: uuid, Flavor: f}); err != nil {
		t.Fatal(err)
	}
	in := &etcdschema.Instance{UUID: uuid, Name: uuid, Status: etcdschema.StatusActive, Host: "h2", Node: "h2",
		Cell: "cell1", Flavor: f}
	if _, err := e.cli.Put(ctx, e.keys.CellInstance("cell1", uuid), etcdschema.MustEncode(in)); err != nil {
		t.Fatal(err)
	}
	runHost("h2", src)()
	dst := newDriver("h1")
	stopDst := runHost("h1", dst)
	t.Cleanup(func() { _ = dst.Destroy(ctx, uuid) })

	// What the superconductor's hand-off and h1's pre-check leave: the
	// source held by the migration, h1 claimed by the instance, the
	// migration running, live_start cast to h1.
	alloc := func(consumer, host string) {
		if err := e.p.PutAllocations(ctx, consumer, placement.AllocationWrite{ProjectID: "p", UserID: "u",
			Allocations: map[string]placement.ProviderAllocation{ProviderUUIDForHost(host): {Resources: map[string]int64{"VCPU": 1}}}}); err != nil {
			t.Fatal(err)
		}
	}
	alloc("m1", "h2")
	alloc(uuid, "h1")
	mig := &etcdschema.Migration{UUID: "m1", InstanceUUID: uuid, Cell: "cell1", MigrationType: etcdschema.MigrationTypeLiveMigration,
		Status: etcdschema.MigrationRunning, SourceHost: "h2", SourceNode: "h2", DestHost: "h1", DestNode: "h1",
		OldFlavor: f, NewFlavor: f, CreatedAt: time.Now().UTC()}
	in.TaskState, in.MigrationUUID = etcdschema.TaskMigrating, "m1"
	if _, err := e.cli.Txn(ctx).Then(
		clientv3.OpPut(e.keys.CellInstance("cell1", uuid), etcdschema.MustEncode(in)),
		clientv3.OpPut(e.keys.Migration("cell1", "m1"), etcdschema.MustEncode(mig)),
		clientv3.OpPut(e.keys.Build("h1", uuid), etcdschema.MustEncode(
			records.MoveCast(in, mig, etcdschema.LiveStart, "", time.Now().UTC())))).Commit(); err != nil {
		t.Fatal(err)
	}
	testwait.Poll(t, testwait.Timeout, "live_out cast to h2", func() (bool, string) {
		resp, err := e.cli.Get(ctx, e.keys.Build("h2", uuid), clientv3.WithCountOnly())
		return err == nil && resp.Count == 1, fmt.Sprint(err)
	})
	pid := 0
	if pd, ok := dst.(*ProcessDriver); ok {
		pid = pidOf(t, pd, uuid)
	}
	alive := func() bool { return runs(dst) && (pid == 0 || groupAlive(pid)) }

	stopDst()
	dst = newDriver("h1") // the process driver adopts the process
	runHost("h1", dst)
	if !alive() {
		t.Fatal("h1's restart destroyed the guest of the server migrating to it")
	}

	src = newDriver("h2") // the process driver adopts the source's process
	runHost("h2", src)
	testwait.Poll(t, testwait.Timeout, "the live migration completed", func() (bool, string) {
		got := instance(t, e.cli, e.keys, uuid)
		return got.Host == "h1" && got.MigrationUUID == "", got.Host + "/" + got.TaskState
	})
	if !alive() {
		t.Error("the server's guest on h1 is gone after the move completed")
	}
	if runs(src) {
		t.Error("h2 still runs the server after handing it over")
	}
}
