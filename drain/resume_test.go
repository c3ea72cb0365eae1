package drain_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/drain"
	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/testwait"
	"github.com/berth-project/berth/leader"
	"github.com/berth-project/berth/scheduler"
	"github.com/berth-project/berth/servers"
)

// crashingMover is the real server operations, except that the move
// numbered crashAt dies after etcd committed it and before the duty can
// record it: the gap a leader killed mid-sweep leaves.
type crashingMover struct {
	*servers.Store
	crashAt int32
	moves   atomic.Int32
	crash   func()
}

func (m *crashingMover) Move(ctx context.Context, id string, r servers.MoveRequest) (*etcdschema.Migration, error) {
	mig, err := m.Store.Move(ctx, id, r)
	if err == nil && m.moves.Add(1) == m.crashAt {
		m.crash()
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return mig, err
}

// TestDrainResumesAfterLeaderChange runs two leader candidates over one
// etcd: a first leader that dies in the middle of the drain, right after
// starting a move it never recorded, and the cloud's own scheduler,
// which takes over and must finish the drain from the record alone,
// adopting that move rather than moving the server twice.
func TestDrainResumesAfterLeaderChange(t *testing.T) {
	var first *leader.Leader
	firstDone := make(chan struct{})
	var mover *crashingMover
	r := newRig(t, rigOptions{hosts: 3, buildTime: 300 * time.Millisecond, before: func(cli *clientv3.Client, keys etcdschema.Keys) {
		ctx, kill := context.WithCancel(context.Background())
		mover = &crashingMover{Store: servers.New(cli, keys, nil, nil), crashAt: 3, crash: kill}
		first = startFirstLeader(t, ctx, kill, cli, keys, mover, firstDone)
	}})
	ids := r.boot("compute-1", 6)
	drainUntilFirstLeaderDies(t, r, first, firstDone)
	mid, err := r.drains.Get(r.ctx, "compute-1")
	if err != nil {
		t.Fatal(err)
	}
	if mid.State != etcdschema.DrainDraining || mid.Counts()[etcdschema.DrainWaiting] < 4 {
		t.Fatalf("when the first leader died the record was %s %v, want draining with the third move unrecorded", mid.State, mid.Counts())
	}
	d := r.waitDrain("compute-1", "drain complete under the new leader", settled)
	if d.State != etcdschema.DrainComplete {
		t.Fatalf("drain ended %s (%s): %+v", d.State, d.Error, d.Instances)
	}
	migs := r.migrationsOf(d)
	for _, id := range ids {
		if m := migs[id]; len(m) != 1 || m[0].Status != etcdschema.MigrationConfirmed {
			t.Errorf("%s: migrations of the drain %+v, want exactly one, confirmed", id, m)
		}
		if h := r.hostOf(id); h == "compute-1" {
			t.Errorf("%s is still on compute-1", id)
		}
	}
	if n := mover.moves.Load(); n != 3 {
		t.Errorf("the first leader started %d moves, want 3", n)
	}
}

// TestDrainCancelledInFailoverAdoptsTheUnrecordedMove: the first leader
// starts a cold move and, before it can record it, the operator cancels
// the drain and the leader dies. The cancel stops new moves, but that
// move is the drain's: the new leader must adopt it, follow it and
// confirm it, not leave its server in VERIFY_RESIZE with no one to
// confirm it; the servers it never moved it marks not moved, once.
func TestDrainCancelledInFailoverAdoptsTheUnrecordedMove(t *testing.T) {
	var first *leader.Leader
	firstDone := make(chan struct{})
	var mover *crashingMover
	var drains atomic.Pointer[drain.Store]
	r := newRig(t, rigOptions{hosts: 3, buildTime: 300 * time.Millisecond, before: func(cli *clientv3.Client, keys etcdschema.Keys) {
		ctx, kill := context.WithCancel(context.Background())
		mover = &crashingMover{Store: servers.New(cli, keys, nil, nil), crashAt: 3, crash: func() {
			// The operator's cancel lands in the failover window.
			if _, err := drains.Load().Cancel(context.Background(), "compute-1"); err != nil {
				t.Errorf("cancel in the failover window: %v", err)
			}
			kill()
		}}
		first = startFirstLeader(t, ctx, kill, cli, keys, mover, firstDone)
	}})
	drains.Store(r.drains)
	ids := r.boot("compute-1", 5)
	drainUntilFirstLeaderDies(t, r, first, firstDone)
	// Settled, and every server it did not move given up (not waiting
	// for a look any more): the new leader has been over it.
	var d *etcdschema.HostDrain
	testwait.Poll(t, time.Minute, "the cancelled drain settled under the new leader", func() (bool, string) {
		var err error
		if d, err = r.drains.Get(r.ctx, "compute-1"); err != nil {
			return false, err.Error()
		}
		done := settled(d)
		why := fmt.Sprintf("%s %v;", d.State, d.Counts())
		for _, s := range d.Instances {
			if s.State != etcdschema.DrainWaiting || s.FinishedAt != nil {
				continue
			}
			done = false
			if v, err := r.servers.Lookup(r.ctx, s.UUID); err == nil && v.Instance != nil {
				why += fmt.Sprintf(" %s waiting, %s/%s on %s;", s.UUID, v.Instance.Status, v.Instance.TaskState, v.Instance.Host)
			}
		}
		return done, why
	})
	if d.State != etcdschema.DrainCancelled {
		t.Fatalf("drain ended %s (%s), want cancelled", d.State, d.Error)
	}
	migs := r.migrationsOf(d)
	moved := 0
	for _, s := range d.Instances {
		m := migs[s.UUID]
		switch s.State {
		case etcdschema.DrainMoved:
			moved++
			if len(m) != 1 || m[0].Status != etcdschema.MigrationConfirmed || r.hostOf(s.UUID) == "compute-1" {
				t.Errorf("%s moved: migrations %+v, on %s; want one confirmed, off compute-1", s.UUID, m, r.hostOf(s.UUID))
			}
		case etcdschema.DrainWaiting:
			if len(m) != 0 || r.hostOf(s.UUID) != "compute-1" || s.Reason == "" {
				t.Errorf("%s not moved (%q): migrations %+v, on %s; want none, on compute-1, with why", s.UUID, s.Reason, m, r.hostOf(s.UUID))
			}
		default:
			t.Errorf("%s is %s (%s) in the settled drain", s.UUID, s.State, s.Reason)
		}
	}
	if moved != 3 || len(d.Instances) != len(ids) {
		t.Errorf("%d of %d servers moved, want the 3 the first leader started: %+v", moved, len(d.Instances), d.Instances)
	}
	for _, id := range ids {
		v, err := r.servers.Lookup(r.ctx, id)
		if err != nil || v.Instance == nil || v.Instance.Status != etcdschema.StatusActive || v.Instance.TaskState != "" {
			t.Errorf("%s after the drain: %+v %v, want ACTIVE with no task", id, v, err)
		}
	}
}

// startFirstLeader runs a leader candidate whose drain duty moves with
// mover, waits until it leads, and returns it; firstDone closes when it
// stops (kill, or its crash).
func startFirstLeader(t *testing.T, ctx context.Context, kill func(), cli *clientv3.Client, keys etcdschema.Keys,
	mover drain.Mover, firstDone chan struct{}) *leader.Leader {
	t.Helper()
	first := leader.New(leader.Config{Client: cli, Keys: keys, Election: scheduler.Role, ID: "first-leader",
		TTL: 2 * time.Second, Log: hclog.NewNullLogger(),
		Duties: []leader.Duty{drain.Duty(drain.DutyConfig{Client: cli, Keys: keys, Servers: mover,
			Interval: 200 * time.Millisecond})}})
	go func() {
		defer close(firstDone)
		_ = first.Run(ctx)
	}()
	t.Cleanup(func() { kill(); <-firstDone })
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, ok := first.Fence(); ok {
			return first
		}
		if time.Now().After(deadline) {
			t.Fatal("the first candidate did not win the election")
		}
		select {
		case <-first.Changed():
		case <-time.After(time.Second):
		}
	}
}

// drainUntilFirstLeaderDies starts compute-1's drain under the first
// leader and returns when that leader has died at its crashing move.
func drainUntilFirstLeaderDies(t *testing.T, r *rig, first *leader.Leader, firstDone <-chan struct{}) {
	t.Helper()
	if _, ok := first.Fence(); !ok {
		t.Fatal("the first candidate lost the lead before the drain")
	}
	if _, err := r.drains.Start(r.ctx, "compute-1", drain.Request{Parallel: 2}, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	select {
	case <-firstDone:
	case <-time.After(time.Minute):
		t.Fatal("the first leader never reached its third move")
	}
}
