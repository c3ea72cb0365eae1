package servers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/quotas"
)

var tinyFlavor = etcdschema.Flavor{ID: "1", Name: "m1.tiny", VCPUs: 1, RAMMB: 512}

// countKeys is how many keys are under prefix.
func countKeys(t *testing.T, cli *clientv3.Client, prefix string) int64 {
	t.Helper()
	resp, err := cli.Get(context.Background(), prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	return resp.Count
}

// Two API processes (each its own servers and quotas Store, so its own
// batches and remembered fences) create in one project at once, many
// creates in flight in each, until the project's instances quota
// refuses them: exactly the limit is stored, never more, every refusal
// is Nova's, and the usage record is still at least the count. Without
// the shared fence comparison (two processes), or without charging
// each create of a share against the ones before it (one process), more
// than the limit would be stored.
func TestBatchedCreatesHoldTheLimit(t *testing.T) {
	ctx := context.Background()
	cli := etcdtest.Client(t)
	keys := etcdschema.New("/limit")
	const limit, perProcess = 60, 24
	var stores []*Store
	for range 2 {
		s := storeWithInstanceLimit(cli, keys, limit)
		stores = append(stores, s)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	created, refusals := 0, 0
	var failures []error
	for p, s := range stores {
		for c := range perProcess {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					count := 1 + (c+i)%3 // ones, twos and threes, all or nothing
					res, err := s.Create(ctx, CreateRequest{Name: fmt.Sprintf("p%d-c%d-%d", p, c, i), Count: count, MinCount: count,
						ProjectID: "p", UserID: "u", Flavor: tinyFlavor})
					var over *quotas.OverQuotaError
					mu.Lock()
					switch {
					case errors.As(err, &over):
						refusals++
					case err != nil:
						failures = append(failures, err)
					default:
						created += len(res.BuildRequests)
					}
					mu.Unlock()
					if err != nil {
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	for _, err := range failures {
		t.Errorf("create: %v", err)
	}
	if got := countKeys(t, cli, keys.BuildRequests()); got != int64(created) || got > limit {
		t.Errorf("%d build requests stored, %d creates answered stored; the limit is %d", got, created, limit)
	}
	// Every refusal comes from a count: the limit is reached but for
	// fewer servers than the smallest refused create (at most 2 left).
	if created < limit-2 {
		t.Errorf("%d servers stored, want at least %d of %d", created, limit-2, limit)
	}
	if refusals != 2*perProcess {
		t.Errorf("%d refusals, want one a client (%d)", refusals, 2*perProcess)
	}
	audit, err := stores[0].quotas.AuditUsage(ctx, "p")
	if err != nil {
		t.Fatal(err)
	}
	if below := audit.Below(); len(below) > 0 {
		t.Errorf("usage record below the count: %v", below)
	}
	batched := false
	for _, s := range stores {
		batches, creates := s.creates.batches, s.creates.creates
		t.Logf("%d creates in %d batches", creates, batches)
		batched = batched || creates > batches
	}
	if !batched {
		t.Error("no batch carried two creates: the test did not test batches")
	}
}

// One request stores several creates of a project under one fence
// write: each create stands or falls alone (a changed flavor fails only
// its own), the record is charged for all, and a create that does not
// fit the record goes alone (it counts).
func TestBatchShareCommitsEachCreateAlone(t *testing.T) {
	ctx := context.Background()
	cli := etcdtest.Client(t)
	keys := etcdschema.New("/share")
	s := storeWithInstanceLimit(cli, keys, 10)
	// The project's first create counts and leaves a record of 1.
	if _, err := s.Create(ctx, CreateRequest{Name: "first", Count: 1, ProjectID: "p", UserID: "u", Flavor: tinyFlavor}); err != nil {
		t.Fatal(err)
	}
	flavorKey := keys.Flavor("m1.tiny")
	put, err := cli.Put(ctx, flavorKey, "{}")
	if err != nil {
		t.Fatal(err)
	}
	checked := []CheckedRecord{{Key: flavorKey, ModRevision: put.Header.Revision}}
	stale := []CheckedRecord{{Key: flavorKey, ModRevision: put.Header.Revision - 1}}
	reqs := []struct {
		desc    string
		count   int
		checked []CheckedRecord
		want    createOutcome
	}{
		{desc: "fits", count: 3, checked: checked, want: createStored},
		{desc: "flavor changed", count: 2, checked: stale, want: createCmpsFailed},
		{desc: "fits after both", count: 4, checked: checked, want: createStored},
		{desc: "past the record", count: 1, checked: checked, want: createAlone},
	}
	var batch []*queuedCreate
	for _, r := range reqs {
		_, q := s.queuedCreate(ctx, CreateRequest{Name: r.desc, Count: r.count, ProjectID: "p", UserID: "u",
			Flavor: tinyFlavor, Checked: r.checked})
		batch = append(batch, q)
	}
	before := countKeys(t, cli, keys.BuildRequests())
	rev0 := put.Header.Revision
	if again := s.creates.sendBatch(ctx, s, batch); len(again) > 0 {
		t.Fatalf("%d creates to plan again, want none", len(again))
	}
	for i, r := range reqs {
		if batch[i].err != nil || batch[i].out != r.want {
			t.Errorf("%s: outcome %d (%v), want %d", r.desc, batch[i].out, batch[i].err, r.want)
		}
	}
	if got := countKeys(t, cli, keys.BuildRequests()) - before; got != 7 {
		t.Errorf("%d build requests stored, want 7 (3 + 4)", got)
	}
	resp, err := cli.Get(ctx, keys.QuotaFence("p"))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Header.Revision != rev0+1 {
		t.Errorf("the share took %d revisions, want 1", resp.Header.Revision-rev0)
	}
	var fence etcdschema.QuotaFence
	if err := etcdschema.Decode(keys.QuotaFence("p"), resp.Kvs[0].Value, &fence); err != nil {
		t.Fatal(err)
	}
	// 1 before, and the charges of the three admitted: the failed
	// create's 2 stay, as an upper bound may.
	if fence.Usage == nil || fence.Usage.Instances != 10 {
		t.Errorf("record %+v, want 10 instances", fence.Usage)
	}
}

// A process whose remembered fence went stale (another process created
// meanwhile) loses its share whole, learns the fence from the share's
// Else, and stores the creates in its next request without a read.
func TestBatchShareRefreshesAStaleFence(t *testing.T) {
	ctx := context.Background()
	cli := etcdtest.Client(t)
	keys := etcdschema.New("/stale")
	limits := quotas.Limits{quotas.Instances: 100, quotas.Cores: quotas.Unlimited, quotas.RAM: quotas.Unlimited}
	a, b := New(cli, keys, noAllocations{}, nil), New(cli, keys, noAllocations{}, nil)
	a.SetQuotas(quotas.New(cli, keys, limits, nil))
	b.SetQuotas(quotas.New(cli, keys, limits, nil))
	create := func(s *Store, name string) {
		t.Helper()
		if _, err := s.Create(ctx, CreateRequest{Name: name, Count: 1, ProjectID: "p", UserID: "u", Flavor: tinyFlavor}); err != nil {
			t.Fatal(err)
		}
	}
	create(a, "a-1") // counts
	create(a, "a-2") // a share: a remembers the fence it wrote
	create(b, "b-1") // moves the fence behind a's back
	_, q := a.queuedCreate(ctx, CreateRequest{Name: "a-3", Count: 1, ProjectID: "p", UserID: "u", Flavor: tinyFlavor})
	again := a.creates.sendBatch(ctx, a, []*queuedCreate{q})
	if len(again) != 1 {
		t.Fatalf("%d creates to plan again, want the stale share's one", len(again))
	}
	if again := a.creates.sendBatch(ctx, a, again); len(again) > 0 || q.out != createStored || q.err != nil {
		t.Fatalf("second send: %d to plan again, outcome %d (%v); want stored", len(again), q.out, q.err)
	}
	if got := countKeys(t, cli, keys.BuildRequests()); got != 4 {
		t.Errorf("%d build requests, want 4", got)
	}
	audit, err := a.quotas.AuditUsage(ctx, "p")
	if err != nil {
		t.Fatal(err)
	}
	if below := audit.Below(); len(below) > 0 {
		t.Errorf("usage record below the count: %v", below)
	}
}

// lossyKV sends transactions, and then loses the answer of the next
// loseNext ones (committed: true) or the request itself (false), as a
// connection cut at the wrong moment does.
type lossyKV struct {
	clientv3.KV
	mu        sync.Mutex
	loseNext  int
	committed bool
}

func (l *lossyKV) Txn(ctx context.Context) clientv3.Txn { return &lossyTxn{Txn: l.KV.Txn(ctx), kv: l} }

type lossyTxn struct {
	clientv3.Txn
	kv *lossyKV
}

func (t *lossyTxn) If(cs ...clientv3.Cmp) clientv3.Txn   { t.Txn = t.Txn.If(cs...); return t }
func (t *lossyTxn) Then(ops ...clientv3.Op) clientv3.Txn { t.Txn = t.Txn.Then(ops...); return t }
func (t *lossyTxn) Else(ops ...clientv3.Op) clientv3.Txn { t.Txn = t.Txn.Else(ops...); return t }
func (t *lossyTxn) Commit() (*clientv3.TxnResponse, error) {
	t.kv.mu.Lock()
	lose := t.kv.loseNext > 0
	if lose {
		t.kv.loseNext--
	}
	committed := t.kv.committed
	t.kv.mu.Unlock()
	if !lose {
		return t.Txn.Commit()
	}
	if committed {
		if _, err := t.Txn.Commit(); err != nil {
			return nil, err
		}
	}
	return nil, errors.New("connection reset: the answer was lost")
}

// A batch whose answer etcd lost: its creates are stored once, whether
// the batch had committed or not, and answered with the servers stored.
func TestBatchWithALostAnswerStoresOnce(t *testing.T) {
	ctx := context.Background()
	cli := etcdtest.Client(t)
	for _, committed := range []bool{true, false} {
		t.Run(fmt.Sprintf("committed %v", committed), func(t *testing.T) {
			keys := etcdschema.New(fmt.Sprintf("/lost-%v", committed))
			s := storeWithInstanceLimit(cli, keys, 10)
			// The first create counts, alone; the second is a share.
			if _, err := s.Create(ctx, CreateRequest{Name: "first", Count: 1, ProjectID: "p", UserID: "u", Flavor: tinyFlavor}); err != nil {
				t.Fatal(err)
			}
			s.creates.through = &lossyKV{KV: cli, loseNext: 1, committed: committed}
			res, err := s.Create(ctx, CreateRequest{Name: "web", Count: 3, ProjectID: "p", UserID: "u", Flavor: tinyFlavor})
			if err != nil {
				t.Fatal(err)
			}
			if got := countKeys(t, cli, keys.BuildRequests()); got != 4 {
				t.Errorf("%d build requests stored, want 4 (1 + 3, once)", got)
			}
			for _, br := range res.BuildRequests {
				if got := countKeys(t, cli, keys.BuildRequest(br.InstanceUUID)); got != 1 {
					t.Errorf("the answered server %s is not stored", br.InstanceUUID)
				}
			}
			audit, err := s.quotas.AuditUsage(ctx, "p")
			if err != nil {
				t.Fatal(err)
			}
			if below := audit.Below(); len(below) > 0 {
				t.Errorf("usage record below the count: %v", below)
			}
		})
	}
}

// Creates checked against the same flavor at the same revision share
// that comparison: it holds for all, or fails all (each is then told its
// flavor changed, and nothing, the fence included, is written).
func TestBatchShareComparesSharedChecksOnce(t *testing.T) {
	ctx := context.Background()
	cli := etcdtest.Client(t)
	keys := etcdschema.New("/hoist")
	s := storeWithInstanceLimit(cli, keys, quotas.Unlimited)
	flavorKey := keys.Flavor("m1.tiny")
	put, err := cli.Put(ctx, flavorKey, "{}")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		desc   string
		rev    int64
		want   createOutcome
		stored int64
	}{
		{desc: "as read", rev: put.Header.Revision, want: createStored, stored: 3},
		{desc: "changed since", rev: put.Header.Revision - 1, want: createCmpsFailed, stored: 0},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			var batch []*queuedCreate
			for i := range 3 {
				_, q := s.queuedCreate(ctx, CreateRequest{Name: fmt.Sprint(i), Count: 1, ProjectID: "p", UserID: "u",
					Flavor: tinyFlavor, Checked: []CheckedRecord{{Key: flavorKey, ModRevision: tc.rev}}})
				batch = append(batch, q)
			}
			before := countKeys(t, cli, keys.BuildRequests())
			fence0, err := cli.Get(ctx, keys.QuotaFence("p"))
			if err != nil {
				t.Fatal(err)
			}
			if again := s.creates.sendBatch(ctx, s, batch); len(again) > 0 {
				t.Fatalf("%d creates to plan again, want none", len(again))
			}
			for i, q := range batch {
				if q.err != nil || q.out != tc.want {
					t.Errorf("create %d: outcome %d (%v), want %d", i, q.out, q.err, tc.want)
				}
			}
			if got := countKeys(t, cli, keys.BuildRequests()) - before; got != tc.stored {
				t.Errorf("%d build requests stored, want %d", got, tc.stored)
			}
			fence, err := cli.Get(ctx, keys.QuotaFence("p"))
			if err != nil {
				t.Fatal(err)
			}
			if moved := len(fence.Kvs) != len(fence0.Kvs) || (len(fence.Kvs) == 1 && fence.Kvs[0].ModRevision != fence0.Kvs[0].ModRevision); moved != (tc.stored > 0) {
				t.Errorf("fence moved %v, want %v", moved, tc.stored > 0)
			}
		})
	}
}

// Creates of several projects in one request: a share each, each
// committing or failing on its own fence. Here one project's fence moved
// behind the process's back: its share is planned again, the others'
// creates are stored, all in one revision.
func TestBatchSharesOfSeveralProjects(t *testing.T) {
	ctx := context.Background()
	cli := etcdtest.Client(t)
	keys := etcdschema.New("/projects")
	limits := quotas.Limits{quotas.Instances: 100, quotas.Cores: quotas.Unlimited, quotas.RAM: quotas.Unlimited}
	a, b := New(cli, keys, noAllocations{}, nil), New(cli, keys, noAllocations{}, nil)
	a.SetQuotas(quotas.New(cli, keys, limits, nil))
	b.SetQuotas(quotas.New(cli, keys, limits, nil))
	create := func(s *Store, project string) {
		t.Helper()
		if _, err := s.Create(ctx, CreateRequest{Name: "x", Count: 1, ProjectID: project, UserID: "u", Flavor: tinyFlavor}); err != nil {
			t.Fatal(err)
		}
	}
	projects := []string{"p1", "p2", "p3"}
	for _, p := range projects {
		create(a, p) // counts
		create(a, p) // a share: a remembers the fence it wrote
	}
	create(b, "p2") // p2's fence moves behind a's back
	var batch []*queuedCreate
	for _, p := range projects {
		for range 2 {
			_, q := a.queuedCreate(ctx, CreateRequest{Name: "y", Count: 1, ProjectID: p, UserID: "u", Flavor: tinyFlavor})
			batch = append(batch, q)
		}
	}
	rev0, err := cli.Get(ctx, keys.QuotaFence("p1"))
	if err != nil {
		t.Fatal(err)
	}
	again := a.creates.sendBatch(ctx, a, batch)
	if len(again) != 2 || again[0].quota.Project != "p2" || again[1].quota.Project != "p2" {
		t.Fatalf("planned again: %d creates, want p2's two", len(again))
	}
	for _, q := range batch {
		if q.quota.Project != "p2" && (q.err != nil || q.out != createStored) {
			t.Errorf("%s: outcome %d (%v), want stored", q.quota.Project, q.out, q.err)
		}
	}
	after, err := cli.Get(ctx, keys.QuotaFence("p1"))
	if err != nil {
		t.Fatal(err)
	}
	if after.Header.Revision != rev0.Header.Revision+1 {
		t.Errorf("the batch took %d revisions, want 1", after.Header.Revision-rev0.Header.Revision)
	}
	if again := a.creates.sendBatch(ctx, a, again); len(again) > 0 {
		t.Fatalf("p2 planned again twice")
	}
	for _, p := range projects {
		if got, want := countKeys(t, cli, keys.QuotaInstances(p)), map[string]int64{"p2": 5}[p]; got != max(want, 4) {
			t.Errorf("%s: %d servers, want %d", p, got, max(want, 4))
		}
		audit, err := a.quotas.AuditUsage(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if below := audit.Below(); len(below) > 0 {
			t.Errorf("%s: usage record below the count: %v", p, below)
		}
	}
}

// Creates of a share checked against different flavors and one image:
// the image, which every create was checked against, is compared once
// for the share, each flavor by its own creates. A create fails exactly
// when a record it was checked against changed: a stale flavor fails its
// creates alone, a stale image every create (and nothing is written).
func TestBatchShareHoistsTheChecksEveryCreateMakes(t *testing.T) {
	ctx := context.Background()
	cli := etcdtest.Client(t)
	keys := etcdschema.New("/hoistsome")
	s := storeWithInstanceLimit(cli, keys, quotas.Unlimited)
	var revs []int64
	for _, k := range []string{keys.Flavor("m1.tiny"), keys.Flavor("m1.small"), keys.Image("img")} {
		put, err := cli.Put(ctx, k, "{}")
		if err != nil {
			t.Fatal(err)
		}
		revs = append(revs, put.Header.Revision)
	}
	tiny := CheckedRecord{Key: keys.Flavor("m1.tiny"), ModRevision: revs[0]}
	small := CheckedRecord{Key: keys.Flavor("m1.small"), ModRevision: revs[1]}
	image := CheckedRecord{Key: keys.Image("img"), ModRevision: revs[2]}
	stale := func(r CheckedRecord) CheckedRecord { r.ModRevision--; return r }
	for _, tc := range []struct {
		desc    string
		checked [][]CheckedRecord
		want    []createOutcome
	}{
		{desc: "as read", checked: [][]CheckedRecord{{tiny, image}, {small, image}, {tiny, image}},
			want: []createOutcome{createStored, createStored, createStored}},
		{desc: "a flavor changed", checked: [][]CheckedRecord{{tiny, image}, {stale(small), image}, {tiny, image}},
			want: []createOutcome{createStored, createCmpsFailed, createStored}},
		{desc: "the image changed", checked: [][]CheckedRecord{{tiny, stale(image)}, {small, stale(image)}},
			want: []createOutcome{createCmpsFailed, createCmpsFailed}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			var batch []*queuedCreate
			for i, checked := range tc.checked {
				_, q := s.queuedCreate(ctx, CreateRequest{Name: fmt.Sprint(i), Count: 1, ProjectID: "p", UserID: "u",
					Flavor: tinyFlavor, Checked: checked})
				batch = append(batch, q)
			}
			common, own := hoistChecks(batch)
			if len(common) != 1 || string(common[0].Key) != image.Key {
				t.Errorf("the share compares %v, want the image alone", common)
			}
			for i, cmps := range own {
				if len(cmps) != 1 || string(cmps[0].Key) != tc.checked[i][0].Key {
					t.Errorf("create %d compares %v, want its flavor alone", i, cmps)
				}
			}
			before := countKeys(t, cli, keys.BuildRequests())
			if again := s.creates.sendBatch(ctx, s, batch); len(again) > 0 {
				t.Fatalf("%d creates to plan again, want none", len(again))
			}
			stored := int64(0)
			for i, q := range batch {
				if q.err != nil || q.out != tc.want[i] {
					t.Errorf("create %d: outcome %d (%v), want %d", i, q.out, q.err, tc.want[i])
				}
				if tc.want[i] == createStored {
					stored++
				}
			}
			if got := countKeys(t, cli, keys.BuildRequests()) - before; got != stored {
				t.Errorf("%d build requests stored, want %d", got, stored)
			}
		})
	}
}

// hoistChecks hoists a group the creates share with the records, keeps
// a group or record some creates lack their own, and hoists nothing when
// nothing is common.
func TestHoistChecksSplitsGroupsAndRecords(t *testing.T) {
	keys := etcdschema.New("/split")
	s := New(nil, keys, noAllocations{}, nil)
	a := CheckedRecord{Key: "/a", ModRevision: 3}
	b := CheckedRecord{Key: "/b", ModRevision: 4}
	queued := func(group string, checked ...CheckedRecord) *queuedCreate {
		req := CreateRequest{Name: "x", Count: 1, ProjectID: "p", UserID: "u", Flavor: tinyFlavor, Checked: checked}
		req.Hints.Group = group
		return &queuedCreate{cmps: s.partCompares(req, true), checked: checked, group: group}
	}
	keysOf := func(cmps []*etcdserverpb.Compare) (out []string) {
		for _, c := range cmps {
			out = append(out, string(c.Key))
		}
		return out
	}
	g1 := keys.ServerGroup("g1")
	for _, tc := range []struct {
		desc   string
		qs     []*queuedCreate
		common []string
		own    [][]string
	}{
		{desc: "all the same", qs: []*queuedCreate{queued("g1", a, b), queued("g1", a, b)},
			common: []string{g1, "/a", "/b"}, own: [][]string{nil, nil}},
		{desc: "groups differ", qs: []*queuedCreate{queued("g1", a), queued("", a)},
			common: []string{"/a"}, own: [][]string{{g1}, nil}},
		{desc: "a record at another revision", qs: []*queuedCreate{queued("", a, b), queued("", CheckedRecord{Key: "/a", ModRevision: 2}, b)},
			common: []string{"/b"}, own: [][]string{{"/a"}, {"/a"}}},
		{desc: "nothing common", qs: []*queuedCreate{queued("", a), queued("", b)},
			common: nil, own: [][]string{{"/a"}, {"/b"}}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			common, own := hoistChecks(tc.qs)
			if got := keysOf(common); !slices.Equal(got, tc.common) {
				t.Errorf("common %v, want %v", got, tc.common)
			}
			for i := range tc.qs {
				if got := keysOf(own[i]); !slices.Equal(got, tc.own[i]) {
					t.Errorf("create %d's own %v, want %v", i, got, tc.own[i])
				}
			}
		})
	}
}

// BenchmarkBatchedCreatesMixedFlavors sends batches of 32 creates of one
// project checked against four flavors and one image, as the load tool's
// are (sendBatch, the embedded etcd's apply included in B/op and
// allocs/op): the image compared once a share, each flavor by its own
// creates.
//
//	go test -run XXX -bench BatchedCreatesMixedFlavors -benchmem -count 5 ./servers/
func BenchmarkBatchedCreatesMixedFlavors(b *testing.B) {
	ctx := context.Background()
	cli := etcdtest.Client(b)
	keys := etcdschema.New("/mixed")
	s := storeWithInstanceLimit(cli, keys, quotas.Unlimited)
	var checked [][]CheckedRecord
	image, err := cli.Put(ctx, keys.Image("img"), `{"name":"bench-image","disk_format":"raw","min_disk":0}`)
	if err != nil {
		b.Fatal(err)
	}
	for _, f := range []string{"m1.tiny", "m1.small", "m1.medium", "m1.large"} {
		put, err := cli.Put(ctx, keys.Flavor(f), `{"name":"`+f+`","vcpus":1,"ram":512,"disk":1}`)
		if err != nil {
			b.Fatal(err)
		}
		checked = append(checked, []CheckedRecord{{Key: keys.Flavor(f), ModRevision: put.Header.Revision},
			{Key: keys.Image("img"), ModRevision: image.Header.Revision}})
	}
	const perBatch = 32
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		batch := make([]*queuedCreate, perBatch)
		for i := range batch {
			_, batch[i] = s.queuedCreate(ctx, CreateRequest{Name: fmt.Sprint(n), Count: 1, ProjectID: "p", UserID: "u",
				Flavor: tinyFlavor, Checked: checked[n%len(checked)]})
			n++
		}
		if again := s.creates.sendBatch(ctx, s, batch); len(again) > 0 {
			b.Fatalf("%d creates to plan again", len(again))
		}
		for _, q := range batch {
			if q.err != nil || q.out != createStored {
				b.Fatalf("outcome %d (%v)", q.out, q.err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*perBatch), "ns/create")
}

// storeWithInstanceLimit is a store whose quotas limit only the number
// of instances (limit may be quotas.Unlimited).
func storeWithInstanceLimit(cli *clientv3.Client, keys etcdschema.Keys, limit int64) *Store {
	s := New(cli, keys, noAllocations{}, nil)
	s.SetQuotas(quotas.New(cli, keys, quotas.Limits{quotas.Instances: limit, quotas.Cores: quotas.Unlimited,
		quotas.RAM: quotas.Unlimited}, nil))
	return s
}
