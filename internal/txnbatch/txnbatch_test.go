package txnbatch

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/internal/leakcheck"
	"github.com/berth-project/berth/internal/rawtxn"
	"github.com/berth-project/berth/internal/rolelabel"
	"github.com/berth-project/berth/internal/testwait"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// gatedKV holds the first transaction it commits until gate is closed,
// so that the test can queue transactions behind it. It sends them as
// built (a rawtxn.Sender), as the batcher's real KVs do.
type gatedKV struct {
	clientv3.KV
	mu      sync.Mutex
	calls   int
	entered chan struct{}
	gate    chan struct{}
}

func (g *gatedKV) SendTxn(ctx context.Context, r *pb.TxnRequest) (*clientv3.TxnResponse, error) {
	g.mu.Lock()
	g.calls++
	first := g.calls == 1
	g.mu.Unlock()
	if first {
		g.entered <- struct{}{}
		<-g.gate
	}
	return rawtxn.Commit(ctx, g.KV, r)
}

type fixture struct {
	cli *clientv3.Client
	kv  *gatedKV
	b   *Batcher
	ctx context.Context
}

// newFixture is a batcher with one request in flight at a time, whose
// first request (a put of /tb/first) is in flight, held, when it returns.
func newFixture(t *testing.T) (*fixture, <-chan result) {
	cli := etcdtest.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	kv := &gatedKV{KV: cli.KV, entered: make(chan struct{}, 1), gate: make(chan struct{})}
	b := New(kv)
	b.maxInFlight = 1
	f := &fixture{cli: cli, kv: kv, b: b, ctx: ctx}
	first := f.async(ctx, nil, []*pb.RequestOp{rawtxn.Put("/tb/first", "1")})
	select {
	case <-kv.entered:
	case <-ctx.Done():
		t.Fatal("the first transaction never went out")
	}
	return f, first
}

type result struct {
	out Outcome
	err error
}

func (f *fixture) async(ctx context.Context, cmps []*pb.Compare, ops []*pb.RequestOp) <-chan result {
	ch := make(chan result, 1)
	go func() {
		out, err := f.b.Commit(ctx, cmps, ops)
		ch <- result{out, err}
	}()
	return ch
}

