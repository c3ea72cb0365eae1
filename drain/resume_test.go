package drain_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/drain"
	"github.com/berth-project/berth/etcdschema"
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
		first = leader.New(leader.Config{Client: cli, Keys: keys, Election: scheduler.Role, ID: "first-leader",
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
				return
			}
			if time.Now().After(deadline) {
				t.Fatal("the first candidate did not win the election")
			}
			select {
			case <-first.Changed():
			case <-time.After(time.Second):
			}
		}
	}})
	ids := r.boot("compute-1", 6)
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
