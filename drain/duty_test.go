package drain_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/drain"
	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/hosts"
)

// inFlightWatch follows the migrations of cell1 and records the most
// moves of one request in flight at any revision: the parallelism a
// drain really had, seen from the migrations rather than from its own
// record.
type inFlightWatch struct {
	mu      sync.Mutex
	status  map[string]string
	maxSeen int
}

func (r *rig) watchInFlight(requestID string) *inFlightWatch {
	w := &inFlightWatch{status: map[string]string{}}
	ctx, cancel := context.WithCancel(r.ctx)
	r.t.Cleanup(cancel)
	wch := r.cli.Watch(ctx, r.keys.Migrations("cell1"), clientv3.WithPrefix())
	go func() {
		for wr := range wch {
			w.mu.Lock()
			for _, ev := range wr.Events {
				var m etcdschema.Migration
				if ev.Kv.Value == nil || etcdschema.Decode(string(ev.Kv.Key), ev.Kv.Value, &m) != nil || m.RequestID != requestID {
					continue
				}
				w.status[m.UUID] = m.Status
			}
			n := 0
			for _, st := range w.status {
				if etcdschema.MigrationInFlight(st) {
					n++
				}
			}
			w.maxSeen = max(w.maxSeen, n)
			w.mu.Unlock()
		}
	}()
	return w
}

func (w *inFlightWatch) max() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.maxSeen
}

