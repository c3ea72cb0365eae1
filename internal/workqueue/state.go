package workqueue

import (
	"container/heap"
	"fmt"
	"testing"
	"time"
)

// phase is where an item stands in this holder's queue: what this
// process is doing with it, if anything. The diagram in doc.go names the
// transitions between them; each is one method below.
//
// Whether the item's key and its lease key exist is not a phase but what
// our watches last showed of etcd (record.known, record.leased): another
// holder can lease an item whatever we are doing with it, and the two
// watches report an item's and its lease key's deletion (one transaction)
// in either order.
type phase uint8

const (
	// pending: nothing of ours is under way for it. The item may be
	// leased by another holder, or gone (the record stays while its lease
	// key does).
	pending phase = iota
	// waiting: another holder ranks first for it; we try it ourselves at
	// record.due if that holder has not leased it by then (ranking.go).
	waiting
	// queued: offered to our workers, on the work channel or the
	// overflow behind it.
	queued
	// deferred: the Defer hook left it for another item's holder to
	// gather (a multi-instance request's sibling); any item's deletion
	// wakes it.
	deferred
	// inFlight: a lease transaction of ours is under way for it, or we
	// hold it and a ProcessFunc is working it.
	inFlight
	// finished: we finished it (its final transaction deleted it) and the
	// item watch has not shown the deletion yet. The lease key's deletion,
	// on another watch, may come first and must not offer it again: that
	// lease transaction could only lose.
	finished
	nPhases
)

var phaseNames = [nPhases]string{"pending", "waiting", "queued", "deferred", "in flight", "finished"}

func (p phase) String() string {
	if p < nPhases {
		return phaseNames[p]
	}
	return fmt.Sprintf("phase(%d)", p)
}

// phases is a set of phases: the ones a transition may leave.
type phases uint8

func (s phases) has(p phase) bool { return s&(1<<p) != 0 }

func setOf(ps ...phase) phases {
	var s phases
	for _, p := range ps {
		s |= 1 << p
	}
	return s
}

// record is everything this holder knows of one item id. There is one
// while the item's key or its lease key exists (as the watches show) or
// while a phase of ours other than pending holds it; tidy drops it after.
type record struct {
	id   string
	item Item // as the item watch last showed it, while known
	// known: the item's key exists; leased: its lease key exists,
	// anyone's (ours too while we hold it).
	known, leased bool
	phase         phase
	// due is when a waiting item is tried by us; since when it was first
	// put to wait, its age, for taking it from a live but slow holder
	// (Config.StealAfter). Both are zero outside waiting; due also while
	// a pass of the delay loop holds the record (offerDueLocked).
	due, since time.Time
	// stolen: offered by stealLocked, for the lease metrics' turn; the
	// lease attempt that follows reads it.
	stolen bool
}

// The phases each transition leaves. A transition asked of a record in
// any other phase is refused and reported (misstep): it is a bug, a
// transition some code path forgot, and acting on it would leave the
// record somewhere no other code expects it.
var (
	// wait: consider found another holder ranking first (or a pass of
	// the delay loop sets a new time: waiting to waiting).
	fromWait = setOf(pending, deferred, waiting)
	// offer: we rank first, or the grace is over, or we steal it.
	fromOffer = setOf(pending, deferred, waiting)
	// take: a worker took it off the work channel.
	fromTake = setOf(queued)
	// park: the worker that took it was told by the Defer hook to leave
	// it to another item's holder.
	fromPark = setOf(pending)
	// retract: a wait, an offer or a deferral ends without a try: the
	// item is gone or leased by someone else, or it is to be considered
	// afresh (a holder left, a sibling finished).
	fromRetract = setOf(waiting, queued, deferred)
	// fly: a lease attempt starts. TryAcquireMany takes a multi-instance
	// request's siblings from whatever phase it finds them in.
	fromFly = setOf(pending, waiting, queued, deferred)
	// land: the lease attempt lost or failed, or the holder released it.
	fromLand = setOf(inFlight)
	// finish: the holder's final transaction deleted it (Done). From the
	// other phases too: the superconductor releases an item whose
	// hand-off lost (its lease key's deletion may offer it again, or put
	// it to wait) and then reports it done; Done has always ended it
	// wherever it stood, so that it is not tried again until its
	// deletion or a sweep.
	fromFinish = setOf(pending, waiting, queued, deferred, inFlight)
	// forget: the item's deletion reached our watch, or it outlived a
	// sweep (our final transaction did not delete it after all), or the
	// item watch listed afresh.
	fromForget = setOf(finished)
)

// leave checks that r may leave its phase by transition t (whose source
// phases are from), and reports a misstep when not.
func (q *Queue) leave(r *record, t string, from phases) bool {
	if from.has(r.phase) {
		return true
	}
	q.misstep(r.id, t, r.phase)
	return false
}

