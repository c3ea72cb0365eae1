package workqueue

import (
	"container/heap"
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/berth-project/berth/internal/rendezvous"
)

// DefaultHolderGrace is how long an item waits for the holder that ranks
// first for it before the next one tries it too. Well above the time a
// live holder takes to lease an item it was told of (a watch event and a
// transaction, milliseconds), well below a lease TTL.
const DefaultHolderGrace = 250 * time.Millisecond

// DefaultHolderIdleAfter is how long after its last lease seen a holder
// still counts as working its backlog (its items are left to it). Four
// graces: on a loaded machine a watch event can arrive hundreds of
// milliseconds late, and a live holder taken for stalled is raced.
const DefaultHolderIdleAfter = 4 * DefaultHolderGrace

// maxGraceSteps bounds the wait of the holders ranking third and below
// for an item: they all try after two graces.
const maxGraceSteps = 2

// rankLocked is how many registered holders rank before us for id by
// rendezvous (highest random weight) hashing: 0 when we are first, or
// when affinity is off or no other holder is known.
func (q *Queue) rankLocked(id string) int {
	if len(q.holders) == 0 || q.self == "" {
		return 0
	}
	mine := rendezvous.Weight(id, q.self)
	rank := 0
	for _, h := range q.holders {
		if h == q.self {
			continue
		}
		if w := rendezvous.Weight(id, h); w > mine || (w == mine && h < q.self) {
			rank++
		}
	}
	return rank
}

// stealableLocked says whether we may try id now that its grace is over:
// only if no holder ranked before us for it has leased anything within
// the idle window. A holder that leases is alive and working through its
// backlog in order; taking its items then would only race it for them
// (with a backlog longer than the grace every item would be raced). One
// that has stopped leasing (dead, stalled, or every worker stuck) has its
// items taken over the idle window (1 s by default) after its last lease.
// If not, it returns when to look again.
func (q *Queue) stealableLocked(id string, now time.Time) (bool, time.Time) {
	mine := rendezvous.Weight(id, q.self)
	var again time.Time
	for _, h := range q.holders {
		if h == q.self {
			continue
		}
		if w := rendezvous.Weight(id, h); w < mine || (w == mine && h > q.self) {
			continue // ranked after us
		}
		if last, ok := q.active[h]; ok && now.Sub(last) < q.idleAfter {
			if t := last.Add(q.idleAfter); t.After(again) {
				again = t
			}
		}
	}
	return again.IsZero(), again
}

// offerWhenDue offers the waiting ids whose grace is over.
//
// It also lets an idle holder help a live but slow one (stealAfter): an
// id whose better-ranked holders are all still leasing, which we rank
// second, and which has waited stealAfter, is a candidate; after each
// pass the newer half of each owner's candidates is offered, newest
// first and as many as we have idle workers, and the rest wait as before
// (stealLocked). Only the second-ranked holder steals an item, so two
// idle holders never race for one; the newer half, because the owner
// works its backlog oldest first (its work channel is in arrival order):
// we take its tail and meet it, if at all, only where its backlog ends.
// A holder busy with its own items steals nothing, so in a burst that
// keeps every holder busy nothing changes.
func (q *Queue) offerWhenDue(ctx context.Context) {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	var steal []stealCandidate
	for {
		q.mu.Lock()
		var next time.Duration
		next, steal = q.offerDueLocked(time.Now(), steal[:0])
		q.mu.Unlock()
		t.Reset(next)
		select {
		case <-ctx.Done():
			return
		case <-q.wake:
		case <-t.C:
		}
	}
}