func TestDrainMovesEveryServerWithBoundedParallelism(t *testing.T) {
	r := newRig(t, rigOptions{hosts: 3, buildTime: 300 * time.Millisecond})
	ids := r.boot("compute-1", 6)
	const req = "req-drain-parallel"
	seen := r.watchInFlight(req)
	st, err := r.drains.Start(r.ctx, "compute-1", drain.Request{Parallel: 2, RequestID: req}, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Drain.Instances) != 6 || st.Drain.State != etcdschema.DrainDraining {
		t.Fatalf("started drain: %+v", st.Drain)
	}
	svc, _, err := r.hosts.Read(r.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if h := svc["compute-1"]; !h.Service.Disabled || h.Service.DisabledReason != drain.DisabledReason {
		t.Errorf("compute-1 after the drain started: disabled=%v reason=%q", h.Service.Disabled, h.Service.DisabledReason)
	}
	d := r.waitDrain("compute-1", "drain complete", settled)
	if d.State != etcdschema.DrainComplete {
		t.Fatalf("drain ended %s (%s): %+v", d.State, d.Error, d.Instances)
	}
	if got := seen.max(); got != 2 {
		t.Errorf("at most %d moves were in flight at once, want exactly the parallelism 2", got)
	}
	migs := r.migrationsOf(d)
	for _, id := range ids {
		if h := r.hostOf(id); h == "compute-1" {
			t.Errorf("%s is still on compute-1", id)
		}
		if m := migs[id]; len(m) != 1 || m[0].Status != etcdschema.MigrationConfirmed {
			t.Errorf("%s: migrations of the drain %+v, want one confirmed", id, m)
		}
	}
	for _, s := range d.Instances {
		if s.State != etcdschema.DrainMoved || s.DestHost == "" || s.DestHost == "compute-1" || s.MigrationUUID == "" {
			t.Errorf("server in the record: %+v", s)
		}
	}
	// The host stays disabled, and a second drain of it may start.
	if _, err := r.drains.Start(r.ctx, "compute-1", drain.Request{}, 5*time.Second); err != nil {
		t.Fatalf("drain an empty host again: %v", err)
	}
	again := r.waitDrain("compute-1", "empty drain complete", settled)
	if again.State != etcdschema.DrainComplete || len(again.Instances) != 0 {
		t.Errorf("draining an empty host: %+v", again)
	}
}

func TestDrainReportsServersThatCannotMove(t *testing.T) {
	r := newRig(t, rigOptions{hosts: 2})
	ids := r.boot("compute-1", 2)
	// The only other host disabled: every move finds no valid host.
	off := true
	if _, err := r.hosts.Update(r.ctx, "compute-2", hosts.Change{Disabled: &off}, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := r.drains.Start(r.ctx, "compute-1", drain.Request{}, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	d := r.waitDrain("compute-1", "drain ended", settled)
	if d.State != etcdschema.DrainIncomplete || !strings.Contains(d.Error, "2 servers could not move") {
		t.Fatalf("drain: %s %q", d.State, d.Error)
	}
	for _, s := range d.Instances {
		if s.State != etcdschema.DrainFailed || !strings.Contains(s.Reason, "No valid host") || s.MigrationUUID == "" {
			t.Errorf("server in the record: %+v, want failed with the migration's no-valid-host reason", s)
		}
	}
	for _, id := range ids {
		if h := r.hostOf(id); h != "compute-1" {
			t.Errorf("%s is on %q, want still on compute-1", id, h)
		}
	}
}

func TestDrainDeadlineEndsIncompleteAndFinishesMovesInFlight(t *testing.T) {
	r := newRig(t, rigOptions{hosts: 2, buildTime: 700 * time.Millisecond})
	r.boot("compute-1", 4)
	if _, err := r.drains.Start(r.ctx, "compute-1", drain.Request{Parallel: 1, Deadline: time.Second}, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	d := r.waitDrain("compute-1", "drain past its deadline", func(d *etcdschema.HostDrain) bool {
		return etcdschema.DrainFinal(d.State)
	})
	if d.State != etcdschema.DrainIncomplete || !strings.Contains(d.Error, "deadline") {
		t.Fatalf("drain: %s %q", d.State, d.Error)
	}
	if late := d.FinishedAt.Sub(*d.Deadline); late < 0 || late > 5*time.Second {
		t.Errorf("the drain ended %s after its deadline, want at it (not at the next 30 s interval)", late)
	}
	// The move in flight at the deadline is still confirmed; nothing new
	// started.
	d = r.waitDrain("compute-1", "moves in flight finished", settled)
	c := d.Counts()
	if c[etcdschema.DrainWaiting] == 0 || c[etcdschema.DrainMoved] == 0 || c[etcdschema.DrainMoved]+c[etcdschema.DrainWaiting] != 4 {
		t.Errorf("counts after the deadline: %v, want some moved and the rest waiting", c)
	}
	for id, ms := range r.migrationsOf(d) {
		for _, m := range ms {
			if m.Status != etcdschema.MigrationConfirmed {
				t.Errorf("%s: migration %s left %s", id, m.UUID, m.Status)
			}
		}
	}
}

func TestDrainCancelStopsStartingMoves(t *testing.T) {
	r := newRig(t, rigOptions{hosts: 2, buildTime: 500 * time.Millisecond})
	r.boot("compute-1", 3)
	if _, err := r.drains.Start(r.ctx, "compute-1", drain.Request{Parallel: 1}, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	r.waitDrain("compute-1", "a move started", func(d *etcdschema.HostDrain) bool {
		return d.Counts()[etcdschema.DrainMoving] == 1
	})
	d, err := r.drains.Cancel(r.ctx, "compute-1")
	if err != nil || d.State != etcdschema.DrainCancelled {
		t.Fatalf("cancel: %+v %v", d, err)
	}
	if _, err := r.drains.Cancel(r.ctx, "compute-1"); err != drain.ErrNotDraining {
		t.Errorf("second cancel: %v, want ErrNotDraining", err)
	}
	d = r.waitDrain("compute-1", "the move in flight finished", settled)
	c := d.Counts()
	if d.State != etcdschema.DrainCancelled || c[etcdschema.DrainMoved] < 1 || c[etcdschema.DrainWaiting] < 1 ||
		c[etcdschema.DrainMoved]+c[etcdschema.DrainWaiting] != 3 {
		t.Errorf("after cancel: %s %v", d.State, c)
	}
	for id, ms := range r.migrationsOf(d) {
		for _, m := range ms {
			if m.Status != etcdschema.MigrationConfirmed {
				t.Errorf("%s: migration %s left %s", id, m.UUID, m.Status)
			}
		}
	}
}

// TestDrainLive: a store without live migration refuses a live drain
// (a build that cannot do them); the stack's leader duty, which has
// servers.Store.LiveMigrate, moves every server off the host by live
// migrations, which complete rather than wait for a confirm.
func TestDrainLive(t *testing.T) {
	r := newRig(t, rigOptions{hosts: 2})
	if _, err := r.drains.Start(r.ctx, "compute-1", drain.Request{Live: true}, 5*time.Second); err != drain.ErrLiveUnavailable {
		t.Fatalf("live drain through a store without live migration: %v", err)
	}
	ids := r.boot("compute-1", 2)
	live := drain.NewStore(r.cli, r.keys, r.hosts, nil)
	live.SetLiveMigrator(drain.ServersLive(r.servers))
	if _, err := live.Start(r.ctx, "compute-1", drain.Request{Live: true}, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	d := r.waitDrain("compute-1", "live drain complete", settled)
	if d.State != etcdschema.DrainComplete {
		t.Fatalf("live drain ended %s (%s): %+v", d.State, d.Error, d.Instances)
	}
	migs := r.migrationsOf(d)
	for _, id := range ids {
		if m := migs[id]; len(m) != 1 || m[0].MigrationType != etcdschema.MigrationTypeLiveMigration ||
			m[0].Status != etcdschema.MigrationCompleted {
			t.Errorf("%s: migrations of the drain %+v, want one live migration, completed", id, m)
		}
		if h := r.hostOf(id); h != "compute-2" {
			t.Errorf("%s is on %q after the live drain, want compute-2", id, h)
		}
	}
}

func TestStartValidates(t *testing.T) {
	for _, tc := range []struct {
		desc string
		req  drain.Request
		want string
	}{
		{"parallel too high", drain.Request{Parallel: drain.MaxParallel + 1}, "'parallel' must be between 1 and 64"},
		{"parallel negative", drain.Request{Parallel: -1}, "'parallel' must be between"},
		{"deadline negative", drain.Request{Deadline: -time.Second}, "'deadline' must not be negative"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			err := tc.req.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate() = %v, want %q", err, tc.want)
			}
		})
	}
	if err := (&drain.Request{Parallel: 4, Deadline: time.Minute}).Validate(); err != nil {
		t.Errorf("a good request: %v", err)
	}
}
