package conductor

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/internal/metrics"
)

// rankedQueue is a holder on /q/ with affinity on and the given ranking.
func rankedQueue(cli *clientv3.Client, holder string, workers int, grace, idle time.Duration, process ProcessFunc) *Queue {
	return NewQueue(QueueConfig{Client: cli, ItemPrefix: "/q/items/", LeasePrefix: "/q/leases/",
		LeaseKey: func(id string) string { return "/q/leases/" + id }, Holder: holder,
		LeaseTTL: 60 * time.Second, Workers: workers, Process: process, Log: hclog.NewNullLogger(),
		HolderPrefix: "/q/holders/", HolderKey: func(id string) string { return "/q/holders/" + id },
		Grace: grace, IdleAfter: idle, Name: metrics.QueueBuildRequests, Metrics: metrics.New()})
}

// firstRanked is which of holders ranks first for id.
func firstRanked(id string, holders []string) string {
	best := ""
	for _, h := range holders {
		if best == "" || hrw(id, h) > hrw(id, best) || (hrw(id, h) == hrw(id, best) && h < best) {
			best = h
		}
	}
	return best
}

// TestQueueHonoursCustomGrace: with a grace of 1.2 s (not the default
// 250 ms), the items a dead but still registered holder ranks first for
// are tried by the live one no sooner than the grace after they appear,
// while its own go at once. The lower bound cannot flake: the queue
// offers such an item only when its grace is over.
func TestQueueHonoursCustomGrace(t *testing.T) {
	_, cli := etcdtest.NetClient(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const grace = 1200 * time.Millisecond
	deadCtx, die := context.WithCancel(ctx)
	dead := rankedQueue(cli, "dead", 4, grace, grace, func(ctx context.Context, it Item) error {
		return fmt.Errorf("the dead holder worked %s", it.ID)
	})
	type doneAt struct {
		id string
		at time.Time
	}
	done := make(chan doneAt, 100)
	var live *Queue
	live = rankedQueue(cli, "live", 4, grace, grace, func(ctx context.Context, it Item) error {
		if err := finish(live, cli)(ctx, it); err != nil {
			return err
		}
		done <- doneAt{it.ID, time.Now()}
		return nil
	})
	deadStopped := make(chan struct{})
	go func() { _ = dead.Run(deadCtx); close(deadStopped) }()
	runSynced(t, ctx, live)
	if err := dead.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	waitHolders(t, 2, dead, live)
	deadID, err := dead.LeaseID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Die without revoking: the registration stays for the TTL (60 s).
	dead.sessMu.Lock()
	dead.session.Orphan()
	dead.session = nil
	dead.sessMu.Unlock()
	die()
	<-deadStopped

	live.mu.Lock()
	holders := append([]string(nil), live.holders...)
	live.mu.Unlock()
	deadHex := strconv.FormatInt(int64(deadID), 16)
	const n = 40
	deadFirst := map[string]bool{}
	var ops []clientv3.Op
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("%03d", i)
		if firstRanked(id, holders) == deadHex {
			deadFirst[id] = true
		}
		ops = append(ops, clientv3.OpPut("/q/items/"+id, "x"))
	}
	if len(deadFirst) == 0 || len(deadFirst) == n {
		t.Fatalf("the dead holder ranks first for %d of %d items; the test proves nothing", len(deadFirst), n)
	}
	if _, err := cli.Txn(ctx).Then(ops...).Commit(); err != nil {
		t.Fatal(err)
	}
	start := time.Now() // after the commit: a lower bound measured from here holds
	var ownSlowest, deadFastest time.Duration
	deadFastest = time.Hour
	timeout := time.After(30 * time.Second)
	for i := 0; i < n; i++ {
		select {
		case d := <-done:
			took := d.at.Sub(start)
			if deadFirst[d.id] {
				deadFastest = min(deadFastest, took)
			} else {
				ownSlowest = max(ownSlowest, took)
			}
		case <-timeout:
			t.Fatalf("only %d of %d items done in 30 s", i, n)
		}
	}
	t.Logf("own items done within %v; the dead holder's from %v (grace %v)", ownSlowest, deadFastest, grace)
	// The commit returned after etcd applied it, and the live holder's
	// watch can only have seen the items after that: its grace started
	// no earlier than start minus the commit's round trip, a few ms.
	if deadFastest < grace-50*time.Millisecond {
		t.Errorf("a dead holder's item was done %v after it appeared, before the %v grace", deadFastest, grace)
	}
}

