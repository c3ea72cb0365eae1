package informer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/internal/etcdtest"
)

// recorder keeps the values the informer handed over.
type recorder struct {
	mu   sync.Mutex
	vals map[string]string
}

func (r *recorder) Reset(evs []Event, _ int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.vals = map[string]string{}
	for _, e := range evs {
		r.vals[e.Key] = string(e.Value)
	}
}

func (r *recorder) Apply(evs []Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range evs {
		if e.Deleted {
			delete(r.vals, e.Key)
		} else {
			r.vals[e.Key] = string(e.Value)
		}
	}
}

func (r *recorder) get(k string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.vals[k]
}

// TestWaitForRevision checks read-your-writes: once WaitForRevision(rev)
// returns, every write under the prefix up to rev has been applied, and a
// revision written outside the prefix (no event ever comes) is reached too,
// through a progress notification.
func TestWaitForRevision(t *testing.T) {
	cli := etcdtest.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rec := &recorder{}
	in := New(cli, "/p/", rec, hclog.NewNullLogger())
	go in.Run(ctx)
	if err := in.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		v := string(rune('a' + i))
		resp, err := cli.Put(ctx, "/p/k", v)
		if err != nil {
			t.Fatal(err)
		}
		if err := in.WaitForRevision(ctx, resp.Header.Revision); err != nil {
			t.Fatal(err)
		}
		if got := rec.get("/p/k"); got != v {
			t.Fatalf("after waiting for revision %d the handler has %q, want %q", resp.Header.Revision, got, v)
		}
	}
	resp, err := cli.Put(ctx, "/elsewhere", "x")
	if err != nil {
		t.Fatal(err)
	}
	if err := in.WaitForRevision(ctx, resp.Header.Revision); err != nil {
		t.Fatalf("a revision outside the prefix was never reached: %v", err)
	}
	short, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancelShort()
	if err := in.WaitForRevision(short, resp.Header.Revision+1000); err == nil {
		t.Fatal("waiting for a revision etcd has not reached returned without error")
	}
}

// decodingRecorder is a recorder that is also a Decoder: it keeps the
// decoded values, and notes any listed event that still carries its raw
// value (Reset's are garbage once decoded) and any watched one that does
// not carry the value it decoded (a watch's events carry etcd's bytes).
type decodingRecorder struct {
	recorder
	raw, watchedWithout int
}

func (d *decodingRecorder) Decode(key string, value []byte) (any, error) {
	if string(value) == "bad" {
		return nil, fmt.Errorf("bad value at %s", key)
	}
	return "decoded:" + string(value), nil
}

func (d *decodingRecorder) keep(evs []Event, listed bool) {
	for _, e := range evs {
		if listed && e.Value != nil {
			d.raw++
		}
		if !listed && e.DecodeErr == nil && !e.Deleted && e.Decoded != "decoded:"+string(e.Value) {
			d.watchedWithout++
		}
		switch {
		case e.Deleted:
			delete(d.vals, e.Key)
		case e.DecodeErr != nil:
			d.vals[e.Key] = "error:" + e.DecodeErr.Error()
		default:
			d.vals[e.Key] = e.Decoded.(string)
		}
	}
}

func (d *decodingRecorder) Reset(evs []Event, _ int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.vals = map[string]string{}
	d.keep(evs, true)
}

func (d *decodingRecorder) Apply(evs []Event) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.keep(evs, false)
}

// TestListPagesAtOneRevision lists a prefix in many pages (each decoded
// on several goroutines while the next is fetched) while a writer keeps
// changing it: every page is at the first page's revision, in key order,
// and the watch then delivers the writes after it, decoded too.
func TestListPagesAtOneRevision(t *testing.T) {
	defer func(n int64) { pageSize = n }(pageSize)
	pageSize = 700 // > minParallelDecode: pages are decoded in parallel
	// The in-process client has no RangeStream (paged reads); a
	// networked one streams (chunks etcd sizes itself).
	t.Run("paged", func(t *testing.T) { testListAtOneRevision(t, etcdtest.Client(t), true) })
	t.Run("streamed", func(t *testing.T) {
		_, cli := etcdtest.NetClient(t)
		testListAtOneRevision(t, cli, false)
	})
}

