package quotas

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/etcdschema/records"
	"github.com/berth-project/berth/internal/etcdtest"
)

// recordWorld is a project's servers written as the API, the
// superconductor and the agents write them, for the usage record's
// tests.
type recordWorld struct {
	t    *testing.T
	cli  *clientv3.Client
	keys etcdschema.Keys
	s    *Store
	n    int
}

func newRecordWorld(t *testing.T, limits Limits) *recordWorld {
	cli := etcdtest.Client(t)
	keys := etcdschema.New("/qr")
	return &recordWorld{t: t, cli: cli, keys: keys, s: New(cli, keys, limits, nil)}
}

var twoCores = etcdschema.Flavor{Name: "c2", VCPUs: 2, RAMMB: 512}

// create is servers.Create's quota part: check min..max servers of
// flavor, commit their mappings, index entries and build requests under
// the guard, again while the guard fails. It returns the servers made
// and whether the check read the record (no count).
func (w *recordWorld) create(min, max int, flavor etcdschema.Flavor) ([]string, bool, error) {
	w.t.Helper()
	ctx := context.Background()
	for {
		n, g, err := w.s.ReserveServers(ctx, ServerRequest{Project: "p", User: "u", Min: min, Max: max,
			VCPUs: int64(flavor.VCPUs), RAMMB: int64(flavor.RAMMB)})
		if err != nil {
			return nil, false, err
		}
		var ops []clientv3.Op
		var made []string
		for range n {
			w.n++
			uuid := fmt.Sprintf("00000000-0000-4000-8000-%012d", w.n)
			made = append(made, uuid)
			ops = append(ops,
				clientv3.OpPut(w.keys.InstanceMapping(uuid), etcdschema.MustEncode(&etcdschema.InstanceMapping{InstanceUUID: uuid, ProjectID: "p"})),
				clientv3.OpPut(w.keys.QuotaInstance("p", uuid), etcdschema.MustEncode(&etcdschema.QuotaInstance{})),
				clientv3.OpPut(w.keys.BuildRequest(uuid), etcdschema.MustEncode(&etcdschema.BuildRequest{InstanceUUID: uuid,
					ProjectID: "p", UserID: "u", Flavor: flavor})))
		}
		resp, err := w.cli.Txn(ctx).If(g.Cmps...).Then(append(ops, g.Ops...)...).Commit()
		if err != nil {
			w.t.Fatal(err)
		}
		if resp.Succeeded {
			return made, fromRecord(g), nil
		}
	}
}

// fromRecord says whether g was made from the usage record (its fence
// comparison is an equality on the mod revision read) rather than from
// a count (an upper bound on it).
func fromRecord(g Guard) bool {
	return len(g.Cmps) > 0 && g.Cmps[0].GetCompare().Result == etcdserverpb.Compare_EQUAL
}

// place is the superconductor's hand-over and the claim: the build
// request becomes an ACTIVE instance in cell1 whose consumer holds its
// flavor.
func (w *recordWorld) place(uuid string, flavor etcdschema.Flavor) {
	w.t.Helper()
	ops := append(seedPlacedOps(w.keys, uuid, "p", flavor), clientv3.OpDelete(w.keys.BuildRequest(uuid)))
	if _, err := w.cli.Txn(context.Background()).Then(ops...).Commit(); err != nil {
		w.t.Fatal(err)
	}
}

// remove is a placed server's delete, done: its records and its
// consumer gone.
func (w *recordWorld) remove(uuid string) {
	w.t.Helper()
	ops := append(records.DeleteInstance(w.keys, "cell1", "compute-1", uuid, "p"), clientv3.OpDelete(w.keys.Consumer(uuid)))
	if _, err := w.cli.Txn(context.Background()).Then(ops...).Commit(); err != nil {
		w.t.Fatal(err)
	}
}

// audit fails the test when the record is below the count, and returns
// both.
func (w *recordWorld) audit(step string) UsageAudit {
	w.t.Helper()
	a, err := w.s.AuditUsage(context.Background(), "p")
	if err != nil {
		w.t.Fatal(err)
	}
	if below := a.Below(); len(below) > 0 {
		w.t.Fatalf("%s: the usage record is below the count: %v", step, below)
	}
	return a
}

