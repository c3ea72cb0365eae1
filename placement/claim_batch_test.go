package placement

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/internal/rawtxn"
)

// gatedKV sends transactions as built (a rawtxn.Sender, as a client's
// KV is); the first one first reports that it was entered and then waits
// for the gate: it holds a batch in flight so that the next claims queue
// behind it.
type gatedKV struct {
	clientv3.KV
	calls   atomic.Int64
	entered chan<- struct{}
	gate    <-chan struct{}
}

func (g *gatedKV) SendTxn(ctx context.Context, r *pb.TxnRequest) (*clientv3.TxnResponse, error) {
	if g.calls.Add(1) == 1 {
		g.entered <- struct{}{}
		<-g.gate
	}
	return rawtxn.Commit(ctx, g.KV, r)
}

// gatedBatcher is a batcher with one batch in flight at a time whose
// first transaction waits for release.
type gatedBatcher struct {
	*claimBatcher
	cli     *clientv3.Client
	entered chan struct{}
	gate    chan struct{}
}

func newGatedBatcher(t *testing.T) *gatedBatcher {
	cli := etcdtest.Client(t)
	g := &gatedBatcher{cli: cli, entered: make(chan struct{}, 1), gate: make(chan struct{})}
	g.claimBatcher = newClaimBatcher(&gatedKV{KV: cli.KV, entered: g.entered, gate: g.gate})
	g.maxInFlight = 1
	return g
}

// hold sends a first claim and returns once it is in flight; its result
// arrives on the channel after release.
func (g *gatedBatcher) hold(t *testing.T, ctx context.Context) <-chan claimResult {
	t.Helper()
	out := make(chan claimResult, 1)
	go func() { out <- g.commit(ctx, nil, []*pb.RequestOp{rawtxn.Put("/bt/first", "1")}, nil) }()
	select {
	case <-g.entered:
	case <-ctx.Done():
		t.Fatal("the first claim never went out")
	}
	return out
}

// waitPending polls until n claims wait behind the batch in flight.
func (g *gatedBatcher) waitPending(t *testing.T, ctx context.Context, n int) {
	t.Helper()
	for {
		g.mu.Lock()
		got := len(g.pending)
		g.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%d claims pending, want %d", got, n)
		case <-time.After(time.Millisecond):
		}
	}
}

func (g *gatedBatcher) async(ctx context.Context, cmps []*pb.Compare, ops []*pb.RequestOp, guards []*pb.Compare) <-chan claimResult {
	out := make(chan claimResult, 1)
	go func() { out <- g.commit(ctx, cmps, ops, guards) }()
	return out
}

func absent(key string) *pb.Compare { return rawtxn.Absent(key) }

func TestClaimBatchCommitsDisjointClaimsTogetherAndConflictsApart(t *testing.T) {
	g := newGatedBatcher(t)
	ctx := testCtx(t)
	first := g.hold(t, ctx)
	// b and d both create /bt/p1 from the same (absent) state: d must not
	// share b's batch, and loses once b has committed. c is independent.
	b := g.async(ctx, []*pb.Compare{absent("/bt/p1")}, []*pb.RequestOp{rawtxn.Put("/bt/p1", "b"), rawtxn.Put("/bt/cb", "b")}, nil)
	g.waitPending(t, ctx, 1)
	c := g.async(ctx, []*pb.Compare{absent("/bt/p2")}, []*pb.RequestOp{rawtxn.Put("/bt/p2", "c"), rawtxn.Put("/bt/cc", "c")}, nil)
	g.waitPending(t, ctx, 2)
	d := g.async(ctx, []*pb.Compare{absent("/bt/p1")}, []*pb.RequestOp{rawtxn.Put("/bt/p1", "d"), rawtxn.Put("/bt/cd", "d")}, nil)
	g.waitPending(t, ctx, 3)
	close(g.gate)

	if r := <-first; r.err != nil || !r.ok {
		t.Fatalf("first: %+v", r)
	}
	rb, rc, rd := <-b, <-c, <-d
	if rb.err != nil || !rb.ok || rc.err != nil || !rc.ok {
		t.Fatalf("b %+v, c %+v: both should commit", rb, rc)
	}
	if rb.rev != rc.rev {
		t.Errorf("b at revision %d, c at %d: they should have shared one transaction", rb.rev, rc.rev)
	}
	if rd.err != nil || rd.ok {
		t.Fatalf("d %+v: should have lost to b", rd)
	}
	if g.batches != 3 || g.batched != 4 {
		t.Errorf("%d transactions for %d claims, want 3 for 4 (first; b+c; d)", g.batches, g.batched)
	}
	for key, want := range map[string]string{"/bt/p1": "b", "/bt/p2": "c", "/bt/cb": "b", "/bt/cc": "c", "/bt/cd": ""} {
		resp, err := g.cli.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		if len(resp.Kvs) == 1 {
			got = string(resp.Kvs[0].Value)
		}
		if got != want {
			t.Errorf("%s = %q, want %q", key, got, want)
		}
	}
}

