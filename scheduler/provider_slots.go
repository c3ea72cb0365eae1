package scheduler

import (
	"sync"
	"sync/atomic"
)

// The host join finds each candidate's host record from its root
// provider's uuid. In a map keyed by the uuid that was a hash of 36 bytes
// and a few cache misses (the bucket, the stored key's bytes) per
// candidate of every request: with the de-duplication of the roots, half
// of the join. Placement's candidates carry their root's slot in its
// index (Candidate.RootSlot), so the host manager remembers, per slot,
// the record it found there last, and a candidate finds its record with
// one array read.
//
// A slot is a hint, never trusted alone: placement reuses a slot once its
// provider is gone, and another index (a restarted one) numbers providers
// afresh. An entry is used only when its uuid equals the candidate's
// root (the same string as a rule: placement's decoder keeps a provider's
// uuid string from update to update, and Go compares strings that share
// their bytes without reading them). Every entry was byProvider's answer
// for its uuid when a request stored it under the read lock, and the
// table is emptied under the write lock whenever a uuid stops leading to
// the record it led to (a service deleted or moved to another provider, a
// list replacing every record): so an entry found is byProvider's answer
// now. A provider new to byProvider changes no entry's answer: hosts
// registering keep the table.

const (
	slotChunkBits = 10
	slotChunkSize = 1 << slotChunkBits
)

// providerSlots is the table. Requests fill it under the host manager's
// read lock, concurrently: entries are atomic pointers, written whole,
// and all writers of one read-locked period store the same answer for a
// slot's uuid. The chunk directory grows under its own mutex and is
// published whole, so readers never lock.
type providerSlots struct {
	grow sync.Mutex
	dir  atomic.Pointer[[]*slotChunk]
}

type slotChunk [slotChunkSize]atomic.Pointer[slotEntry]

// slotEntry is what one slot led to: record rec, whose compute node is
// provider root.
type slotEntry struct {
	root string
	rec  *hostRecord
}

// lookup is the record remembered for slot (Candidate.RootSlot, 1-based)
// if it is root's; nil otherwise.
func (t *providerSlots) lookup(slot int32, root string) *hostRecord {
	if slot <= 0 {
		return nil
	}
	i := int(slot - 1)
	d := t.dir.Load()
	if d == nil || i>>slotChunkBits >= len(*d) {
		return nil
	}
	e := (*d)[i>>slotChunkBits][i&(slotChunkSize-1)].Load()
	if e == nil || e.root != root {
		return nil
	}
	return e.rec
}

// slotEntries hands out the entries one request stores, from
// allocations that double (1, 2, 4, ... up to slotEntryBatchMax
// entries): with requests spread over the cloud (100 candidates from a
// random start), a 100,000-host boot of 3,000 servers makes each host a
// candidate ~3 times, so a third of a request's candidates miss the
// table and store an entry, and one object per entry was ~31 objects per
// request for the collector; a request that misses once (a warm table)
// still allocates one entry, and no allocation is larger than the
// request's candidates left to look up. An entry is written once, before it is
// published, and never again; an allocation lives while any of its
// entries is in the table.
type slotEntries struct {
	free []slotEntry
	made int // entries allocated so far
}

const slotEntryBatchMax = 32

// next is an entry for root's record rec; at most left entries (this one
// included) are still to be asked for, so an allocation is no larger.
func (b *slotEntries) next(root string, rec *hostRecord, left int) *slotEntry {
	if len(b.free) == 0 {
		n := max(min(b.made, slotEntryBatchMax, left), 1)
		b.free = make([]slotEntry, n)
		b.made += n
	}
	e := &b.free[0]
	b.free = b.free[1:]
	e.root, e.rec = root, rec
	return e
}

// remember stores that slot leads to rec, provider root's record, in an
// entry from spare, which is asked for at most left more (this one
// included); the caller holds the host manager's lock (read or write).
func (t *providerSlots) remember(slot int32, root string, rec *hostRecord, spare *slotEntries, left int) {
	if slot <= 0 {
		return
	}
	i := int(slot - 1)
	d := t.dir.Load()
	if d == nil || i>>slotChunkBits >= len(*d) {
		d = t.grown(i >> slotChunkBits)
	}
	(*d)[i>>slotChunkBits][i&(slotChunkSize-1)].Store(spare.next(root, rec, left))
}

// grown returns a directory with chunk c, making it if no one has.
func (t *providerSlots) grown(c int) *[]*slotChunk {
	t.grow.Lock()
	defer t.grow.Unlock()
	d := t.dir.Load()
	if d != nil && c < len(*d) {
		return d
	}
	var next []*slotChunk
	if d != nil {
		next = append(next, *d...)
	}
	for len(next) <= c {
		next = append(next, new(slotChunk))
	}
	t.dir.Store(&next)
	return &next
}

// forget empties the table; the caller holds the host manager's write
// lock, so no request is filling it meanwhile. The records it held are
// garbage once byProvider lets them go.
func (t *providerSlots) forget() {
	t.dir.Store(nil)
}