// logMisstep is the default misstep report: an error in the log (with
// stable keys, for alerting) and the record left as it was. In a test
// binary it panics instead, so that any test that drives a queue (its
// own, the conductors', the stack's) fails at the faulty transition
// rather than later, as a hang or a lost item. A running Berth does not
// panic: a superconductor killed for it would strand its leases for a
// TTL, and a refused transition leaves the record consistent.
func (q *Queue) logMisstep(id, transition string, from phase) {
	q.log.Error("work queue transition refused: the item is not in a phase it leaves",
		"queue", q.itemPrefix, "item", id, "transition", transition, "phase", from.String())
	if testing.Testing() {
		panic(fmt.Sprintf("workqueue %s: %s of item %s from phase %s", q.itemPrefix, transition, id, from))
	}
}

// recordOf returns id's record, making a pending one if there is none.
func (q *Queue) recordOf(id string) *record {
	r, ok := q.recs[id]
	if !ok {
		r = &record{id: id}
		q.recs[id] = r
	}
	return r
}

// tidy drops r once nothing keeps it: neither its item nor its lease key
// exists and no phase of ours holds it.
func (q *Queue) tidy(r *record) {
	if r.phase == pending && !r.known && !r.leased {
		delete(q.recs, r.id)
	}
}

// enter moves r to phase p, keeping the deferred index and the fields
// that belong to one phase in step.
func (q *Queue) enter(r *record, p phase) {
	if r.phase == deferred {
		delete(q.parked, r.id)
	}
	if p != waiting {
		r.due, r.since = time.Time{}, time.Time{}
	}
	r.phase = p
}

// wait puts r to wait until due (pending, deferred, waiting -> waiting).
// Its age (since) starts now unless it was waiting already.
func (q *Queue) wait(r *record, due, now time.Time) {
	if !q.leave(r, "wait", fromWait) {
		return
	}
	if r.phase != waiting {
		r.since = now
	}
	q.enter(r, waiting)
	r.due = due
	heap.Push(&q.delayed, delayed{id: r.id, due: due})
}

// offer puts r on the work channel, or the overflow behind it (pending,
// deferred, waiting -> queued). stolen marks an offer of stealLocked.
func (q *Queue) offer(r *record, stolen bool) {
	if !q.leave(r, "offer", fromOffer) {
		return
	}
	q.enter(r, queued)
	r.stolen = stolen
	select {
	case q.work <- r.id:
	default: // full: a worker moves it in when it takes an id (refillLocked)
		q.overflow = append(q.overflow, r.id)
	}
}

// take is a worker's taking r off the work channel (queued -> pending);
// it is tried next, or parked. r.stolen stays for that try's metrics.
func (q *Queue) take(r *record) {
	if q.leave(r, "take", fromTake) {
		q.enter(r, pending)
	}
}

// park leaves r for another item's holder (pending -> deferred).
func (q *Queue) park(r *record) {
	if !q.leave(r, "park", fromPark) {
		return
	}
	q.enter(r, deferred)
	r.stolen = false
	q.parked[r.id] = r
}

// retract ends a wait, an offer or a deferral without a try (waiting,
// queued, deferred -> pending). A queued id stays on the work channel: the
// worker that takes it finds it no longer queued and skips it.
func (q *Queue) retract(r *record) {
	if q.leave(r, "retract", fromRetract) {
		q.enter(r, pending)
		r.stolen = false
	}
}

// fly starts a lease attempt (pending, waiting, queued, deferred -> in
// flight). Entries left behind (a heap entry, a channel entry) are stale
// from now on and skipped where they are read.
func (q *Queue) fly(r *record) {
	if q.leave(r, "fly", fromFly) {
		q.enter(r, inFlight)
		r.stolen = false
	}
}

// land ends a lease attempt that lost or failed, or a hold released (in
// flight -> pending).
func (q *Queue) land(r *record) {
	if q.leave(r, "land", fromLand) {
		q.enter(r, pending)
	}
}

// finish records that our final transaction deleted the item (in flight,
// or any phase but finished after a Release -> finished), or, when the
// item watch already showed the deletion, that nothing is left to do
// (-> pending). Entries left behind (channel, heap) are stale from now.
func (q *Queue) finish(r *record) {
	if !q.leave(r, "finish", fromFinish) {
		return
	}
	if r.known {
		q.enter(r, finished)
	} else {
		q.enter(r, pending)
	}
}

// forget ends a finished item's guard (finished -> pending).
func (q *Queue) forget(r *record) {
	if q.leave(r, "forget", fromForget) {
		q.enter(r, pending)
	}
}
