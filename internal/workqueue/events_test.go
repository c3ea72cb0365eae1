package workqueue

import (
	"container/heap"
	"fmt"
	"iter"
	"slices"
	"testing"
	"time"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/informer"
)

// The cases below feed the queue's watch handlers the events etcd would
// send, as the follow benchmark does, and take ids off the work channel as
// a worker would; what needs etcd (a lease transaction) is stood in for by
// the transition it ends in. They check the subtle orders of events the
// records must survive.

// events drives an offline queue over /q/.
type events struct {
	t        *testing.T
	q        *Queue
	missteps *[]string
	rev      int64
}

func newEvents(t *testing.T, c Config) *events {
	q, missteps := offlineQueue(t, c)
	e := &events{t: t, q: q, missteps: missteps}
	t.Cleanup(func() {
		if len(*missteps) > 0 {
			t.Errorf("missteps: %q", *missteps)
		}
	})
	return e
}

func (e *events) item(id string, deleted bool) {
	e.rev++
	itemHandler{e.q}.Apply([]informer.Event{{Key: e.q.itemPrefix + id, Value: []byte("{}"), Revision: e.rev, Deleted: deleted}})
}

// lease puts (or deletes) id's lease key, written by the holder whose
// session lease is leaseID (0: a value that names none).
func (e *events) lease(id string, leaseID int64, deleted bool) {
	e.rev++
	var val []byte
	if leaseID != 0 {
		val = []byte(etcdschema.MustEncode(&etcdschema.Lease{Holder: "other", LeaseID: leaseID, Since: time.Now().UTC()}))
	}
	leaseHandler{e.q}.Apply([]informer.Event{{Key: e.q.leasePrefix + id, Value: val, Revision: e.rev, Deleted: deleted}})
}

// phase is id's phase, "gone" when it has no record.
func (e *events) phase(id string) string {
	e.q.mu.Lock()
	defer e.q.mu.Unlock()
	if r, ok := e.q.recs[id]; ok {
		return r.phase.String()
	}
	return "gone"
}

func (e *events) wantPhase(id, want string) {
	e.t.Helper()
	if got := e.phase(id); got != want {
		e.t.Fatalf("item %s is %s, want %s", id, got, want)
	}
}

// offered drains the work channel as workers would take ids off it, and
// returns the ids, without taking them (their records stay queued).
func (e *events) offered() []string {
	var ids []string
	for len(e.q.work) > 0 {
		ids = append(ids, <-e.q.work)
	}
	return ids
}

// leaseWon stands in for TryAcquire winning: the worker took id off the
// channel, its lease transaction succeeded, and the lease watch shows it.
func (e *events) leaseWon(id string) Item {
	e.t.Helper()
	if !e.q.dequeue(id) {
		e.t.Fatalf("the worker would not try %s (phase %s)", id, e.phase(id))
	}
	e.q.mu.Lock()
	r := e.q.recs[id]
	e.q.fly(r)
	it := r.item
	e.q.mu.Unlock()
	e.lease(id, 0, false)
	return it
}

func TestItemDeletedWhileInFlight(t *testing.T) {
	for _, tc := range []struct {
		desc       string
		doneFirst  bool // Done before the item watch shows the deletion
		wantOnDone string
	}{
		{"deletion seen before Done", false, "gone"},
		{"Done before the deletion is seen", true, "finished"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			e := newEvents(t, Config{})
			e.item("a", false)
			if got := e.offered(); !slices.Equal(got, []string{"a"}) {
				t.Fatalf("offered %q", got)
			}
			it := e.leaseWon("a")
			e.wantPhase("a", "in flight")
			if tc.doneFirst {
				e.q.Done(it)
				e.wantPhase("a", tc.wantOnDone)
				// Our final transaction deleted both keys; the lease's
				// deletion may be seen first, and must not offer it.
				e.lease("a", 0, true)
				e.wantPhase("a", "finished")
				e.item("a", true)
			} else {
				// Someone deleted it under us (or our final transaction's
				// item event came first): it stays ours until Done.
				e.item("a", true)
				e.wantPhase("a", "in flight")
				if p := e.q.Pending(); len(p) != 0 {
					t.Fatalf("Pending lists %d items, want none", len(p))
				}
				e.lease("a", 0, true)
				e.wantPhase("a", "in flight")
				e.q.Done(it)
			}
			e.wantPhase("a", "gone")
			if got := e.offered(); len(got) != 0 {
				t.Fatalf("offered %q after the item was finished", got)
			}
		})
	}
}