// TestRecordAnswersAsTheCount follows a project through creates, claims,
// deletes and a move: a check that fits the record reads no count and
// answers what a count answers; one that does not counts, answers from
// the count (a range cut to the room, Nova's words), and sets the record
// back to the count; at every step the record is at least the count.
func TestRecordAnswersAsTheCount(t *testing.T) {
	w := newRecordWorld(t, Limits{Instances: 4, Cores: 6, RAM: -1})
	ctx := context.Background()

	a, recorded, err := w.create(1, 1, twoCores)
	if err != nil || recorded {
		t.Fatalf("the first create: %v, from the record %v; want a count (no record yet)", err, recorded)
	}
	if got := w.audit("first create"); got.Recorded == nil || *got.Recorded != got.Counted {
		t.Fatalf("the first create's record %+v, want the count %+v", got.Recorded, got.Counted)
	}
	b, recorded, err := w.create(1, 1, twoCores)
	if err != nil || !recorded {
		t.Fatalf("the second create: %v, from the record %v; want it from the record", err, recorded)
	}
	w.audit("second create")
	// Two more would pass the cores: the record cannot say, the count
	// cuts the range to one.
	c, recorded, err := w.create(1, 2, twoCores)
	if err != nil || recorded || len(c) != 1 {
		t.Fatalf("a range at the limit: %d servers, %v, from the record %v; want 1 from a count", len(c), err, recorded)
	}
	w.audit("range cut")
	_, _, err = w.create(1, 1, twoCores)
	var over *OverQuotaError
	if !errors.As(err, &over) || over.Message != "Quota exceeded for cores: Requested 2, but already used 6 of 6 cores" {
		t.Fatalf("a create over the cores: %v", err)
	}

	for _, uuid := range []string{a[0], b[0], c[0]} {
		w.place(uuid, twoCores)
	}
	w.audit("claimed")
	w.remove(b[0])
	drift := w.audit("deleted")
	if drift.Recorded.Cores != 6 || drift.Counted.Cores != 4 {
		t.Fatalf("after a delete: record %+v, count %+v; want the record left at 6 cores, the count at 4",
			drift.Recorded, drift.Counted)
	}
	// The record says 6 of 6: the check counts, finds room, and the
	// record is the count again.
	d, recorded, err := w.create(1, 1, twoCores)
	if err != nil || recorded {
		t.Fatalf("a create into the room a delete freed: %v, from the record %v", err, recorded)
	}
	if got := w.audit("after the delete"); *got.Recorded != got.Counted {
		t.Fatalf("the record after a counted create %+v, want the count %+v", got.Recorded, got.Counted)
	}
	w.place(d[0], twoCores)

	// A cold migration holds the flavor twice while in flight: no check
	// (not an upsize), but its guard charges the record, which stays
	// at least the count that now adds the migration.
	if _, err := w.s.Update(ctx, "p", "", Limits{Cores: 20}, nil); err != nil {
		t.Fatal(err)
	}
	g, err := w.s.ReserveMove(ctx, MoveRequest{Project: "p", User: "u", HeldCores: 2, HeldRAMMB: 512})
	if err != nil || !fromRecord(g) {
		t.Fatalf("a migration's guard: %+v, %v; want one on the record", g, err)
	}
	in := &etcdschema.Instance{UUID: a[0], Status: etcdschema.StatusActive, TaskState: etcdschema.TaskResizePrep,
		Cell: "cell1", Host: "compute-1", Flavor: twoCores.Embedded(), ProjectID: "p", UserID: "u", MigrationUUID: "m"}
	mig := &etcdschema.Migration{UUID: "m", InstanceUUID: a[0], Cell: "cell1", OldFlavor: twoCores.Embedded(),
		NewFlavor: twoCores.Embedded(), Status: etcdschema.MigrationPreMigrating}
	ops := append(g.Ops, clientv3.OpPut(w.keys.CellInstance("cell1", a[0]), etcdschema.MustEncode(in)),
		clientv3.OpPut(w.keys.Migration("cell1", "m"), etcdschema.MustEncode(mig)))
	if resp, err := w.cli.Txn(ctx).If(g.Cmps...).Then(ops...).Commit(); err != nil || !resp.Succeeded {
		t.Fatalf("the migration's commit: %v", err)
	}
	if got := w.audit("migration in flight"); got.Counted.Cores != 8 || got.Recorded.Cores != 8 {
		t.Fatalf("a migration in flight: record %+v, count %+v; want 8 cores both", got.Recorded, got.Counted)
	}
	// An upsize that fits the record is checked from it.
	g, err = w.s.ReserveMove(ctx, MoveRequest{Project: "p", User: "u", Cores: 2, HeldCores: 4})
	if err != nil || !fromRecord(g) {
		t.Fatalf("an upsize within the record: %+v, %v", g, err)
	}
	// One past the limit is refused from a count, in the count's figures.
	if _, err := w.s.Update(ctx, "p", "", Limits{Cores: 9}, nil); err != nil {
		t.Fatal(err)
	}
	_, err = w.s.ReserveMove(ctx, MoveRequest{Project: "p", User: "u", Cores: 2, HeldCores: 4})
	if !errors.As(err, &over) || over.Message != "Quota exceeded for cores: Requested 2, but already used 8 of 9 cores" {
		t.Fatalf("an upsize past the limit: %v", err)
	}
}

