package workqueue

import (
	"slices"
	"time"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/informer"
)

type itemHandler struct{ q *Queue }

func (h itemHandler) Reset(kvs []informer.Event, _ int64) {
	q := h.q
	q.mu.Lock()
	defer q.mu.Unlock()
	q.items = map[string]Item{}
	for id := range q.finished {
		delete(q.finished, id) // the listing says what exists now
	}
	for _, kv := range kvs {
		h.putLocked(kv)
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
			delete(q.items, id)
			delete(q.defered, id)
			delete(q.finished, id)
			delete(q.waiting, id)
			// An item finished: whatever waited for it may go now.
			for d := range q.defered {
				delete(q.defered, d)
				q.enqueueLocked(d)
			}
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
	q.items[id] = Item{ID: id, Key: ev.Key, Value: ev.Value, ModRev: ev.Revision, LeaseKey: q.leaseKey(id)}
	q.enqueueLocked(id)
}

type leaseHandler struct{ q *Queue }

func (h leaseHandler) Reset(kvs []informer.Event, _ int64) {
	q := h.q
	q.mu.Lock()
	defer q.mu.Unlock()
	q.leased = map[string]bool{}
	for _, kv := range kvs {
		if id, ok := etcdschema.LastSegment(kv.Key, q.leasePrefix); ok {
			q.leased[id] = true
		}
	}
	for id := range q.items {
		q.enqueueLocked(id)
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
			delete(q.leased, id)
			q.enqueueLocked(id) // its holder finished or died; offer it if it is still there
		} else {
			q.leased[id] = true
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