// rankedEvents is an offline queue with three registered holders, itself
// the first, and the ids found for each rank of ours.
func rankedEvents(t *testing.T, c Config) (*events, []int64, map[int]string) {
	keys := etcdschema.New("/berth")
	c.ItemPrefix, c.LeasePrefix, c.LeaseKey = keys.BuildRequests(), keys.BuildRequestLeases(), keys.BuildRequestLease
	c.HolderPrefix, c.HolderKey = keys.BuildRequestHolders(), keys.BuildRequestHolder
	e := newEvents(t, c)
	leaseIDs := holdFirstOfThree(e.q, keys)
	ids := map[int]string{}
	for n := 0; len(ids) < 3; n++ {
		id := fmt.Sprintf("6a0c9b1e-0000-4000-8000-%012d", n)
		if r := e.q.rankLocked(id); ids[r] == "" {
			ids[r] = id
		}
	}
	return e, leaseIDs, ids
}

// firstFor is the session lease of the holder ranked first for id.
func firstFor(q *Queue, leaseIDs []int64, id string) int64 {
	first := q.firstRankedLocked(id)
	for _, l := range leaseIDs {
		if fmt.Sprintf("%x", l) == first {
			return l
		}
	}
	panic("no holder ranks first for " + id)
}

func TestLeaseKeyVanishingWhileWaiting(t *testing.T) {
	const grace, idle = time.Second, 4 * time.Second
	t.Run("before its time: it keeps its time and its age", func(t *testing.T) {
		e, leaseIDs, ids := rankedEvents(t, Config{Grace: grace, IdleAfter: idle})
		id := ids[1]
		e.item(id, false)
		e.wantPhase(id, "waiting")
		r := e.q.recs[id]
		due, since := r.due, r.since
		e.lease(id, firstFor(e.q, leaseIDs, id), false) // its owner leased it
		e.wantPhase(id, "waiting")
		e.lease(id, 0, true) // and died, or gave it back
		e.wantPhase(id, "waiting")
		if !r.due.Equal(due) || !r.since.Equal(since) {
			t.Fatalf("due %v since %v, was %v %v", r.due, r.since, due, since)
		}
		// At its time the owner, which leased within the idle window,
		// still counts as working: it waits out that window, then is ours.
		e.q.offerDueLocked(due, nil)
		e.wantPhase(id, "waiting")
		if !r.due.After(due) {
			t.Fatalf("not set a new time: due %v", r.due)
		}
		e.q.offerDueLocked(r.due, nil)
		e.wantPhase(id, "queued")
		if got := e.offered(); !slices.Equal(got, []string{id}) {
			t.Fatalf("offered %q", got)
		}
	})
	t.Run("after its time passed while leased: it waits afresh", func(t *testing.T) {
		e, _, ids := rankedEvents(t, Config{Grace: grace, IdleAfter: idle})
		id := ids[2]
		e.item(id, false)
		r := e.q.recs[id]
		due := r.due
		e.lease(id, 0, false)
		e.q.offerDueLocked(due, nil) // leased at its time: dropped
		e.wantPhase(id, "pending")
		if e.q.delayed.Len() != 0 {
			t.Fatalf("%d heap entries left", e.q.delayed.Len())
		}
		e.lease(id, 0, true)
		e.wantPhase(id, "waiting")
		if !r.due.After(due) {
			t.Fatalf("waits until %v, not after the first time %v", r.due, due)
		}
	})
	t.Run("the item gone with it: nothing left", func(t *testing.T) {
		e, _, ids := rankedEvents(t, Config{Grace: grace, IdleAfter: idle})
		id := ids[1]
		e.item(id, false)
		e.lease(id, 0, false)
		e.item(id, true) // a holder's final transaction: item first ...
		e.wantPhase(id, "pending")
		e.lease(id, 0, true) // ... then its lease key
		e.wantPhase(id, "gone")
		e.q.offerDueLocked(time.Now().Add(time.Hour), nil)
		if len(e.q.recs) != 0 || len(e.q.work) != 0 {
			t.Fatalf("%d records, %d offered", len(e.q.recs), len(e.q.work))
		}
	})
}

