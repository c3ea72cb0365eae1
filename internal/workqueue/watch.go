package workqueue

import (
	"slices"
	"time"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/informer"
)

// The three handlers below feed what the watches show into the records:
// itemHandler sets record.known and the item, leaseHandler
// record.leased, and each then considers the record (offer.go). They do
// not change phases themselves except where an event ends one: an
// item's deletion ends a wait, a deferral or our finished guard.

// itemHandler follows the items.
type itemHandler struct{ q *Queue }

func (h itemHandler) Reset(kvs []informer.Event, _ int64) {
	q := h.q
	q.mu.Lock()
	defer q.mu.Unlock()
	// The listing says what exists now.
	for _, r := range q.recs {
		r.known, r.item = false, Item{}
		if r.phase == finished {
			q.forget(r)
		}
	}
	for _, kv := range kvs {
		h.putLocked(kv)
	}
	for _, r := range q.recs {
		q.tidy(r)
	}
}

func (h itemHandler) Apply(evs []informer.Event) {
	q := h.q
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, ev := range evs {
		id, ok := etcdschema.LastSegment(ev.Key, q.itemPrefix)
		if !ok {
			continue
		}
		if ev.Deleted {
			if r, ok := q.recs[id]; ok {
				r.known, r.item = false, Item{}
				switch r.phase {
				case waiting, deferred:
					q.retract(r)
				case finished:
					q.forget(r)
				}
				// Queued or in flight, it stays so: the worker that
				// takes it, or holds it, finds it gone.
				q.tidy(r)
			}
			// An item finished: whatever waited for it may go now.
			q.wakeParkedLocked()
			continue
		}
		h.putLocked(ev)
	}
}

func (h itemHandler) putLocked(ev informer.Event) {
	q := h.q
	id, ok := etcdschema.LastSegment(ev.Key, q.itemPrefix)
	if !ok {
		return
	}
	r := q.recordOf(id)
	r.item = Item{ID: id, Key: ev.Key, Value: ev.Value, ModRev: ev.Revision, LeaseKey: q.leaseKey(id)}
	r.known = true
	q.considerLocked(r)
}

// leaseHandler follows the lease keys, anyone's.
type leaseHandler struct{ q *Queue }

func (h leaseHandler) Reset(kvs []informer.Event, _ int64) {
	q := h.q
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, r := range q.recs {
		r.leased = false
	}
	for _, kv := range kvs {
		if id, ok := etcdschema.LastSegment(kv.Key, q.leasePrefix); ok {
			q.recordOf(id).leased = true
		}
	}
	for _, r := range q.recs {
		q.considerLocked(r)
		q.tidy(r)
	}
}

func (h leaseHandler) Apply(evs []informer.Event) {
	q := h.q
	now := time.Now()
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, ev := range evs {
		id, ok := etcdschema.LastSegment(ev.Key, q.leasePrefix)
		if !ok {
			continue
		}
		if ev.Deleted {
			if r, ok := q.recs[id]; ok {
				r.leased = false
				q.considerLocked(r) // its holder finished or died; offer it if it is still there
				q.tidy(r)
			}
		} else {
			q.recordOf(id).leased = true
			if q.holderPfx != "" {
				// Who leased it: that holder is alive and working.
				var l etcdschema.Lease
				if etcdschema.Decode(ev.Key, ev.Value, &l) == nil {
					q.active[q.holderID(l.LeaseID)] = now
				}
			}
		}
	}
}

// holderHandler follows the registered holders. When one goes (it
// stopped and revoked its session, or its lease expired), the items it
// ranked first for are offered again so the next-ranked holder takes them
// at once.
type holderHandler struct{ q *Queue }

func (h holderHandler) Reset(kvs []informer.Event, _ int64) {
	q := h.q
	q.mu.Lock()
	defer q.mu.Unlock()
	q.holders = q.holders[:0]
	for _, kv := range kvs {
		if id, ok := etcdschema.LastSegment(kv.Key, q.holderPfx); ok {
			q.holders = append(q.holders, id)
		}
	}
	slices.Sort(q.holders)
	q.reofferLocked()
}

func (h holderHandler) Apply(evs []informer.Event) {
	q := h.q
	q.mu.Lock()
	defer q.mu.Unlock()
	gone := false
	for _, ev := range evs {
		id, ok := etcdschema.LastSegment(ev.Key, q.holderPfx)
		if !ok {
			continue
		}
		i, found := slices.BinarySearch(q.holders, id)
		switch {
		case ev.Deleted && found:
			q.holders = slices.Delete(q.holders, i, i+1)
			delete(q.active, id)
			gone = true
		case !ev.Deleted && !found:
			q.holders = slices.Insert(q.holders, i, id)
		}
	}
	if gone {
		q.reofferLocked()
	}
}