// offerDueLocked is one pass of offerWhenDue at now: it offers the
// waiting records due by now that no better-ranked holder is still
// working on, steals some (steal is scratch space, returned for reuse),
// sets the others a new time, and returns how long until the next is due.
func (q *Queue) offerDueLocked(now time.Time, steal []stealCandidate) (time.Duration, []stealCandidate) {
	next := time.Hour
	for q.delayed.Len() > 0 {
		d := q.delayed[0]
		r, ok := q.recs[d.id]
		if !ok || r.phase != waiting || !r.due.Equal(d.due) {
			heap.Pop(&q.delayed) // stale: offered meanwhile, or re-timed
			continue
		}
		if d.due.After(now) {
			next = d.due.Sub(now)
			break
		}
		heap.Pop(&q.delayed)
		// This entry is used up: a twin pushed for the same instant is
		// stale from now on, not a second offer of the same record.
		r.due = time.Time{}
		if !r.known || r.leased {
			q.retract(r) // gone, or leased by someone: its lease's deletion offers it again
			q.tidy(r)
			continue
		}
		if ok, again := q.stealableLocked(r.id, now); !ok {
			if q.stealAfter > 0 && now.Sub(r.since) >= q.stealAfter && q.rankLocked(r.id) == 1 {
				steal = append(steal, stealCandidate{r: r, since: r.since, again: again})
				continue
			}
			q.wait(r, again, now)
			continue
		}
		q.offer(r, false)
	}
	if len(steal) > 0 {
		q.stealLocked(steal, now)
		if q.delayed.Len() > 0 {
			next = max(q.delayed[0].due.Sub(now), 0)
		}
	}
	if q.delayed.Len() == 0 {
		q.delayed = nil // let a drained burst's backing array go
	}
	return next, steal
}

// stealCandidate is a waiting record offerDueLocked popped from the
// heap for stealLocked to offer or set a new time.
type stealCandidate struct {
	r            *record
	owner        string // the holder ranked first for it
	since, again time.Time
	take         bool
}

// stealLocked offers some candidates to our idle workers and puts the
// others back to wait for their holder. Of each owner's candidates it
// takes the newer half only: the owner works its backlog oldest first,
// so the older half keeps it busy while we lease the rest, and we meet
// it only where its backlog ends, when our leases have long reached its
// watch. (Taking them all, a loaded 3-scheduler bench lost about as many
// lease transactions to that meeting as it stole items.) A candidate
// left alone is looked at again at the next pass, half of what remains.
func (q *Queue) stealLocked(cands []stealCandidate, now time.Time) {
	idle := q.workers - int(q.busy.Load()) - len(q.work) - len(q.overflow)
	for i := range cands {
		cands[i].owner = q.firstRankedLocked(cands[i].r.id)
	}
	// By owner, newest first within each; the newer half of each owner's
	// are eligible, newest first overall up to our idle workers.
	slices.SortFunc(cands, func(a, b stealCandidate) int {
		if c := strings.Compare(a.owner, b.owner); c != 0 {
			return c
		}
		return b.since.Compare(a.since)
	})
	var eligible []int
	for start := 0; start < len(cands); {
		end := start + 1
		for end < len(cands) && cands[end].owner == cands[start].owner {
			end++
		}
		for i := start; i < start+(end-start)/2; i++ {
			eligible = append(eligible, i)
		}
		start = end
	}
	slices.SortFunc(eligible, func(a, b int) int { return cands[b].since.Compare(cands[a].since) })
	for _, i := range eligible[:min(len(eligible), max(idle, 0))] {
		cands[i].take = true
	}
	for _, c := range cands {
		if c.take {
			q.offer(c.r, true)
			continue
		}
		q.wait(c.r, c.again, now)
	}
}

// firstRankedLocked is the registered holder ranked first for id.
func (q *Queue) firstRankedLocked(id string) string {
	best, bw := "", uint64(0)
	for _, h := range q.holders {
		if w := rendezvous.Weight(id, h); best == "" || w > bw || (w == bw && h < best) {
			best, bw = h, w
		}
	}
	return best
}

// holderID is a holder's id (its session lease in hex): the registered
// holder's own string when known, so that following every lease (every
// superconductor sees every request leased) allocates no key for active.
func (q *Queue) holderID(lease int64) string {
	var buf [16]byte
	id := strconv.AppendInt(buf[:0], lease, 16)
	if i, found := slices.BinarySearch(q.holders, string(id)); found {
		return q.holders[i]
	}
	return string(id)
}

// reofferLocked ranks the waiting items again: those we now rank first
// for are considered afresh (offered at once unless leased meanwhile),
// the others keep their earlier time.
func (q *Queue) reofferLocked() {
	for _, r := range q.recs {
		if r.phase == waiting && q.rankLocked(r.id) == 0 {
			q.retract(r)
			q.considerLocked(r)
			q.tidy(r)
		}
	}
}
