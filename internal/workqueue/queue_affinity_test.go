package workqueue

import (
	"context"
	"fmt"
	"iter"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/internal/metrics"
	"github.com/berth-project/berth/internal/rendezvous"
	"github.com/berth-project/berth/internal/testwait"
)

// affinityQueue is testQueue registering its holder under /q/holders/
// (affinity on, with stealing after configs' default 2 s) or not, with
// its own metrics.
func affinityQueue(cli *clientv3.Client, holder string, affinity bool, ttl time.Duration, process ProcessFunc) *Queue {
	c := testQueueConfig(cli, holder, process)
	c.LeaseTTL, c.Workers = ttl, 8
	c.Name, c.Metrics = metrics.QueueBuildRequests, metrics.New()
	if affinity {
		registerUnderQ(&c)
		c.StealAfter = 2 * time.Second
	}
	return New(c)
}

type leaseCounts struct {
	won, lost, skipped, errors float64
	fallbackWon, stolenWon     float64
	lostBy                     map[string]float64 // lost by turn
}

func countsOf(qs ...*Queue) leaseCounts {
	c := leaseCounts{lostBy: map[string]float64{}}
	for _, q := range qs {
		for turn, o := range q.metrics.QueueLeaseCounts(metrics.QueueBuildRequests) {
			c.lostBy[turn] += o[metrics.LeaseLost]
			c.won += o[metrics.LeaseWon]
			c.lost += o[metrics.LeaseLost]
			c.skipped += o[metrics.LeaseSkipped]
			c.errors += o[metrics.LeaseError]
			switch turn {
			case metrics.TurnFallback:
				c.fallbackWon += o[metrics.LeaseWon]
			case metrics.TurnStolen:
				c.stolenWon += o[metrics.LeaseWon]
			}
		}
	}
	return c
}

// waitHolders waits until every queue sees n registered holders.
func waitHolders(t *testing.T, n int, qs ...*Queue) {
	t.Helper()
	testwait.Poll(t, 20*time.Second, fmt.Sprintf("every queue to see %d holders", n), func() (bool, string) {
		for _, q := range qs {
			q.mu.Lock()
			got := len(q.holders)
			q.mu.Unlock()
			if got != n {
				return false, fmt.Sprintf("queue %s sees %d", q.holder, got)
			}
		}
		return true, ""
	})
}

