package workqueue

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/internal/testwait"
)

func testQueue(cli *clientv3.Client, holder string, process ProcessFunc) *Queue {
	return New(testQueueConfig(cli, holder, process))
}

// testQueueConfig is testQueue's config, for tests that change a few of
// its fields: a holder on /q/ without registration.
func testQueueConfig(cli *clientv3.Client, holder string, process ProcessFunc) Config {
	return Config{Client: cli, ItemPrefix: "/q/items/", LeasePrefix: "/q/leases/",
		LeaseKey: func(id string) string { return "/q/leases/" + id }, Holder: holder,
		LeaseTTL: 2 * time.Second, Workers: 2, Process: process, Log: hclog.NewNullLogger()}
}

// registerUnderQ makes c's holder register under /q/holders/, which turns
// the holder ranking on.
func registerUnderQ(c *Config) {
	c.HolderPrefix = "/q/holders/"
	c.HolderKey = func(id string) string { return "/q/holders/" + id }
}

// finish is what a real ProcessFunc's final transaction does.
func finish(q *Queue, cli *clientv3.Client) ProcessFunc {
	return func(ctx context.Context, it Item) error {
		held, err := q.StillHeld(ctx, it)
		if err != nil {
			return err
		}
		_, err = cli.Txn(ctx).If(held).Then(FinishOps(it)...).Commit()
		return err
	}
}

func TestQueueWorksEachItemOnceAcrossHolders(t *testing.T) {
	for _, tc := range []struct {
		desc               string
		batch, writtenOnce bool
	}{
		{desc: "a lease transaction each"},
		// Three holders racing for the same items, each sending the
		// leases its workers take together as one request: every lease
		// still wins or loses on its own.
		{desc: "leases batched", batch: true},
		// The leases compare the items' mod revisions instead of reading
		// them: the value worked is the watch's.
		{desc: "items written once, leases batched", batch: true, writtenOnce: true},
	} {
		t.Run(tc.desc, func(t *testing.T) { worksEachItemOnceAcrossHolders(t, tc.batch, tc.writtenOnce) })
	}
}