func testListAtOneRevision(t *testing.T, cli *clientv3.Client, paged bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const n = 5000
	var populated int64
	for i := 0; i < n; i += 100 {
		var ops []clientv3.Op
		for j := i; j < i+100; j++ {
			v := fmt.Sprintf("v%d", j)
			if j == 4321 {
				v = "bad"
			}
			ops = append(ops, clientv3.OpPut(fmt.Sprintf("/p/k%05d", j), v))
		}
		resp, err := cli.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			t.Fatal(err)
		}
		populated = resp.Header.Revision
	}
	// Once the first page is in, a writer changes the keys the list has
	// not reached yet: a list not pinned to one revision would see some.
	stop := make(chan struct{})
	wrote := make(chan int64, 1)
	writer := func() {
		var last int64
		defer func() { wrote <- last }()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			resp, err := cli.Put(ctx, fmt.Sprintf("/p/k%05d", n-1-i%100), "late")
			if err != nil {
				return
			}
			last = resp.Header.Revision
		}
	}
	var keys []string
	pages := 0
	rev, err := List(ctx, cli, "/p/", 0, func(key string, value []byte) (any, error) {
		return string(value), nil
	}, func(page []Event) error {
		pages++
		if pages == 1 {
			go writer()
		}
		for _, e := range page {
			if e.Value != nil {
				t.Errorf("%s still has its raw value after decoding", e.Key)
			}
			if e.Revision > populated || e.Decoded == "late" {
				t.Errorf("%s at revision %d (%v), populated at %d", e.Key, e.Revision, e.Decoded, populated)
			}
			keys = append(keys, e.Key)
		}
		return nil
	})
	close(stop)
	if err != nil {
		t.Fatal(err)
	}
	if rev != populated {
		t.Fatalf("List returned revision %d, want %d", rev, populated)
	}
	if paged && pages < n/int(pageSize) {
		t.Fatalf("listed in %d pages, want at least %d", pages, n/int(pageSize))
	}
	if pages < 2 {
		t.Fatalf("listed in %d chunks: the test needs several", pages)
	}
	if len(keys) != n {
		t.Fatalf("listed %d keys, want %d", len(keys), n)
	}
	for i, k := range keys {
		if want := fmt.Sprintf("/p/k%05d", i); k != want {
			t.Fatalf("key %d is %s, want %s (order lost)", i, k, want)
		}
	}
	last := <-wrote

	// The informer: Reset and Apply see decoded values only.
	d := &decodingRecorder{}
	in := New(cli, "/p/", d, hclog.NewNullLogger())
	go in.Run(ctx)
	if err := in.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	if err := in.WaitForRevision(ctx, last); err != nil {
		t.Fatal(err)
	}
	resp, err := cli.Put(ctx, "/p/k00000", "new")
	if err != nil {
		t.Fatal(err)
	}
	if err := in.WaitForRevision(ctx, resp.Header.Revision); err != nil {
		t.Fatal(err)
	}
	if got := d.get("/p/k00000"); got != "decoded:new" {
		t.Errorf("watched value = %q, want decoded:new", got)
	}
	if got := d.get("/p/k00001"); got != "decoded:v1" {
		t.Errorf("listed value = %q, want decoded:v1", got)
	}
	if got := d.get("/p/k04321"); got != "error:bad value at /p/k04321" {
		t.Errorf("undecodable value = %q, want its error", got)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.raw != 0 || d.watchedWithout != 0 {
		t.Errorf("%d listed events reached the handler with their raw value, %d watched ones without it",
			d.raw, d.watchedWithout)
	}

	// A PagedResetter gets the same list chunk by chunk, in key order,
	// at one revision, and no Reset.
	p := &pagedRecorder{}
	pin := New(cli, "/p/", p, hclog.NewNullLogger())
	go pin.Run(ctx)
	if err := pin.WaitForRevision(ctx, resp.Header.Revision); err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mismatched != 0 {
		t.Errorf("%d paged events did not carry the value they decoded", p.mismatched)
	}
	if p.resets != 0 || p.pages < 2 || len(p.keys) != n {
		t.Fatalf("paged reset: %d Resets, %d pages, %d keys; want 0, several, %d", p.resets, p.pages, len(p.keys), n)
	}
	for i, k := range p.keys {
		if want := fmt.Sprintf("/p/k%05d", i); k != want {
			t.Fatalf("paged key %d is %s, want %s (order lost)", i, k, want)
		}
	}
	if p.rev != resp.Header.Revision || p.vals["/p/k00000"] != "decoded:new" || p.vals["/p/k00001"] != "decoded:v1" {
		t.Errorf("paged reset at %d (want %d): k00000=%q k00001=%q", p.rev, resp.Header.Revision,
			p.vals["/p/k00000"], p.vals["/p/k00001"])
	}
}