func TestReofferAfterAHolderLeaves(t *testing.T) {
	e, leaseIDs, ids := rankedEvents(t, Config{Grace: time.Hour, IdleAfter: time.Hour})
	second, third := ids[1], ids[2]
	e.item(second, false)
	e.item(third, false)
	e.wantPhase(second, "waiting")
	e.wantPhase(third, "waiting")
	thirdDue := e.q.recs[third].due
	// The holder ranked first for the second-ranked id stops: that id is
	// ours at once, the other keeps its wait unless it is ours now too.
	gone := fmt.Sprintf("%x", firstFor(e.q, leaseIDs, second))
	e.rev++
	holderHandler{e.q}.Apply([]informer.Event{{Key: e.q.holderKey(gone), Deleted: true, Revision: e.rev}})
	e.wantPhase(second, "queued")
	if got := e.offered(); !slices.Contains(got, second) {
		t.Fatalf("offered %q, want %s among them", got, second)
	}
	if e.q.rankLocked(third) > 0 {
		e.wantPhase(third, "waiting")
		if !e.q.recs[third].due.Equal(thirdDue) {
			t.Fatalf("the still-waiting id was set a new time")
		}
	} else {
		e.wantPhase(third, "queued")
	}
}

func TestDeferredItemsWakeOnAnyDeletion(t *testing.T) {
	// b leaves itself to a's holder while a exists, as a multi-create's
	// later sibling does.
	e := newEvents(t, Config{Defer: func(it Item, all iter.Seq[Item]) bool {
		if it.ID != "b" {
			return false
		}
		for o := range all {
			if o.ID == "a" {
				return true
			}
		}
		return false
	}})
	e.item("a", false)
	e.item("b", false)
	e.item("c", false)
	if got := e.offered(); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("offered %q", got)
	}
	if e.q.dequeue("b") {
		t.Fatal("the worker would try b while a exists")
	}
	e.wantPhase("b", "deferred")
	// c's deletion wakes b too; a still exists, so the worker parks it again.
	e.item("c", true)
	e.wantPhase("b", "queued")
	if e.q.dequeue(<-e.q.work) {
		t.Fatal("the worker would try b while a exists")
	}
	e.wantPhase("b", "deferred")
	a := e.leaseWon("a")
	e.q.Done(a)
	e.item("a", true)
	e.wantPhase("b", "queued")
	if !e.q.dequeue(<-e.q.work) {
		t.Fatal("the worker would not try b once a is gone")
	}
	// Deleted while deferred, it goes.
	e.q.mu.Lock()
	e.q.park(e.q.recs["b"])
	e.q.mu.Unlock()
	e.item("b", true)
	e.wantPhase("b", "gone")
	if len(e.q.parked) != 0 {
		t.Fatalf("deferred index holds %d", len(e.q.parked))
	}
}

// TestSiblingTakenWhileQueued: TryAcquireMany leases a sibling whose id
// is on the work channel; the worker that takes the id skips it.
func TestSiblingTakenWhileQueued(t *testing.T) {
	e := newEvents(t, Config{})
	e.item("s", false)
	e.q.mu.Lock()
	e.q.fly(e.q.recs["s"]) // what TryAcquireMany does
	e.q.mu.Unlock()
	if e.q.dequeue(<-e.q.work) {
		t.Fatal("the worker would try an item already in flight")
	}
	e.wantPhase("s", "in flight")
}

// TestLostHandOffReleasedThenDone: the superconductor releases an item
// whose hand-off lost, then reports it done (or releases it again); Done
// guards it as finished, wherever it stands by then, until its deletion
// or a sweep, as before the records; a second Release changes nothing.
func TestLostHandOffReleasedThenDone(t *testing.T) {
	for _, tc := range []struct {
		desc          string
		leaseGoneSeen bool // the release's lease deletion reaches the watch before Done
	}{
		{"Done before the lease key's deletion is seen", false},
		{"Done after it offered the item again", true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			e := newEvents(t, Config{})
			e.item("h", false)
			it := e.leaseWon(<-e.q.work)
			e.q.released(it.ID) // Release, less its etcd transaction
			e.wantPhase("h", "pending")
			if tc.leaseGoneSeen {
				e.lease("h", 0, true)
				e.wantPhase("h", "queued")
				e.q.released(it.ID) // released again, as the worker does
				e.wantPhase("h", "queued")
			}
			e.q.Done(it)
			e.wantPhase("h", "finished")
			e.lease("h", 0, true)
			for _, id := range e.offered() {
				if e.q.dequeue(id) {
					t.Fatalf("the worker would try %s after Done", id)
				}
			}
			e.wantPhase("h", "finished")
			e.q.mu.Lock()
			e.q.sweepLocked()
			e.q.mu.Unlock()
			e.wantPhase("h", "queued")
		})
	}
}

