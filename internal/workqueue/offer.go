package workqueue

import "time"

// This file holds the decisions that move records between phases on what
// the watches, the workers and the sweep report; state.go holds the
// transitions themselves, ranking.go the ranking that decides between
// offering an item now and waiting.

// considerLocked offers r to our workers: at once when we rank first for
// it among the holders, else after our rank's grace (offerWhenDue). An
// item that is gone, leased by anyone, or already queued, in flight or
// finished by us is left as it is.
func (q *Queue) considerLocked(r *record) {
	if !r.known || r.leased {
		return
	}
	switch r.phase {
	case queued, inFlight, finished:
		return
	}
	rank := q.rankLocked(r.id)
	if rank == 0 {
		q.offer(r, false)
		return
	}
	now := time.Now()
	due := now.Add(time.Duration(min(rank, maxGraceSteps)) * q.grace)
	if r.phase == waiting && !r.due.After(due) {
		return // already waiting, no longer than this
	}
	// The timer loop sleeps until the earliest due time it saw; only an
	// id due before the heap's head needs it to look again. Ids arrive
	// with their due times in order (now + a grace or two), so in a burst
	// that is almost never: waking the loop for each of them cost every
	// superconductor a pass per request another holder works.
	wake := q.delayed.Len() == 0 || due.Before(q.delayed[0].due)
	q.wait(r, due, now)
	if wake {
		select {
		case q.wake <- struct{}{}:
		default:
		}
	}
}

// enqueueLocked considers id's record, if it has one.
func (q *Queue) enqueueLocked(id string) {
	if r, ok := q.recs[id]; ok {
		q.considerLocked(r)
	}
}

// dequeue is a worker's taking id off the work channel. It reports
// whether to try leasing it now: not when the entry is stale (the item
// was taken meanwhile by TryAcquireMany, or its offer retracted), when
// the item is gone, or when the Defer hook, asked without touching etcd,
// leaves it to another item's holder.
func (q *Queue) dequeue(id string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	defer q.refillLocked() // id left work: room for an overflowed one
	r, ok := q.recs[id]
	if !ok || r.phase != queued {
		return false
	}
	q.take(r)
	if !r.known {
		q.tidy(r)
		return false
	}
	if q.deferFn == nil {
		return true
	}
	// The known items are offered as an iterator under our lock, not
	// copied: a backlog of thousands was copied on every dequeue, O(n²)
	// over a burst, though the hook looks at them only for multi-creates.
	all := func(yield func(Item) bool) {
		for _, x := range q.recs {
			if x.known && !yield(x.item) {
				return
			}
		}
	}
	if q.deferFn(r.item, all) {
		q.park(r)
		return false
	}
	return true
}

// refillLocked moves overflowed ids into work while it has room, in the
// order they were offered; ids gone or leased meanwhile are retracted
// (whoever frees them offers them again), stale ones dropped.
func (q *Queue) refillLocked() {
	n := 0
	for n < len(q.overflow) {
		r, ok := q.recs[q.overflow[n]]
		if !ok || r.phase != queued {
			n++ // stale: taken or retracted meanwhile
			continue
		}
		if !r.known || r.leased {
			q.retract(r)
			q.tidy(r)
			n++
			continue
		}
		select {
		case q.work <- r.id:
			n++
			continue
		default:
		}
		break
	}
	q.overflow = q.overflow[n:]
	if len(q.overflow) == 0 {
		q.overflow = nil // let a drained burst's backing array go
	}
}

// sweepLocked offers every item again, for the periodic sweep: one whose
// try failed, or whose lease holder died while we were re-listing. An
// item we finished that still exists a sweep later was not deleted by us
// after all (our final transaction found it taken over): it is anyone's
// again.
func (q *Queue) sweepLocked() {
	for _, r := range q.recs {
		if r.phase == finished {
			q.forget(r)
		}
		q.considerLocked(r)
	}
}

// wakeParkedLocked considers the deferred items afresh: an item finished,
// and whatever waited for it may go now.
func (q *Queue) wakeParkedLocked() {
	for _, r := range q.parked {
		q.retract(r)
		q.considerLocked(r)
		q.tidy(r)
	}
}