func TestClaimBatchTellsFailedGuardsFromLostRacesPerClaim(t *testing.T) {
	g := newGatedBatcher(t)
	ctx := testCtx(t)
	if _, err := g.cli.Put(ctx, "/bt/taken", "x"); err != nil {
		t.Fatal(err)
	}
	first := g.hold(t, ctx)
	// guarded: the guard fails; raced: its claim compare fails; fine: both hold.
	guarded := g.async(ctx, []*pb.Compare{absent("/bt/g1")}, []*pb.RequestOp{rawtxn.Put("/bt/g1", "1")}, []*pb.Compare{absent("/bt/taken")})
	g.waitPending(t, ctx, 1)
	raced := g.async(ctx, []*pb.Compare{absent("/bt/taken")}, []*pb.RequestOp{rawtxn.Put("/bt/g2", "1")}, []*pb.Compare{absent("/bt/free")})
	g.waitPending(t, ctx, 2)
	fine := g.async(ctx, []*pb.Compare{absent("/bt/g3")}, []*pb.RequestOp{rawtxn.Put("/bt/g3", "1")}, []*pb.Compare{absent("/bt/free")})
	g.waitPending(t, ctx, 3)
	close(g.gate)
	<-first
	if r := <-guarded; r.err != nil || !r.guardFailed || r.ok {
		t.Errorf("guarded: %+v, want its guard failed", r)
	}
	if r := <-raced; r.err != nil || r.guardFailed || r.ok {
		t.Errorf("raced: %+v, want a lost race", r)
	}
	if r := <-fine; r.err != nil || r.guardFailed || !r.ok {
		t.Errorf("fine: %+v, want committed", r)
	}
	if g.batches != 2 {
		t.Errorf("%d transactions, want 2 (the three guarded claims together)", g.batches)
	}
	resp, err := g.cli.Get(ctx, "/bt/g", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 1 || string(resp.Kvs[0].Key) != "/bt/g3" {
		t.Errorf("written: %v, want only /bt/g3", resp.Kvs)
	}
}

func TestClaimBatchCallerGivingUpBeforeItsBatchIsNeverSent(t *testing.T) {
	g := newGatedBatcher(t)
	ctx := testCtx(t)
	first := g.hold(t, ctx)
	cctx, cancel := context.WithCancel(ctx)
	gone := g.async(cctx, nil, []*pb.RequestOp{rawtxn.Put("/bt/gone", "1")}, nil)
	g.waitPending(t, ctx, 1)
	cancel()
	if r := <-gone; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("cancelled claim: %+v, want context.Canceled", r)
	}
	close(g.gate)
	<-first
	// A claim after it is sent on its own and the cancelled one never.
	if r := g.commit(ctx, nil, []*pb.RequestOp{rawtxn.Put("/bt/after", "1")}, nil); r.err != nil || !r.ok {
		t.Fatalf("after: %+v", r)
	}
	resp, err := g.cli.Get(ctx, "/bt/gone")
	if err != nil || len(resp.Kvs) != 0 {
		t.Fatalf("the cancelled claim was written (%v, %v)", resp.Kvs, err)
	}
	if g.batched != 2 {
		t.Errorf("%d claims sent, want 2", g.batched)
	}
}

func TestClaimBatchStaysWithinEtcdLimits(t *testing.T) {
	g := newGatedBatcher(t)
	ctx := testCtx(t)
	first := g.hold(t, ctx)
	// 20 claims of 120 operations each: at most 8 fit one request
	// (8 nested + 120 <= 128); and 2 claims writing the same key, which
	// etcd refuses inside one request, must go in different ones.
	var outs []<-chan claimResult
	for i := 0; i < 20; i++ {
		ops := make([]*pb.RequestOp, 120)
		for j := range ops {
			ops[j] = rawtxn.Put(fmt.Sprintf("/bt/wide/%02d/%03d", i, j), "v")
		}
		outs = append(outs, g.async(ctx, nil, ops, nil))
		g.waitPending(t, ctx, len(outs))
	}
	for i := 0; i < 2; i++ {
		outs = append(outs, g.async(ctx, nil, []*pb.RequestOp{rawtxn.Put("/bt/same", strconv.Itoa(i))}, nil))
		g.waitPending(t, ctx, len(outs))
	}
	close(g.gate)
	<-first
	for i, out := range outs {
		if r := <-out; r.err != nil || !r.ok {
			t.Fatalf("claim %d: %+v", i, r)
		}
	}
	if g.batches < 4 {
		t.Errorf("%d transactions for 22 claims; the wide ones alone need 3 after the first", g.batches)
	}
	resp, err := g.cli.Get(ctx, "/bt/wide/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || resp.Count != 20*120 {
		t.Fatalf("%d wide keys written (%v), want %d", resp.Count, err, 20*120)
	}
}