func worksEachItemOnceAcrossHolders(t *testing.T, batch, writtenOnce bool) {
	_, cli := etcdtest.NetClient(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	seen := map[string]int{}
	const items = 30
	done := make(chan struct{}, items)
	var queues []*Queue
	for _, h := range []string{"a", "b", "c"} {
		var q *Queue
		c := testQueueConfig(cli, h, func(ctx context.Context, it Item) error {
			mu.Lock()
			seen[it.ID]++
			mu.Unlock()
			if string(it.Value) != "x" {
				return fmt.Errorf("item %s leased with value %q, want x", it.ID, it.Value)
			}
			if err := finish(q, cli)(ctx, it); err != nil {
				return err
			}
			done <- struct{}{}
			return nil
		})
		c.BatchLeases, c.WrittenOnce = batch, writtenOnce
		c.Workers = 8
		q = New(c)
		queues = append(queues, q)
	}
	runSynced(t, ctx, queues...)
	ops := make([]clientv3.Op, items)
	for i := range items {
		ops[i] = clientv3.OpPut("/q/items/"+string(rune('A'+i)), "x")
	}
	// All at once, so that workers lease together.
	if _, err := cli.Txn(ctx).Then(ops...).Commit(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < items; i++ {
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Fatalf("only %d of %d items done", i, items)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for id, n := range seen {
		if n != 1 {
			t.Errorf("item %s worked %d times", id, n)
		}
	}
	if batch {
		var reqs, txns int64
		for _, q := range queues {
			r, n := q.leases.Stats()
			reqs, txns = reqs+r, txns+n
		}
		t.Logf("%d leases in %d requests", txns, reqs)
	}
}

// A holder that takes an item and dies without finishing it: its session
// lease expires and another holder finishes the item.
func TestQueueHandsOverADeadHoldersItem(t *testing.T) {
	_, cli := etcdtest.NetClient(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	taken := make(chan struct{})
	deadCtx, die := context.WithCancel(ctx)
	dead := testQueue(cli, "dead", func(ctx context.Context, it Item) error {
		close(taken)
		<-ctx.Done() // hangs, holding the lease, until it "dies"
		return ctx.Err()
	})
	go dead.Run(deadCtx)
	if err := dead.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, "/q/items/job", "x"); err != nil {
		t.Fatal(err)
	}
	<-taken
	// Die without a graceful revoke: stop keeping the lease alive.
	leaseID, _ := dead.LeaseID(ctx)
	dead.sessMu.Lock()
	dead.session.Orphan()
	dead.session = nil
	dead.sessMu.Unlock()
	die()

	finished := make(chan string, 1)
	var q *Queue
	q = testQueue(cli, "heir", func(ctx context.Context, it Item) error {
		if err := finish(q, cli)(ctx, it); err != nil {
			return err
		}
		finished <- it.ID
		return nil
	})
	go q.Run(ctx)
	select {
	case id := <-finished:
		if id != "job" {
			t.Fatalf("finished %q", id)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the dead holder's item (lease %x) was never handed over", leaseID)
	}
}

// AlsoRead's keys are read in the transaction that leases the item: a
// key that exists is in Item.Extra with its value, an absent one is not;
// whether or not the lease reads the item too (WrittenOnce).
func TestQueueReadsExtraKeysWithTheLease(t *testing.T) {
	for _, tc := range []struct {
		desc        string
		writtenOnce bool
	}{
		{desc: "item read with the lease"},
		{desc: "item written once, not read", writtenOnce: true},
	} {
		t.Run(tc.desc, func(t *testing.T) { readsExtraKeysWithTheLease(t, tc.writtenOnce) })
	}
}

func readsExtraKeysWithTheLease(t *testing.T, writtenOnce bool) {
	cli := etcdtest.Client(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan Item, 2)
	var q *Queue
	q = New(Config{Client: cli, ItemPrefix: "/q/items/", LeasePrefix: "/q/leases/",
		LeaseKey: func(id string) string { return "/q/leases/" + id }, Holder: "a",
		LeaseTTL: 2 * time.Second, Workers: 1, Log: hclog.NewNullLogger(), WrittenOnce: writtenOnce,
		AlsoRead: func(id string) []string { return []string{"/q/extra/" + id} },
		Process: func(ctx context.Context, it Item) error {
			got <- it
			return finish(q, cli)(ctx, it)
		}})
	runSynced(t, ctx, q)
	if _, err := cli.Put(ctx, "/q/extra/with", "claim"); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"with", "without"} {
		if _, err := cli.Put(ctx, "/q/items/"+id, "x-"+id); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 2; i++ {
		select {
		case it := <-got:
			v, ok := it.Extra["/q/extra/"+it.ID]
			switch {
			case string(it.Value) != "x-"+it.ID || it.ModRev == 0:
				t.Errorf("item %s: value %q at mod revision %d, want x-%s at its put's", it.ID, it.Value, it.ModRev, it.ID)
			case it.Extra == nil:
				t.Errorf("item %s: no Extra map", it.ID)
			case it.ID == "with" && (!ok || string(v) != "claim"):
				t.Errorf("item with: Extra = %q, want the extra key's value", it.Extra)
			case it.ID == "without" && ok:
				t.Errorf("item without: Extra has %q for a key that does not exist", v)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("items were not worked")
		}
	}
}

// A queue whose items are written once leases an item only at the mod
// revision it knows: an item rewritten since (which the contract rules
// out, but a lease must not then act on a value that is not the item's)
// or deleted is not leased, and no lease key is left behind.
func TestQueueWrittenOnceLeasesOnlyTheKnownRevision(t *testing.T) {
	cli := etcdtest.Client(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := testQueueConfig(cli, "a", nil)
	c.WrittenOnce = true
	q := New(c)
	put := func(v string) int64 {
		t.Helper()
		resp, err := cli.Put(ctx, "/q/items/i", v)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Header.Revision
	}
	item := func(rev int64, v string) Item {
		return Item{ID: "i", Key: "/q/items/i", LeaseKey: "/q/leases/i", ModRev: rev, Value: []byte(v)}
	}
	leaseKeys := func() int64 {
		t.Helper()
		resp, err := cli.Get(ctx, "/q/leases/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		return resp.Count
	}
	first := put("v1")
	second := put("v2")
	for _, tc := range []struct {
		desc string
		it   Item
		want bool
	}{
		{desc: "an older revision", it: item(first, "v1")},
		{desc: "the current revision", it: item(second, "v2"), want: true},
	} {
		ok, got, err := q.acquire(ctx, tc.it)
		if err != nil {
			t.Fatalf("%s: %v", tc.desc, err)
		}
		if ok != tc.want {
			t.Fatalf("%s: leased %v, want %v", tc.desc, ok, tc.want)
		}
		if n := leaseKeys(); (n == 1) != tc.want {
			t.Fatalf("%s: %d lease keys after the lease (leased %v)", tc.desc, n, ok)
		}
		if ok && (string(got.Value) != "v2" || got.ModRev != second) {
			t.Errorf("%s: leased item %q at %d, want the known v2 at %d", tc.desc, got.Value, got.ModRev, second)
		}
	}
	if _, err := cli.Delete(ctx, "/q/", clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	if ok, _, err := q.acquire(ctx, item(second, "v2")); err != nil || ok {
		t.Fatalf("a deleted item: leased %v (%v), want not leased", ok, err)
	}
	if n := leaseKeys(); n != 0 {
		t.Fatalf("a deleted item: %d lease keys left", n)
	}
}

// TestQueueBurstLargerThanItsBuffer: a burst of more items than the work
// buffer holds is worked without waiting for the periodic sweep (the lease
// TTL, a minute here): workers move the overflow in as they take items.
// Before, every item past the buffer waited a whole TTL.
func TestQueueBurstLargerThanItsBuffer(t *testing.T) {
	_, cli := etcdtest.NetClient(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const n = 1500 // the buffer is 1024
	ready := make(chan struct{})
	var q *Queue
	var mu sync.Mutex
	seen := map[string]int{}
	done := make(chan struct{}, n)
	q = New(Config{Client: cli, ItemPrefix: "/q/items/", LeasePrefix: "/q/leases/",
		LeaseKey: func(id string) string { return "/q/leases/" + id }, Holder: "a",
		LeaseTTL: time.Minute, Workers: 16, Log: hclog.NewNullLogger(),
		Process: func(ctx context.Context, it Item) error {
			<-ready // the whole burst is queued before any is worked
			mu.Lock()
			seen[it.ID]++
			mu.Unlock()
			if err := finish(q, cli)(ctx, it); err != nil {
				return err
			}
			done <- struct{}{}
			return nil
		}})
	runSynced(t, ctx, q)
	for i := 0; i < n; i += 100 {
		var ops []clientv3.Op
		for j := i; j < i+100; j++ {
			ops = append(ops, clientv3.OpPut(fmt.Sprintf("/q/items/%05d", j), "x"))
		}
		if _, err := cli.Txn(ctx).Then(ops...).Commit(); err != nil {
			t.Fatal(err)
		}
	}
	// Wait until the queue has seen every item, then let the work go.
	testwait.Poll(t, 20*time.Second, fmt.Sprintf("the queue to see at least %d of %d items", n-16, n), func() (bool, string) {
		got := len(q.Pending())
		return got >= n-16, fmt.Sprintf("%d pending", got)
	})
	close(ready)
	timeout := time.After(40 * time.Second) // well under the 60 s sweep
	for i := 0; i < n; i++ {
		select {
		case <-done:
		case <-timeout:
			t.Fatalf("only %d of %d items done before the sweep would run", i, n)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for id, c := range seen {
		if c != 1 {
			t.Errorf("item %s worked %d times", id, c)
		}
	}
}

// runSynced runs each queue until ctx ends and returns once every one has
// read its items and leases.
func runSynced(t testing.TB, ctx context.Context, qs ...*Queue) {
	t.Helper()
	for _, q := range qs {
		go q.Run(ctx)
	}
	for _, q := range qs {
		if err := q.WaitSynced(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