// TestQueueHonoursCustomIdleWindow: a live holder whose one worker is
// stuck on an item it leased keeps its other items for the idle window
// (3 s here, against a grace of 100 ms) after its last lease, then the
// other holder takes them; no lease transaction is lost either way.
func TestQueueHonoursCustomIdleWindow(t *testing.T) {
	_, cli := etcdtest.NetClient(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const grace, idle = 100 * time.Millisecond, 3 * time.Second
	stuckAt := make(chan time.Time, 1)
	stuck := rankedQueue(cli, "stuck", 1, grace, idle, func(ctx context.Context, it Item) error {
		stuckAt <- time.Now()
		<-ctx.Done() // every worker busy: no further lease
		return ctx.Err()
	})
	type doneAt struct {
		id string
		at time.Time
	}
	done := make(chan doneAt, 100)
	var other *Queue
	other = rankedQueue(cli, "other", 4, grace, idle, func(ctx context.Context, it Item) error {
		if err := finish(other, cli)(ctx, it); err != nil {
			return err
		}
		done <- doneAt{it.ID, time.Now()}
		return nil
	})
	runSynced(t, ctx, stuck, other)
	waitHolders(t, 2, stuck, other)
	stuck.mu.Lock()
	stuckHex, holders := stuck.self, append([]string(nil), stuck.holders...)
	stuck.mu.Unlock()
	const n = 30
	stuckFirst := 0
	var ops []clientv3.Op
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("%03d", i)
		if firstRanked(id, holders) == stuckHex {
			stuckFirst++
		}
		ops = append(ops, clientv3.OpPut("/q/items/"+id, "x"))
	}
	if stuckFirst < 2 {
		t.Fatalf("the stuck holder ranks first for %d items; the test needs two (one to hold, one to wait)", stuckFirst)
	}
	if _, err := cli.Txn(ctx).Then(ops...).Commit(); err != nil {
		t.Fatal(err)
	}
	var leasedAt time.Time
	select {
	case leasedAt = <-stuckAt:
	case <-time.After(20 * time.Second):
		t.Fatal("the stuck holder leased none of its items")
	}
	// Everything but the item the stuck holder sits on is done by the
	// other; its share only once the idle window after that lease is over.
	var lastOwn, firstTaken time.Time
	timeout := time.After(30 * time.Second)
	for i := 0; i < n-1; i++ {
		select {
		case d := <-done:
			if firstRanked(d.id, holders) == stuckHex {
				if firstTaken.IsZero() || d.at.Before(firstTaken) {
					firstTaken = d.at
				}
			} else if d.at.After(lastOwn) {
				lastOwn = d.at
			}
		case <-timeout:
			t.Fatalf("only %d of %d items done in 30 s", i, n-1)
		}
	}
	wait := firstTaken.Sub(leasedAt)
	t.Logf("stuck holder leased at +0; the other's own items done by %v, the stuck one's from %v (idle window %v)",
		lastOwn.Sub(leasedAt), wait, idle)
	// The other holder's watch saw the lease after it was committed, and
	// the commit came before the stuck holder's process was called: the
	// window started no earlier than leasedAt minus that call's few ms.
	if wait < idle-100*time.Millisecond {
		t.Errorf("the stuck holder's items were taken %v after its last lease, within the %v idle window", wait, idle)
	}
	c := countsOf(stuck, other)
	if c.lost != 0 || c.errors != 0 {
		t.Errorf("%.0f lease transactions lost, %.0f errors; want none", c.lost, c.errors)
	}
}