// pagedRecorder is a decodingRecorder that takes its list page by page
// (PagedResetter), noting the keys in the order they came.
type pagedRecorder struct {
	decodingRecorder
	keys          []string
	pages, resets int
	// mismatched counts events whose Value is not what they decoded.
	mismatched int
	rev        int64
}

func (p *pagedRecorder) Reset(evs []Event, rev int64) {
	p.mu.Lock()
	p.resets++
	p.mu.Unlock()
	p.decodingRecorder.Reset(evs, rev)
}

func (p *pagedRecorder) ResetPaged(rev int64, list func(page func([]Event)) error) error {
	vals := map[string]string{}
	var keys []string
	pages, mismatched := 0, 0
	err := list(func(page []Event) {
		pages++
		for _, e := range page {
			// Borrowed: the key and the value are the list's buffer.
			k := strings.Clone(e.Key)
			keys = append(keys, k)
			if e.DecodeErr == nil {
				vals[k] = e.Decoded.(string)
			}
			if want := "decoded:" + string(e.Value); e.DecodeErr == nil && e.Decoded != want {
				mismatched++
			}
		}
	})
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.vals, p.keys, p.pages, p.rev, p.mismatched = vals, keys, pages, rev, mismatched
	return nil
}

// TestListCompactedRevision: a list pinned to a compacted revision fails
// with etcd's ErrCompacted, streamed or paged, so callers can re-list.
func TestListCompactedRevision(t *testing.T) {
	_, net := etcdtest.NetClient(t)
	for name, cli := range map[string]*clientv3.Client{"paged": etcdtest.Client(t), "streamed": net} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			first, err := cli.Put(ctx, "/c/a", "1")
			if err != nil {
				t.Fatal(err)
			}
			last, err := cli.Put(ctx, "/c/a", "2")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := cli.Compact(ctx, last.Header.Revision); err != nil {
				t.Fatal(err)
			}
			_, err = List(ctx, cli, "/c/", first.Header.Revision, nil, func([]Event) error { return nil })
			if !errors.Is(err, rpctypes.ErrCompacted) {
				t.Fatalf("list at a compacted revision: %v, want ErrCompacted", err)
			}
		})
	}
}

// TestListEmptyPrefix: an empty prefix lists as one empty chunk at the
// current revision, streamed or paged.
func TestListEmptyPrefix(t *testing.T) {
	_, net := etcdtest.NetClient(t)
	for name, cli := range map[string]*clientv3.Client{"paged": etcdtest.Client(t), "streamed": net} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			put, err := cli.Put(ctx, "/elsewhere", "x")
			if err != nil {
				t.Fatal(err)
			}
			calls, keys := 0, 0
			rev, err := List(ctx, cli, "/empty/", 0, nil, func(page []Event) error {
				calls++
				keys += len(page)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if rev < put.Header.Revision || keys != 0 || calls < 1 {
				t.Fatalf("List of an empty prefix: revision %d (want >= %d), %d keys in %d calls", rev, put.Header.Revision, keys, calls)
			}
		})
	}
}