func (f *fixture) waitQueued(t *testing.T, n int) {
	t.Helper()
	err := testwait.Wait(f.ctx, 10*time.Second, func() (bool, string) {
		f.b.mu.Lock()
		defer f.b.mu.Unlock()
		return len(f.b.queue) >= n, fmt.Sprintf("%d queued, want %d", len(f.b.queue), n)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestQueuedTransactionsGoTogetherAndEachCommitsOrFailsAlone(t *testing.T) {
	f, first := newFixture(t)
	if _, err := f.cli.Put(f.ctx, "/tb/taken", "x"); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		desc    string
		key     string
		want    bool
		readKey string // a get in the same transaction
	}{
		{desc: "absent key is created", key: "/tb/a", want: true},
		{desc: "a taken key fails alone", key: "/tb/taken", want: false},
		{desc: "another absent key is created, reading one", key: "/tb/b", want: true, readKey: "/tb/taken"},
	}
	chans := make([]<-chan result, len(tests))
	for i, tc := range tests {
		ops := []*pb.RequestOp{rawtxn.Put(tc.key, tc.desc)}
		if tc.readKey != "" {
			ops = append(ops, rawtxn.Get(tc.readKey))
		}
		chans[i] = f.async(f.ctx, []*pb.Compare{rawtxn.Absent(tc.key)}, ops)
	}
	f.waitQueued(t, len(tests))
	close(f.kv.gate)
	if r := <-first; r.err != nil || !r.out.Succeeded {
		t.Fatalf("first: %+v", r)
	}
	var rev int64
	for i, tc := range tests {
		r := <-chans[i]
		if r.err != nil || r.out.Succeeded != tc.want {
			t.Fatalf("%s: %+v, want succeeded %v", tc.desc, r, tc.want)
		}
		if rev != 0 && r.out.Revision != rev {
			t.Errorf("%s: revision %d, the batch's is %d", tc.desc, r.out.Revision, rev)
		}
		rev = r.out.Revision
		if tc.readKey != "" {
			if kvs := r.out.Responses[1].GetResponseRange().Kvs; len(kvs) != 1 || string(kvs[0].Value) != "x" {
				t.Errorf("%s: read %v", tc.desc, kvs)
			}
		}
	}
	resp, err := f.cli.Get(f.ctx, "/tb/taken")
	if err != nil || string(resp.Kvs[0].Value) != "x" {
		t.Fatalf("the failed member wrote: %v %v", resp.Kvs, err)
	}
	if reqs, txns := f.b.Stats(); reqs != 2 || txns != 4 {
		t.Errorf("%d requests carrying %d transactions, want 2 carrying 4", reqs, txns)
	}
}

func TestMembersWritingOneKeyGoInSeparateRequests(t *testing.T) {
	f, first := newFixture(t)
	a := f.async(f.ctx, nil, []*pb.RequestOp{rawtxn.Put("/tb/same", "a")})
	f.waitQueued(t, 1)
	b := f.async(f.ctx, nil, []*pb.RequestOp{rawtxn.Put("/tb/same", "b")})
	f.waitQueued(t, 2)
	close(f.kv.gate)
	<-first
	for _, ch := range []<-chan result{a, b} {
		if r := <-ch; r.err != nil || !r.out.Succeeded {
			t.Fatalf("%+v", r)
		}
	}
	if reqs, txns := f.b.Stats(); reqs != 3 || txns != 3 {
		t.Errorf("%d requests carrying %d transactions, want 3 carrying 3", reqs, txns)
	}
}

func TestCallerGivingUpBeforeItsBatchIsNeverSent(t *testing.T) {
	f, first := newFixture(t)
	cctx, cancel := context.WithCancel(f.ctx)
	gone := f.async(cctx, nil, []*pb.RequestOp{rawtxn.Put("/tb/gone", "1")})
	f.waitQueued(t, 1)
	cancel()
	if r := <-gone; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("cancelled: %+v, want context.Canceled", r)
	}
	close(f.kv.gate)
	<-first
	if out, err := f.b.Commit(f.ctx, nil, []*pb.RequestOp{rawtxn.Put("/tb/after", "1")}); err != nil || !out.Succeeded {
		t.Fatalf("after: %+v %v", out, err)
	}
	resp, err := f.cli.Get(f.ctx, "/tb/gone")
	if err != nil || len(resp.Kvs) != 0 {
		t.Fatalf("the cancelled transaction was written (%v, %v)", resp.Kvs, err)
	}
	if _, txns := f.b.Stats(); txns != 2 {
		t.Errorf("%d transactions sent, want 2", txns)
	}
}

func TestRangeWritesAndNestedTransactionsAreRefused(t *testing.T) {
	b := New(etcdtest.Client(t))
	_, err := b.Commit(context.Background(), nil, []*pb.RequestOp{{Request: &pb.RequestOp_RequestDeleteRange{
		RequestDeleteRange: &pb.DeleteRangeRequest{Key: []byte("/tb/"), RangeEnd: rawtxn.PrefixEnd("/tb/")}}}})
	if err == nil {
		t.Fatal("a range delete was accepted")
	}
	_, err = b.Commit(context.Background(), nil, []*pb.RequestOp{rawtxn.Nested(&pb.TxnRequest{})})
	if err == nil {
		t.Fatal("a nested transaction was accepted")
	}
}

func TestManyConcurrentMembersAllCommitWithinEtcdLimits(t *testing.T) {
	cli := etcdtest.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b := New(cli)
	const n = 500
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := fmt.Sprintf("/tb/many/%d", i)
			// Three writes and a read each: 64 members are 64 operations
			// at the top level and 4 in each nested transaction.
			out, err := b.Commit(ctx, []*pb.Compare{rawtxn.Absent(key)}, []*pb.RequestOp{rawtxn.Put(key, "v"),
				rawtxn.Put(key+"/b", "v"), rawtxn.Delete(key + "/c"), rawtxn.Get(key)})
			if err == nil && !out.Succeeded {
				err = fmt.Errorf("%s did not commit", key)
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	resp, err := cli.Get(ctx, "/tb/many/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || resp.Count != 2*n {
		t.Fatalf("%d keys written, want %d (%v)", resp.Count, 2*n, err)
	}
	reqs, txns := b.Stats()
	if txns != n {
		t.Fatalf("%d transactions sent, want %d", txns, n)
	}
	t.Logf("%d transactions in %d requests", txns, reqs)
}

// A batch's request context carries the first caller's role label (what
// an etcd tally counts it under) and none of the callers' values, and
// ends only once every caller has given up.
func TestAllGoneCarriesTheFirstRoleAndEndsWithTheLast(t *testing.T) {
	type key struct{}
	var ctxs []context.Context
	var cancels []context.CancelFunc
	for _, role := range []string{"superconductor", "other"} {
		var ctx context.Context
		rolelabel.Do(context.WithValue(context.Background(), key{}, "value"), role, func(c context.Context) { ctx = c })
		ctx, cancel := context.WithCancel(ctx)
		ctxs, cancels = append(ctxs, ctx), append(cancels, cancel)
	}
	ctx, release := AllGone(len(ctxs), func(i int) context.Context { return ctxs[i] })
	defer release()
	if got := rolelabel.Of(ctx); got != "superconductor" {
		t.Errorf("role label %q, want the first caller's", got)
	}
	if v := ctx.Value(key{}); v != nil {
		t.Errorf("carries a caller's value %v", v)
	}
	cancels[0]()
	if ctx.Err() != nil {
		t.Fatal("ended while a caller still waits")
	}
	cancels[1]()
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("did not end once every caller gave up")
	}
}