// TestLeaseSeenBeforeItsItem: the two watches are separate streams; a
// lease key seen before its item keeps the item from being offered.
func TestLeaseSeenBeforeItsItem(t *testing.T) {
	e := newEvents(t, Config{})
	e.lease("l", 0, false)
	e.item("l", false)
	e.wantPhase("l", "pending")
	if len(e.q.Pending()) != 0 {
		t.Fatal("Pending lists a leased item")
	}
	e.lease("l", 0, true)
	e.wantPhase("l", "queued")
}

// TestOverflowDropsWhatWasLeasedMeanwhile: ids offered past the work
// channel's buffer wait in the overflow; one leased meanwhile is
// retracted when its turn to move in comes, not handed to a worker.
func TestOverflowDropsWhatWasLeasedMeanwhile(t *testing.T) {
	e := newEvents(t, Config{})
	n := cap(e.q.work) + 2
	for i := range n {
		e.item(fmt.Sprintf("%05d", i), false)
	}
	if len(e.q.overflow) != 2 {
		t.Fatalf("overflow holds %d, want 2", len(e.q.overflow))
	}
	leased, next := fmt.Sprintf("%05d", n-2), fmt.Sprintf("%05d", n-1)
	e.lease(leased, 0, false)
	e.q.dequeue(<-e.q.work)
	e.wantPhase(leased, "pending")
	e.wantPhase(next, "queued")
	if len(e.q.overflow) != 0 || len(e.q.work) != cap(e.q.work) {
		t.Fatalf("overflow %d, work %d", len(e.q.overflow), len(e.q.work))
	}
}

// TestRelistingForgetsAndDrops: a re-listing of the items (after a watch
// was lost) ends our finished guards and drops records of items that
// vanished meanwhile.
func TestRelistingForgetsAndDrops(t *testing.T) {
	e := newEvents(t, Config{})
	e.item("kept", false)
	e.item("vanished", false)
	e.item("done", false)
	e.offered()
	e.q.Done(e.leaseWon("done"))
	e.lease("done", 0, true)
	for _, id := range []string{"kept", "vanished"} {
		e.q.dequeue(id)
	}
	e.wantPhase("done", "finished")
	itemHandler{e.q}.Reset([]informer.Event{
		{Key: e.q.itemPrefix + "kept", Value: []byte("{}"), Revision: 9},
		{Key: e.q.itemPrefix + "done", Value: []byte("{}"), Revision: 9},
	}, 9)
	e.wantPhase("vanished", "gone")
	e.wantPhase("done", "queued")
	e.wantPhase("kept", "queued")
}

// TestTwinHeapEntriesCountOnce: two heap entries for one waiting record
// with the same time (pushed at one instant) make it one candidate, not
// two: as two, stealing offered one and set the other a new time, a wait
// asked of a queued record.
func TestTwinHeapEntriesCountOnce(t *testing.T) {
	e, leaseIDs, ids := rankedEvents(t, Config{Grace: time.Second, IdleAfter: time.Hour, StealAfter: time.Millisecond, Workers: 4})
	id := ids[1]
	e.item(id, false)
	e.lease("other", firstFor(e.q, leaseIDs, id), false) // its owner is alive and leasing
	r := e.q.recs[id]
	heap.Push(&e.q.delayed, delayed{id: id, due: r.due})
	e.q.offerDueLocked(r.due, nil)
	// One candidate of its owner: the newer half of one is none, so it
	// waits on (stealing proper is TestQueueIdleHoldersHelpASlowOne's).
	e.wantPhase(id, "waiting")
}

// TestDoneDuringAnotherAttempt: a client reports done an item it released
// while one of our workers is trying it again (its lease transaction under
// way); the attempt, lost, finds it finished and leaves it so.
func TestDoneDuringAnotherAttempt(t *testing.T) {
	e := newEvents(t, Config{})
	e.item("d", false)
	e.q.dequeue(<-e.q.work)
	e.q.mu.Lock()
	r := e.q.recs["d"]
	e.q.fly(r) // TryAcquire, its transaction under way
	e.q.mu.Unlock()
	e.q.Done(r.item)  // the client that released it before
	e.q.released("d") // the attempt lost
	e.wantPhase("d", "finished")
}