// TestRecordKeepsConcurrentCreatesWithinTheLimit: creates racing from
// the record (each comparing the fence's mod revision it read) never
// pass the limit together; the losers check again.
func TestRecordKeepsConcurrentCreatesWithinTheLimit(t *testing.T) {
	const limit, workers, each = 10, 6, 4
	w := newRecordWorld(t, Limits{Instances: limit, Cores: -1, RAM: -1})
	if _, _, err := w.create(1, 1, twoCores); err != nil { // the record
		t.Fatal(err)
	}
	var mu sync.Mutex
	made, refused := 1, 0
	var wg sync.WaitGroup
	for i := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ww := &recordWorld{t: t, cli: w.cli, keys: w.keys, s: w.s, n: 1000 * (i + 1)}
			for range each {
				_, _, err := ww.create(1, 1, twoCores)
				mu.Lock()
				if err != nil {
					refused++
				} else {
					made++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	a := w.audit("racing creates")
	if made != limit || refused != workers*each+1-limit || a.Counted.Instances != limit {
		t.Errorf("%d made, %d refused, %d counted; want %d made and counted", made, refused, a.Counted.Instances, limit)
	}
}

// TestRecordKeptByNoOne: a create nothing limits writes the fence without
// a record (and moves it, so a check that counted before it counts
// again); so does an older Berth's create; the next limited check counts
// and sets it again.
func TestRecordKeptByNoOne(t *testing.T) {
	w := newRecordWorld(t, Limits{Instances: -1, Cores: -1, RAM: -1})
	ctx := context.Background()
	if _, _, err := w.create(1, 1, twoCores); err != nil {
		t.Fatal(err)
	}
	if a := w.audit("unlimited create"); a.Recorded != nil {
		t.Fatalf("an unlimited create left a record %+v", a.Recorded)
	}
	if _, err := w.s.Update(ctx, "p", "", Limits{Instances: 5}, nil); err != nil {
		t.Fatal(err)
	}
	if _, recorded, err := w.create(1, 1, twoCores); err != nil || recorded {
		t.Fatalf("the first limited create: %v, from the record %v; want a count", err, recorded)
	}
	if a := w.audit("limited create"); a.Recorded == nil || a.Recorded.Instances != 2 {
		t.Fatalf("the limited create's record %+v, want 2 instances", a.Recorded)
	}
	// An older Berth's create: the fence without a record.
	if _, err := w.cli.Put(ctx, w.keys.QuotaFence("p"), etcdschema.MustEncode(&etcdschema.QuotaFence{})); err != nil {
		t.Fatal(err)
	}
	if _, recorded, err := w.create(1, 1, twoCores); err != nil || recorded {
		t.Fatalf("after an older Berth's create: %v, from the record %v; want a count", err, recorded)
	}
	// A record below the count (a write that did not charge it) is
	// found, and set back to the count.
	low := &etcdschema.QuotaFence{Indexed: true, Usage: &etcdschema.QuotaUsage{Instances: 1}}
	if _, err := w.cli.Put(ctx, w.keys.QuotaFence("p"), etcdschema.MustEncode(low)); err != nil {
		t.Fatal(err)
	}
	a, err := w.s.AuditUsage(ctx, "p")
	if err != nil || len(a.Below()) == 0 {
		t.Fatalf("a record below the count: %+v, %v; want it found", a, err)
	}
	if ok, err := w.s.RepairUsage(ctx, "p", "test"); err != nil || !ok {
		t.Fatalf("repair: %v %v", ok, err)
	}
	if a := w.audit("repaired"); *a.Recorded != a.Counted {
		t.Fatalf("after the repair: record %+v, count %+v", a.Recorded, a.Counted)
	}
}