// TestWaitForRevisionRewatchesAStalledWatch: a resuming informer whose
// watch answers no progress request (here the first watch's requests
// are dropped) is watched again after stallAfter, and the waiter then
// reaches a revision written outside the prefix. Without the restart it
// would wait until its deadline.
func TestWaitForRevisionRewatchesAStalledWatch(t *testing.T) {
	cli := etcdtest.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	g := &progressGate{pass: func(watch int, _ time.Duration) bool { return watch > 0 }}
	in, rev := g.start(ctx, t, cli)
	wait, cancelWait := context.WithTimeout(ctx, 4*stallAfter)
	defer cancelWait()
	if err := in.WaitForRevision(wait, rev); err != nil {
		t.Fatalf("a stalled watch was not watched again: %v", err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.dropped == 0 || g.passed == 0 {
		t.Fatalf("progress requests dropped %d, passed %d: want the first watch's dropped and a new watch's answered", g.dropped, g.passed)
	}
}

// progressGate stands between a resuming informer on /p/ and etcd's
// progress requests: a request passes only if pass says so for its watch
// (numbered from 0 in the order the watches first asked) and the watch's
// age (since its first request). A dropped request is never answered, as
// by a stream etcd will not answer.
type progressGate struct {
	pass func(watch int, age time.Duration) bool

	mu              sync.Mutex
	watches         []context.Context
	since           []time.Time
	dropped, passed int
}

// start runs the informer, waits for its list, writes outside its
// prefix, and returns it with the write's revision.
func (g *progressGate) start(ctx context.Context, t *testing.T, cli *clientv3.Client) (*Informer, int64) {
	t.Helper()
	in := New(cli, "/p/", &recorder{}, hclog.NewNullLogger(), Resume())
	in.requestProgress = func(pctx context.Context) error {
		g.mu.Lock()
		w := slices.Index(g.watches, pctx)
		if w < 0 {
			w = len(g.watches)
			g.watches, g.since = append(g.watches, pctx), append(g.since, time.Now())
		}
		pass := g.pass(w, time.Since(g.since[w]))
		if pass {
			g.passed++
		} else {
			g.dropped++
		}
		g.mu.Unlock()
		if !pass {
			return nil
		}
		return cli.RequestProgress(pctx)
	}
	return in, runBehind(ctx, t, cli, in)
}

// runBehind runs in, waits for its list, and writes outside its prefix:
// the informer is then behind etcd by a revision none of its events
// brings, which only a progress notification can.
func runBehind(ctx context.Context, t *testing.T, cli *clientv3.Client, in *Informer) int64 {
	t.Helper()
	go in.Run(ctx)
	if err := in.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	resp, err := cli.Put(ctx, "/elsewhere", "x")
	if err != nil {
		t.Fatal(err)
	}
	return resp.Header.Revision
}

// eventLog keeps every event the informer applied, deletes included.
type eventLog struct {
	mu  sync.Mutex
	evs []Event
}

func (l *eventLog) Reset([]Event, int64) {}

func (l *eventLog) Apply(evs []Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.evs = append(l.evs, evs...)
}

func (l *eventLog) deleted() (keys []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range l.evs {
		if e.Deleted {
			keys = append(keys, e.Key)
		}
	}
	return keys
}

func (l *eventLog) puts() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, e := range l.evs {
		if !e.Deleted {
			n++
		}
	}
	return n
}

// TestPutsOnlyLeavesDeletesOut: a PutsOnly informer is handed every put
// and no delete, and still reaches a revision that only deleted
// (WaitForRevision, through a progress notification); beside it an
// informer without the option is handed the delete.
func TestPutsOnlyLeavesDeletesOut(t *testing.T) {
	cli := etcdtest.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	putsOnly, all := &eventLog{}, &eventLog{}
	ins := []*Informer{
		New(cli, "/p/", putsOnly, hclog.NewNullLogger(), PutsOnly()),
		New(cli, "/p/", all, hclog.NewNullLogger()),
	}
	for _, in := range ins {
		go in.Run(ctx)
		if err := in.WaitSynced(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var rev int64
	for _, op := range []clientv3.Op{clientv3.OpPut("/p/a", "1"), clientv3.OpPut("/p/b", "1"),
		clientv3.OpDelete("/p/a"), clientv3.OpPut("/p/c", "1"), clientv3.OpDelete("/p/b")} {
		resp, err := cli.Do(ctx, op)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case resp.Put() != nil:
			rev = resp.Put().Header.Revision
		default:
			rev = resp.Del().Header.Revision
		}
	}
	for _, in := range ins {
		if err := in.WaitForRevision(ctx, rev); err != nil {
			t.Fatal(err)
		}
	}
	if got := putsOnly.deleted(); len(got) != 0 {
		t.Errorf("PutsOnly informer was handed deletes of %v", got)
	}
	if got := putsOnly.puts(); got != 3 {
		t.Errorf("PutsOnly informer was handed %d puts, want 3", got)
	}
	if got := all.deleted(); len(got) != 2 {
		t.Errorf("informer without the option was handed deletes of %v, want /p/a and /p/b", got)
	}
}

// TestWaitForRevisionPastAWatcherFromTheFuture: etcd answers a progress
// request only when every watcher on the request's gRPC stream has
// caught up and none starts after the store's revision
// (watchableStore.progressIfSync). A watch made "from now" (its list's
// revision + 1) on the informer's shared stream, with nothing written
// after it, blocks every progress request on that stream until the next
// write: seen in e2e as an idle dev's placement index 4 revisions behind
// for a minute, every Placement read failing its sync, and watching again
// on the same stream did not help. The waiter must still reach a revision
// written outside its prefix, for a resuming informer and a listing one.
func TestWaitForRevisionPastAWatcherFromTheFuture(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []Option
	}{{"resume", []Option{Resume()}}, {"relist", nil}} {
		t.Run(tc.name, func(t *testing.T) {
			cli := etcdtest.Client(t)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			in := New(cli, "/p/", &recorder{}, hclog.NewNullLogger(), tc.opts...)
			rev := runBehind(ctx, t, cli, in)
			// Another watch on the same stream (an informer's watch
			// context, no stream of its own), from the revision after
			// the last write; nothing is written after it.
			wctx, wcancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
			defer wcancel()
			wch := cli.Watch(wctx, "/other/", clientv3.WithPrefix(), clientv3.WithRev(rev+1),
				clientv3.WithCreatedNotify())
			if created := <-wch; !created.Created {
				t.Fatalf("the other watch was not created: %v", created.Err())
			}
			wait, cancelWait := context.WithTimeout(ctx, 4*stallAfter)
			defer cancelWait()
			if err := in.WaitForRevision(wait, rev); err != nil {
				t.Fatalf("the waiter never reached a revision written outside its prefix: %v", err)
			}
		})
	}
}

// TestStalledWatchIsMadeAgainOnce: waiters that began at different times
// each see the revision stand still on their own clock; the first to see
// stallAfter pass ends the watch, and the others leave the new one alone
// until it is stallAfter old (ended every few hundred milliseconds, a
// new watch might never sync). Here the first watch answers no progress
// request, and a later one answers once it is a second old (a watcher
// catching up on a busy member).
func TestStalledWatchIsMadeAgainOnce(t *testing.T) {
	cli := etcdtest.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	g := &progressGate{pass: func(watch int, age time.Duration) bool { return watch > 0 && age >= time.Second }}
	in, rev := g.start(ctx, t, cli)
	const waiters = 12
	errs := make(chan error, waiters)
	for i := range waiters {
		go func() {
			wait, cancelWait := context.WithTimeout(ctx, 5*stallAfter)
			defer cancelWait()
			errs <- in.WaitForRevision(wait, rev)
		}()
		if i < waiters-1 {
			time.Sleep(stallAfter / waiters) // staggered starts, not a wait for state
		}
	}
	for range waiters {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.watches) != 2 {
		t.Fatalf("progress was asked on %d watches, want 2: the stalled one and the one made again", len(g.watches))
	}
}
