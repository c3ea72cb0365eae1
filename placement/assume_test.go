package placement

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/internal/rawtxn"
)

// heldService returns a service whose index is loaded but not followed:
// no watch event reaches it until the test hands them over (replay, or
// follow), so what its index shows of its own claims comes from the
// claims alone. It returns the revision the index was loaded at.
func heldService(t *testing.T, cli *clientv3.Client) (*Service, int64) {
	t.Helper()
	s := New(cli, etcdschema.New("/test"), hclog.New(&hclog.LoggerOptions{Level: hclog.Warn, Output: testWriter{t}}))
	rev, err := s.load(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	return s, rev
}

// storeOnly is a service with no index: a writer from outside.
func storeOnly(cli *clientv3.Client) *Service {
	return New(cli, etcdschema.New("/test"), hclog.NewNullLogger())
}

// claimAt claims res on rp for consumer and returns the claim's revision.
func claimAt(t *testing.T, s *Service, consumer, rp string, vcpu int64) int64 {
	t.Helper()
	rev, err := s.PutAllocationsWithOptions(testCtx(t), map[string]AllocationWrite{
		consumer: {Allocations: alloc(rp, map[string]int64{VCPU: vcpu})}}, ClaimOptions{})
	if err != nil {
		t.Fatalf("claim %d VCPU on %s for %s: %v", vcpu, rp, consumer, err)
	}
	return rev
}

// indexed is what the index holds for a provider: VCPU used (from the
// candidate search's columns), the record's generation and mod revision.
type indexed struct {
	used, gen, modRev int64
	ok                bool
}

func indexedProvider(s *Service, rp string) indexed {
	s.idx.mu.RLock()
	defer s.idx.mu.RUnlock()
	st := s.idx.st
	e, ok := st.providers[rp]
	if !ok {
		return indexed{}
	}
	out := indexed{gen: e.p.Generation, modRev: e.modRev, ok: true}
	if id, ok := st.classIDs[VCPU]; ok {
		out.used = st.cols[id].used[e.slot]
	}
	return out
}

func indexedConsumer(s *Service, c string) (int64, bool) {
	s.idx.mu.RLock()
	defer s.idx.mu.RUnlock()
	e, ok := s.idx.st.consumers[c]
	if !ok {
		return 0, false
	}
	return e.modRev, true
}

func assumedCount(s *Service) int {
	s.idx.mu.RLock()
	defer s.idx.mu.RUnlock()
	return len(s.idx.assumed)
}

// fits says whether the index offers rp for a request of vcpu.
func fits(t *testing.T, s *Service, vcpu int64) bool {
	t.Helper()
	c, err := s.AllocationCandidates(testCtx(t), CandidateQuery{Groups: []RequestGroup{{Resources: map[string]int64{VCPU: vcpu}}}})
	if err != nil {
		t.Fatal(err)
	}
	return len(c.AllocationRequests) > 0
}

// replay hands s's index the watch events after from, up to until, one
// revision at a time as the watch may deliver them, and calls check
// after each revision.
func replay(t *testing.T, s *Service, from, until int64, check func(rev int64)) {
	t.Helper()
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	wch := s.cli.Watch(ctx, s.keys.PlacementPrefix(), clientv3.WithPrefix(), clientv3.WithRev(from+1))
	for resp := range wch {
		if err := resp.Err(); err != nil {
			t.Fatalf("replay watch: %v", err)
		}
		for i := 0; i < len(resp.Events); {
			rev := resp.Events[i].Kv.ModRevision
			j := i
			for j < len(resp.Events) && resp.Events[j].Kv.ModRevision == rev {
				j++
			}
			s.idx.applyEvents(resp.Events[i:j], rev, s.keys, s.log)
			check(rev)
			if rev >= until {
				return
			}
			i = j
		}
	}
	t.Fatalf("replay ended before revision %d", until)
}

// matchesEtcd checks that the index holds exactly etcd's records (same
// values, same mod revisions) for the providers and consumers named, and
// nothing for those etcd does not have.
func matchesEtcd(t *testing.T, s *Service, providers, consumers []string) {
	t.Helper()
	ctx := testCtx(t)
	s.idx.mu.RLock()
	defer s.idx.mu.RUnlock()
	st := s.idx.st
	for _, rp := range providers {
		key := s.keys.Provider(rp)
		resp, err := s.cli.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		e, ok := st.providers[rp]
		if len(resp.Kvs) == 0 || !ok {
			t.Fatalf("provider %s: in etcd %v, in the index %v", rp, len(resp.Kvs) > 0, ok)
		}
		want, err := decodeProvider(key, resp.Kvs[0].Value)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(e.p, want) || e.modRev != resp.Kvs[0].ModRevision {
			t.Fatalf("provider %s: index has %+v at %d, etcd %+v at %d", rp, e.p, e.modRev, want, resp.Kvs[0].ModRevision)
		}
		if id, ok := st.classIDs[VCPU]; ok && st.cols[id].used[e.slot] != e.p.Usages[VCPU] {
			t.Fatalf("provider %s: VCPU column %d, record %d", rp, st.cols[id].used[e.slot], e.p.Usages[VCPU])
		}
	}
	for _, c := range consumers {
		key := s.keys.Consumer(c)
		resp, err := s.cli.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		e, ok := st.consumers[c]
		if len(resp.Kvs) == 0 {
			if ok {
				t.Fatalf("consumer %s: gone from etcd, still in the index at %d", c, e.modRev)
			}
			continue
		}
		if !ok {
			t.Fatalf("consumer %s: in etcd at %d, not in the index", c, resp.Kvs[0].ModRevision)
		}
		want, err := decodeConsumer(key, resp.Kvs[0].Value)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(e.c, want) || e.modRev != resp.Kvs[0].ModRevision {
			t.Fatalf("consumer %s: index has %+v at %d, etcd %+v at %d", c, e.c, e.modRev, want, resp.Kvs[0].ModRevision)
		}
		for rp := range e.c.Allocations {
			if cs := st.rpConsumers[rp]; cs == nil || !cs.has(c) {
				t.Fatalf("consumer %s: not listed under %s", c, rp)
			}
		}
	}
}

// A service sees its own claims at once: back-to-back claims on one
// provider, planned from the index while the watch is held back, lose no
// race, and the candidate search counts them. When the events arrive
// they are recognised as applied: nothing counted twice, no record
// replaced by an older one, a freed consumer not brought back by its
// creation's event.
func TestOwnClaimsSeenBeforeTheirWatchEvents(t *testing.T) {
	cli := etcdtest.Client(t)
	mkProvider(t, storeOnly(cli), "rp", "", map[string]etcdschema.Inventory{VCPU: inv(8)})
	s, rev0 := heldService(t, cli)

	claimAt(t, s, "c1", "rp", 2)
	claimAt(t, s, "c2", "rp", 2)
	if r := s.ClaimStats().Races; r != 0 {
		t.Fatalf("two claims in a row on one provider lost %d races to each other", r)
	}
	if got := indexedProvider(s, "rp"); got.used != 4 {
		t.Fatalf("index has %d VCPU used after claiming 4", got.used)
	}
	if fits(t, s, 5) || !fits(t, s, 4) {
		t.Fatalf("candidates after 4 of 8 VCPU claimed: 5 fits %v (want false), 4 fits %v (want true)", fits(t, s, 5), fits(t, s, 4))
	}
	if got := s.IndexRevision(); got != rev0 {
		t.Fatalf("index revision moved to %d without the watch (loaded at %d)", got, rev0)
	}
	// A free is seen at once too, and the consumer is gone.
	if _, err := s.deleteAllocations(testCtx(t), "c1"); err != nil {
		t.Fatal(err)
	}
	if _, ok := indexedConsumer(s, "c1"); ok || !fits(t, s, 6) {
		t.Fatalf("after freeing c1: still indexed %v, 6 VCPU fit %v", ok, fits(t, s, 6))
	}
	last := claimAt(t, s, "c3", "rp", 6)
	if r := s.ClaimStats().Races; r != 0 {
		t.Fatalf("claims after a free lost %d races", r)
	}
	want := indexedProvider(s, "rp")
	if want.used != 8 || want.modRev != last {
		t.Fatalf("index after the last claim: %+v, want 8 used at %d", want, last)
	}

	replay(t, s, rev0, last, func(rev int64) {
		if got := indexedProvider(s, "rp"); got != want {
			t.Fatalf("after the events of revision %d the index has rp %+v, want %+v", rev, got, want)
		}
		if _, ok := indexedConsumer(s, "c1"); ok {
			t.Fatalf("after the events of revision %d the freed c1 is back", rev)
		}
	})
	if got := s.IndexRevision(); got != last {
		t.Fatalf("index revision %d after the events up to %d", got, last)
	}
	if n := assumedCount(s); n != 0 {
		t.Fatalf("%d assumed writes left once the watch passed them", n)
	}
	matchesEtcd(t, s, []string{"rp"}, []string{"c1", "c2", "c3"})
}

// A write by someone else between two of this service's claims still
// makes the second lose (its index is behind), and the retry decides on
// etcd's records; the older event of the outside write, arriving after
// the retry's commit was assumed, does not take the provider back.
func TestOutsideWriteBetweenOwnClaimsStillLoses(t *testing.T) {
	cli := etcdtest.Client(t)
	other := storeOnly(cli)
	mkProvider(t, other, "rp", "", map[string]etcdschema.Inventory{VCPU: inv(8)})
	s, rev0 := heldService(t, cli)

	claimAt(t, s, "c1", "rp", 2)
	outside := claimAt(t, other, "x", "rp", 4)
	last := claimAt(t, s, "c2", "rp", 2)
	if r := s.ClaimStats().Races; r != 1 {
		t.Fatalf("the claim after an outside write lost %d races, want 1", r)
	}
	err := s.PutAllocations(testCtx(t), "c3", AllocationWrite{Allocations: alloc("rp", map[string]int64{VCPU: 1})})
	if !errors.Is(err, ErrInsufficientCapacity) {
		t.Fatalf("a claim on a full provider: %v, want ErrInsufficientCapacity", err)
	}
	want := indexedProvider(s, "rp")
	if want.used != 8 || want.modRev != last {
		t.Fatalf("index after the retried claim: %+v, want 8 used at %d", want, last)
	}
	replay(t, s, rev0, last, func(rev int64) {
		if got := indexedProvider(s, "rp"); got != want {
			t.Fatalf("after the events of revision %d the index has rp %+v, want %+v", rev, got, want)
		}
		if _, ok := indexedConsumer(s, "x"); ok != (rev >= outside) {
			t.Fatalf("after the events of revision %d the outside consumer is indexed: %v", rev, ok)
		}
	})
	matchesEtcd(t, s, []string{"rp"}, []string{"c1", "c2", "c3", "x"})
}

// An outside delete of a consumer the index still holds, then this
// service's claim creating it again: the delete's event, older than the
// assumed record, must not remove it.
func TestOlderOutsideDeleteKeepsNewerOwnConsumer(t *testing.T) {
	cli := etcdtest.Client(t)
	other := storeOnly(cli)
	mkProvider(t, other, "rp", "", map[string]etcdschema.Inventory{VCPU: inv(8)})
	claimAt(t, other, "c", "rp", 1)
	s, rev0 := heldService(t, cli)
	if err := other.DeleteAllocations(testCtx(t), "c"); err != nil {
		t.Fatal(err)
	}
	// The index still has c (generation 1), so the plan from the index
	// is refused as a generation conflict and the read path creates it.
	last := claimAt(t, s, "c", "rp", 3)
	mod, ok := indexedConsumer(s, "c")
	if !ok || mod != last {
		t.Fatalf("consumer c indexed %v at %d, want at %d", ok, mod, last)
	}
	replay(t, s, rev0, last, func(rev int64) {
		if mod, ok := indexedConsumer(s, "c"); !ok || mod != last {
			t.Fatalf("after the events of revision %d consumer c is indexed %v at %d, want at %d", rev, ok, mod, last)
		}
	})
	matchesEtcd(t, s, []string{"rp"}, []string{"c"})
}

// A re-list (after a compaction) installs a state at its own revision;
// claims this service committed after it are applied to it again, and
// those it covers are dropped.
func TestReListKeepsNewerOwnClaims(t *testing.T) {
	cli := etcdtest.Client(t)
	mkProvider(t, storeOnly(cli), "rp", "", map[string]etcdschema.Inventory{VCPU: inv(8)})
	s, rev0 := heldService(t, cli)
	r1 := claimAt(t, s, "c1", "rp", 2)

	// A list read at rev0, installed after the claim committed: the race
	// of a re-list with a claim.
	if _, err := s.loadAt(testCtx(t), rev0); err != nil {
		t.Fatal(err)
	}
	if got := s.IndexRevision(); got != rev0 {
		t.Fatalf("index at %d after a list at %d", got, rev0)
	}
	if got := indexedProvider(s, "rp"); got.used != 2 || got.modRev != r1 {
		t.Fatalf("after a re-list older than the claim the index has rp %+v, want 2 used at %d", got, r1)
	}
	claimAt(t, s, "c2", "rp", 2)
	if r := s.ClaimStats().Races; r != 0 {
		t.Fatalf("a claim after the re-list lost %d races", r)
	}
	// A list newer than every claim covers them all.
	head, err := s.load(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if n := assumedCount(s); n != 0 {
		t.Fatalf("%d assumed writes left after a list at %d", n, head)
	}
	matchesEtcd(t, s, []string{"rp"}, []string{"c1", "c2"})
}

// lostAnswerKV commits a transaction for real and then reports an error,
// as when the connection drops before etcd's answer arrives: the outcome
// is unknown to the caller.
type lostAnswerKV struct{ clientv3.KV }

func (l lostAnswerKV) SendTxn(ctx context.Context, r *pb.TxnRequest) (*clientv3.TxnResponse, error) {
	if _, err := rawtxn.Commit(ctx, l.KV, r); err != nil {
		return nil, err
	}
	return nil, errors.New("connection lost before the answer")
}

// A claim whose outcome is unknown, or whose guard failed, applies
// nothing to the index.
func TestUnknownOrRefusedClaimsApplyNothing(t *testing.T) {
	cli := etcdtest.Client(t)
	mkProvider(t, storeOnly(cli), "rp", "", map[string]etcdschema.Inventory{VCPU: inv(8)})
	s, rev0 := heldService(t, cli)
	before := indexedProvider(s, "rp")

	real := s.claims
	s.claims = newClaimBatcher(lostAnswerKV{cli.KV})
	if err := s.PutAllocations(testCtx(t), "c1", AllocationWrite{Allocations: alloc("rp", map[string]int64{VCPU: 2})}); err == nil {
		t.Fatal("a claim whose answer was lost reported success")
	}
	s.claims = real
	if c, err := s.GetAllocations(testCtx(t), "c1"); err != nil || c.Allocations["rp"].Resources[VCPU] != 2 {
		t.Fatalf("the claim with the lost answer is not in etcd: %+v %v", c, err)
	}
	if got := indexedProvider(s, "rp"); got != before {
		t.Fatalf("a claim of unknown outcome changed the index: %+v, was %+v", got, before)
	}
	if _, ok := indexedConsumer(s, "c1"); ok {
		t.Fatal("a claim of unknown outcome put its consumer in the index")
	}

	failing := clientv3.Compare(clientv3.CreateRevision("/test/no-such-key"), ">", 0)
	_, err := s.PutAllocationsWithOptions(testCtx(t), map[string]AllocationWrite{
		"c2": {Allocations: alloc("rp", map[string]int64{VCPU: 1})}}, ClaimOptions{Guards: []clientv3.Cmp{failing}})
	if !errors.Is(err, ErrGuardFailed) {
		t.Fatalf("guarded claim: %v, want ErrGuardFailed", err)
	}
	if got := indexedProvider(s, "rp"); got != before {
		t.Fatalf("a claim whose guard failed changed the index: %+v", got)
	}
	if n := assumedCount(s); n != 0 || s.IndexRevision() != rev0 {
		t.Fatalf("%d assumed writes, index at %d (loaded at %d)", n, s.IndexRevision(), rev0)
	}

	// The index is behind the lost answer's commit: the next claim loses
	// once and is decided on etcd's records.
	last := claimAt(t, s, "c3", "rp", 6)
	if r := s.ClaimStats().Races; r != 1 {
		t.Fatalf("the claim after an unknown outcome lost %d races, want 1", r)
	}
	if got := indexedProvider(s, "rp"); got.used != 8 || got.modRev != last {
		t.Fatalf("index after the retried claim: %+v, want 8 used at %d", got, last)
	}
}

// An index that was never loaded (a store-only service: agents, the
// conductor) assumes nothing: no watch would ever confirm it.
func TestStoreOnlyServiceAssumesNothing(t *testing.T) {
	cli := etcdtest.Client(t)
	s := storeOnly(cli)
	mkProvider(t, s, "rp", "", map[string]etcdschema.Inventory{VCPU: inv(8)})
	claimAt(t, s, "c1", "rp", 2)
	if n := assumedCount(s); n != 0 || indexedProvider(s, "rp").ok || s.IndexRevision() != 0 {
		t.Fatalf("a store-only service indexed its claim: %d assumed, rp %+v, revision %d",
			n, indexedProvider(s, "rp"), s.IndexRevision())
	}
}

// Two services claim concurrently on a few providers, each planning from
// its own index with its watch held back (each sees only its own claims)
// and then again with the watches running: no provider ever goes over
// its capacity, every unit is claimed exactly once, and once the watches
// run both indexes hold exactly etcd's records.
func TestConcurrentClaimsOfTwoServicesNeverExceedCapacity(t *testing.T) {
	const (
		providers = 3
		capacity  = 12
		workers   = 6 // per service
	)
	cli := etcdtest.Client(t)
	var rps []string
	for i := 0; i < providers; i++ {
		rp := fmt.Sprintf("rp%d", i)
		rps = append(rps, rp)
		mkProvider(t, storeOnly(cli), rp, "", map[string]etcdschema.Inventory{VCPU: inv(capacity)})
	}
	a, revA := heldService(t, cli)
	b, revB := heldService(t, cli)

	var mu sync.Mutex
	var consumers []string
	claimed := map[string]int64{}
	// run claims one VCPU at a time until every provider refuses; the
	// first half of the capacity with the watches held, the rest after.
	run := func(limit int64) {
		var wg sync.WaitGroup
		errs := make(chan error, 2*workers)
		for si, s := range []*Service{a, b} {
			for w := 0; w < workers; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for n := 0; ; n++ {
						mu.Lock()
						total := int64(0)
						for _, v := range claimed {
							total += v
						}
						mu.Unlock()
						if total >= limit {
							return
						}
						c := fmt.Sprintf("s%d-w%d-%d-%d", si, w, limit, n)
						full := 0
						for k := range rps {
							rp := rps[(w+n+k)%len(rps)]
							err := s.PutAllocations(testCtx(t), c, AllocationWrite{Allocations: alloc(rp, map[string]int64{VCPU: 1})})
							switch {
							case errors.Is(err, ErrInsufficientCapacity):
								full++
								continue
							case errors.Is(err, ErrConcurrentUpdate):
								continue // every retry lost: nothing written
							case err != nil:
								errs <- err
								return
							}
							mu.Lock()
							consumers = append(consumers, c)
							claimed[rp]++
							mu.Unlock()
							break
						}
						if full == len(rps) {
							return
						}
					}
				}()
			}
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
	run(providers * capacity / 2)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go a.follow(ctx, revA)
	go b.follow(ctx, revB)
	run(providers * capacity)

	for _, rp := range rps {
		p, err := a.Provider(testCtx(t), rp)
		if err != nil {
			t.Fatal(err)
		}
		if p.Usages[VCPU] != capacity || claimed[rp] != capacity {
			t.Errorf("%s: %d VCPU used in etcd, %d claims succeeded, want %d", rp, p.Usages[VCPU], claimed[rp], capacity)
		}
	}
	for _, s := range []*Service{a, b} {
		syncIdx(t, s)
		matchesEtcd(t, s, rps, consumers)
		if n := assumedCount(s); n != 0 {
			t.Errorf("%d assumed writes left once the watch caught up", n)
		}
	}
	t.Logf("races lost: %d and %d", a.ClaimStats().Races, b.ClaimStats().Races)
}

// Two claims of one service on one provider at the same moment, both
// planned from the same index state: the second waits for the first's
// answer, is not sent (it could only lose), and is planned again from
// the index, which has the first: no race lost, no read.
func TestConcurrentOwnClaimsOnOneProviderFollowEachOther(t *testing.T) {
	cli := etcdtest.Client(t)
	mkProvider(t, storeOnly(cli), "rp", "", map[string]etcdschema.Inventory{VCPU: inv(8)})
	s, _ := heldService(t, cli)
	entered, gate := make(chan struct{}, 1), make(chan struct{})
	s.claims = newClaimBatcher(&gatedKV{KV: cli.KV, entered: entered, gate: gate})
	g := &gatedBatcher{claimBatcher: s.claims}
	ctx := testCtx(t)
	claim := func(c string) <-chan error {
		out := make(chan error, 1)
		go func() {
			out <- s.PutAllocations(ctx, c, AllocationWrite{Allocations: alloc("rp", map[string]int64{VCPU: 3})})
		}()
		return out
	}
	first := claim("c1")
	select {
	case <-entered:
	case <-ctx.Done():
		t.Fatal("the first claim never went out")
	}
	second := claim("c2")
	g.waitPending(t, ctx, 1)
	close(gate)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := <-second; err != nil {
		t.Fatal(err)
	}
	st := s.ClaimStats()
	if st.Races != 0 || st.Replans != 1 || st.Txns != 2 {
		t.Fatalf("claim stats %+v, want no race, one replan, two transactions", st)
	}
	if got := indexedProvider(s, "rp"); got.used != 6 {
		t.Fatalf("index has %d VCPU used, want 6", got.used)
	}
	p, err := s.Provider(ctx, "rp")
	if err != nil || p.Usages[VCPU] != 6 {
		t.Fatalf("etcd has %v VCPU used (%v), want 6", p.Usages, err)
	}
}