// runBurst starts three queues on one prefix, puts n items in batches of
// 50 and waits until each is worked; it checks each was worked exactly
// once and returns the queues' lease counts and how many each worked.
func runBurst(t *testing.T, affinity bool, n int) (leaseCounts, map[string]int) {
	_, cli := etcdtest.NetClient(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	seen := map[string]int{}
	by := map[string]int{}
	done := make(chan struct{}, n)
	var queues []*Queue
	for _, h := range []string{"a", "b", "c"} {
		var q *Queue
		q = affinityQueue(cli, h, affinity, 10*time.Second, func(ctx context.Context, it Item) error {
			mu.Lock()
			seen[it.ID]++
			by[q.holder]++
			mu.Unlock()
			if err := finish(q, cli)(ctx, it); err != nil {
				return err
			}
			done <- struct{}{}
			return nil
		})
		queues = append(queues, q)
	}
	runSynced(t, ctx, queues...)
	if affinity {
		waitHolders(t, 3, queues...)
	}
	for i := 0; i < n; i += 50 {
		var ops []clientv3.Op
		for j := i; j < min(i+50, n); j++ {
			ops = append(ops, clientv3.OpPut(fmt.Sprintf("/q/items/%05d", j), "x"))
		}
		if _, err := cli.Txn(ctx).Then(ops...).Commit(); err != nil {
			t.Fatal(err)
		}
	}
	timeout := time.After(60 * time.Second)
	for i := 0; i < n; i++ {
		select {
		case <-done:
		case <-timeout:
			t.Fatalf("only %d of %d items done", i, n)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for id, c := range seen {
		if c != 1 {
			t.Errorf("item %s worked %d times", id, c)
		}
	}
	if len(seen) != n {
		t.Errorf("%d distinct items worked, want %d", len(seen), n)
	}
	return countsOf(queues...), by
}

// TestQueueHoldersDoNotRaceForEachItem: three holders on one prefix
// register and rank each item by rendezvous hashing, so an item is tried
// by one holder, not raced by all three. Without affinity (every holder
// tries every item at once) most items cost losing lease transactions
// besides the winning one; with it, nearly none do, and the work is still
// spread over the three.
func TestQueueHoldersDoNotRaceForEachItem(t *testing.T) {
	const n = 600
	without, _ := runBurst(t, false, n)
	with, by := runBurst(t, true, n)
	t.Logf("without affinity: won %.0f lost %.0f skipped %.0f; with: won %.0f lost %.0f %v skipped %.0f (fallback won %.0f, stolen %.0f); worked by %v",
		without.won, without.lost, without.skipped, with.won, with.lost, with.lostBy, with.skipped, with.fallbackWon, with.stolenWon, by)
	if with.won != n || with.errors != 0 {
		t.Errorf("with affinity: %.0f leases won, %.0f errors; want %d and 0", with.won, with.errors, n)
	}
	// Without affinity about two of three holders lose each item. With
	// it some losses remain legitimate: in a burst a holder's backlog can
	// outlast the grace, and then the next-ranked holder works its items
	// too, racing it for some.
	if with.lost*10 > without.lost || with.lost > n/20 {
		t.Errorf("with affinity %.0f lease transactions lost for %d items, without %.0f; want at most a tenth of those and a twentieth of the items",
			with.lost, n, without.lost)
	}
	for _, h := range []string{"a", "b", "c"} {
		if by[h] < n/10 {
			t.Errorf("holder %s worked %d of %d items; the hashing should spread them (%v)", h, by[h], n, by)
		}
	}
}

// TestQueueDeadHoldersItemsTakenWithinGrace: a holder that dies without
// revoking anything stays registered until its lease's TTL (60 s here);
// the items it ranks first for are taken by the others after the grace,
// not the TTL: its registration is still there when they are all done.
func TestQueueDeadHoldersItemsTakenWithinGrace(t *testing.T) {
	_, cli := etcdtest.NetClient(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const ttl = 60 * time.Second
	deadCtx, die := context.WithCancel(ctx)
	dead := affinityQueue(cli, "dead", true, ttl, func(ctx context.Context, it Item) error {
		return fmt.Errorf("the dead holder worked %s", it.ID)
	})
	go dead.Run(deadCtx)
	const n = 90
	done := make(chan string, n)
	var live []*Queue
	for _, h := range []string{"b", "c"} {
		var q *Queue
		q = affinityQueue(cli, h, true, ttl, func(ctx context.Context, it Item) error {
			if err := finish(q, cli)(ctx, it); err != nil {
				return err
			}
			done <- it.ID
			return nil
		})
		live = append(live, q)
		go q.Run(ctx)
	}
	all := append([]*Queue{dead}, live...)
	for _, q := range all {
		if err := q.WaitSynced(ctx); err != nil {
			t.Fatal(err)
		}
	}
	waitHolders(t, 3, all...)
	deadID, err := dead.LeaseID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Die without a graceful revoke: stop keeping the lease alive.
	dead.sessMu.Lock()
	dead.session.Orphan()
	dead.session = nil
	dead.sessMu.Unlock()
	die()

	// Which items the dead holder ranks first for, as the live ones see it.
	self := strconv.FormatInt(int64(deadID), 16)
	live[0].mu.Lock()
	holders := append([]string(nil), live[0].holders...)
	live[0].mu.Unlock()
	preferredByDead := 0
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("%03d", i)
		best := ""
		for _, h := range holders {
			if best == "" || rendezvous.Weight(id, h) > rendezvous.Weight(id, best) || (rendezvous.Weight(id, h) == rendezvous.Weight(id, best) && h < best) {
				best = h
			}
		}
		if best == self {
			preferredByDead++
		}
	}
	if preferredByDead == 0 {
		t.Fatal("the dead holder ranks first for none of the items; the test proves nothing")
	}
	start := time.Now()
	var ops []clientv3.Op
	for i := 0; i < n; i++ {
		ops = append(ops, clientv3.OpPut(fmt.Sprintf("/q/items/%03d", i), "x"))
	}
	if _, err := cli.Txn(ctx).Then(ops...).Commit(); err != nil {
		t.Fatal(err)
	}
	timeout := time.After(ttl / 2)
	for i := 0; i < n; i++ {
		select {
		case <-done:
		case <-timeout:
			t.Fatalf("only %d of %d items done in %v; the dead holder's wait for its TTL?", i, n, ttl/2)
		}
	}
	took := time.Since(start)
	resp, err := cli.Get(ctx, "/q/holders/"+self)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 1 {
		t.Fatalf("the dead holder's registration expired already (after %v); the test proves nothing", took)
	}
	c := countsOf(live...)
	t.Logf("%d items (%d ranked first by the dead holder) done in %v; fallback won %.0f, lost %.0f",
		n, preferredByDead, took, c.fallbackWon, c.lost)
	if c.fallbackWon < float64(preferredByDead) {
		t.Errorf("%.0f items won on fallback, want at least the dead holder's %d", c.fallbackWon, preferredByDead)
	}
}

// TestQueueStoppedHoldersItemsGoAtOnce: a holder that stops gracefully
// revokes its session, its registration goes, and the items it ranked
// first for are offered to the next-ranked holder at once rather than
// after the grace (an hour here).
func TestQueueStoppedHoldersItemsGoAtOnce(t *testing.T) {
	_, cli := etcdtest.NetClient(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	mk := func(h string, process ProcessFunc) *Queue {
		q := affinityQueue(cli, h, true, 10*time.Second, process)
		q.grace = time.Hour
		return q
	}
	stopCtx, stop := context.WithCancel(ctx)
	leaving := mk("leaving", func(ctx context.Context, it Item) error {
		<-ctx.Done()
		return ctx.Err()
	})
	stopped := make(chan struct{})
	go func() { _ = leaving.Run(stopCtx); close(stopped) }()
	done := make(chan string, 100)
	var q *Queue
	q = mk("staying", func(ctx context.Context, it Item) error {
		if err := finish(q, cli)(ctx, it); err != nil {
			return err
		}
		done <- it.ID
		return nil
	})
	go q.Run(ctx)
	for _, x := range []*Queue{leaving, q} {
		if err := x.WaitSynced(ctx); err != nil {
			t.Fatal(err)
		}
	}
	waitHolders(t, 2, leaving, q)
	const n = 40
	var ops []clientv3.Op
	for i := 0; i < n; i++ {
		ops = append(ops, clientv3.OpPut(fmt.Sprintf("/q/items/%03d", i), "x"))
	}
	if _, err := cli.Txn(ctx).Then(ops...).Commit(); err != nil {
		t.Fatal(err)
	}
	// The leaving holder leases the items it ranks first for and sits on
	// them; the staying one works its own and leaves the others for the
	// grace (an hour). Then the leaving holder stops.
	q.mu.Lock()
	self := q.self
	q.mu.Unlock()
	mine := 0
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("%03d", i)
		q.mu.Lock()
		if q.rankLocked(id) == 0 {
			mine++
		}
		q.mu.Unlock()
	}
	if mine == n {
		t.Fatalf("holder %s ranks first for every item; the test proves nothing", self)
	}
	stop()
	<-stopped
	timeout := time.After(20 * time.Second)
	for i := 0; i < n; i++ {
		select {
		case <-done:
		case <-timeout:
			t.Fatalf("only %d of %d items done: the stopped holder's items waited for the grace", i, n)
		}
	}
}

// TestQueueHoldersGatherMultiCreateSiblings: with three ranked holders, a
// multi-create's siblings (deferred while a lower index exists, gathered
// by the lowest's holder with TryAcquireMany) are still worked once each,
// every group in one piece, whichever holder the hashing gives each
// sibling.
func TestQueueHoldersGatherMultiCreateSiblings(t *testing.T) {
	_, cli := etcdtest.NetClient(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const groups, size = 40, 5
	// An item's value is "<group>/<index>".
	parse := func(v []byte) (string, int) {
		var g string
		var i int
		fmt.Sscanf(string(v), "%4s/%d", &g, &i)
		return g, i
	}
	var mu sync.Mutex
	seen := map[string]int{}
	calls := map[string][]int{} // group -> items worked by each call
	done := make(chan struct{}, groups)
	var queues []*Queue
	for _, h := range []string{"a", "b", "c"} {
		var q *Queue
		q = New(Config{Client: cli, ItemPrefix: "/q/items/", LeasePrefix: "/q/leases/",
			LeaseKey: func(id string) string { return "/q/leases/" + id }, Holder: h,
			LeaseTTL: 10 * time.Second, Workers: 4, Log: hclog.NewNullLogger(),
			Name: metrics.QueueBuildRequests, Metrics: metrics.New(),
			HolderPrefix: "/q/holders/", HolderKey: func(id string) string { return "/q/holders/" + id },
			Defer: func(it Item, all iter.Seq[Item]) bool {
				g, i := parse(it.Value)
				for o := range all {
					if og, oi := parse(o.Value); o.ID != it.ID && og == g && oi < i {
						return true
					}
				}
				return false
			},
			Process: func(ctx context.Context, it Item) error {
				g, _ := parse(it.Value)
				var ids []string
				for _, p := range q.Pending() {
					if pg, _ := parse(p.Value); p.ID != it.ID && pg == g {
						ids = append(ids, p.ID)
					}
				}
				sibs, err := q.TryAcquireMany(ctx, ids)
				if err != nil {
					return err
				}
				group := append([]Item{it}, sibs...)
				var cmps []clientv3.Cmp
				var ops []clientv3.Op
				for _, x := range group {
					held, err := q.StillHeld(ctx, x)
					if err != nil {
						return err
					}
					cmps = append(cmps, held)
					ops = append(ops, FinishOps(x)...)
				}
				resp, err := cli.Txn(ctx).If(cmps...).Then(ops...).Commit()
				if err != nil || !resp.Succeeded {
					for _, x := range sibs {
						q.Release(context.WithoutCancel(ctx), x)
					}
					return fmt.Errorf("finish group %s: %v (succeeded %v)", g, err, resp != nil && resp.Succeeded)
				}
				for _, x := range sibs {
					q.Done(x)
				}
				mu.Lock()
				for _, x := range group {
					seen[x.ID]++
				}
				calls[g] = append(calls[g], len(group))
				mu.Unlock()
				if len(group) == size {
					done <- struct{}{}
				}
				return nil
			}})
		queues = append(queues, q)
	}
	runSynced(t, ctx, queues...)
	waitHolders(t, 3, queues...)
	for g := 0; g < groups; g++ {
		var ops []clientv3.Op
		for i := 0; i < size; i++ {
			ops = append(ops, clientv3.OpPut(fmt.Sprintf("/q/items/g%03d-%d", g, i), fmt.Sprintf("g%03d/%d", g, i)))
		}
		if _, err := cli.Txn(ctx).Then(ops...).Commit(); err != nil {
			t.Fatal(err)
		}
	}
	timeout := time.After(30 * time.Second)
	for i := 0; i < groups; i++ {
		select {
		case <-done:
		case <-timeout:
			mu.Lock()
			t.Fatalf("only %d of %d groups worked whole; calls %v", i, groups, calls)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != groups*size {
		t.Errorf("%d items worked, want %d", len(seen), groups*size)
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("item %s worked %d times", id, n)
		}
	}
	for g, c := range calls {
		if len(c) != 1 || c[0] != size {
			t.Errorf("group %s worked in pieces: %v items a call, want one call of %d", g, c, size)
		}
	}
	c := countsOf(queues...)
	t.Logf("lease attempts: won %.0f, lost %.0f, skipped %.0f, fallback won %.0f", c.won, c.lost, c.skipped, c.fallbackWon)
}