func TestClaimBatchSendsRangeComparesAlone(t *testing.T) {
	g := newGatedBatcher(t)
	ctx := testCtx(t)
	first := g.hold(t, ctx)
	// Its compare covers a range the batcher cannot check against others:
	// it goes out at once, beside the batch in flight.
	r := g.commit(ctx, []*pb.Compare{{Key: []byte("/bt/r/"), RangeEnd: rawtxn.PrefixEnd("/bt/r/"),
		Target: pb.Compare_CREATE, Result: pb.Compare_EQUAL, TargetUnion: &pb.Compare_CreateRevision{}}},
		[]*pb.RequestOp{rawtxn.Put("/bt/ranged", "1")}, nil)
	if r.err != nil || !r.ok {
		t.Fatalf("ranged claim: %+v", r)
	}
	close(g.gate)
	<-first
}

// TestClaimBatchLosesNoUpdate has many goroutines increment a few
// counters by compare-and-swap through one batcher: whatever the batches
// were, every counter must equal the increments that reported success.
func TestClaimBatchLosesNoUpdate(t *testing.T) {
	cli := etcdtest.Client(t)
	b := newClaimBatcher(cli)
	b.maxInFlight = 2
	ctx := testCtx(t)
	const counters, workers, each = 5, 24, 20
	var won [counters]atomic.Int64
	var wg sync.WaitGroup
	errc := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				k := (w + i) % counters
				key := fmt.Sprintf("/bt/n/%d", k)
				for {
					resp, err := cli.Get(ctx, key)
					if err != nil {
						errc <- err
						return
					}
					n, rev := 0, int64(0)
					if len(resp.Kvs) == 1 {
						n, _ = strconv.Atoi(string(resp.Kvs[0].Value))
						rev = resp.Kvs[0].ModRevision
					}
					r := b.commit(ctx, []*pb.Compare{rawtxn.ModRevisionIs(key, rev)},
						[]*pb.RequestOp{rawtxn.Put(key, strconv.Itoa(n+1)), rawtxn.Put(fmt.Sprintf("/bt/log/%d/%d", w, i), key)}, nil)
					if r.err != nil {
						errc <- r.err
						return
					}
					if r.ok {
						won[k].Add(1)
						break
					}
				}
			}
		}(w)
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	for k := 0; k < counters; k++ {
		resp, err := cli.Get(ctx, fmt.Sprintf("/bt/n/%d", k))
		if err != nil {
			t.Fatal(err)
		}
		n, _ := strconv.Atoi(string(resp.Kvs[0].Value))
		if int64(n) != won[k].Load() {
			t.Errorf("counter %d = %d after %d successful increments", k, n, won[k].Load())
		}
	}
	t.Logf("%d claims in %d transactions", b.batched, b.batches)
}

// A claim that conflicts with a claim in flight waits for its answer
// instead of going out beside it, though a batch slot is free; once the
// first commits, the second, whose mod revision compare can no longer
// hold, is answered stale without being sent. An unrelated claim goes
// out meanwhile.
func TestClaimBatchHoldsConflictsBehindInFlightAndAnswersStale(t *testing.T) {
	g := newGatedBatcher(t)
	g.maxInFlight = 4
	ctx := testCtx(t)
	put, err := g.cli.Put(ctx, "/bt/k", "0")
	if err != nil {
		t.Fatal(err)
	}
	at := rawtxn.ModRevisionIs("/bt/k", put.Header.Revision)
	first := g.async(ctx, []*pb.Compare{at}, []*pb.RequestOp{rawtxn.Put("/bt/k", "first")}, nil)
	select {
	case <-g.entered:
	case <-ctx.Done():
		t.Fatal("the first claim never went out")
	}
	second := g.async(ctx, []*pb.Compare{at}, []*pb.RequestOp{rawtxn.Put("/bt/k", "second")}, nil)
	g.waitPending(t, ctx, 1)
	other := g.commit(ctx, []*pb.Compare{absent("/bt/other")}, []*pb.RequestOp{rawtxn.Put("/bt/other", "1")}, nil)
	if other.err != nil || !other.ok {
		t.Fatalf("an unrelated claim beside the one in flight: %+v", other)
	}
	g.mu.Lock()
	waiting := len(g.pending)
	g.mu.Unlock()
	if waiting != 1 {
		t.Fatalf("%d claims pending while the first is in flight, want the conflicting one", waiting)
	}
	close(g.gate)
	r1 := <-first
	if r1.err != nil || !r1.ok {
		t.Fatalf("first: %+v", r1)
	}
	if r2 := <-second; r2.err != nil || r2.ok || !r2.stale || r2.rev != r1.rev {
		t.Fatalf("second: %+v, want stale at the first's revision %d", r2, r1.rev)
	}
	if g.batches != 2 || g.stale != 1 {
		t.Errorf("%d transactions and %d stale answers, want 2 (first, other) and 1", g.batches, g.stale)
	}
	resp, err := g.cli.Get(ctx, "/bt/k")
	if err != nil || string(resp.Kvs[0].Value) != "first" {
		t.Fatalf("/bt/k = %v (%v), want first", resp.Kvs, err)
	}
}
