package etcdschema

import (
	"math"
	"sync"
	"sync/atomic"
)

// Every scheduler holds every host's inventories twice: its placement
// index's provider records and its host manager's capacity records. At
// 100,000 hosts those were 200,000 small maps (~111 MB of a ~520 MB live
// heap), yet most hosts of a cloud share a hardware type, so most of the
// maps are equal. The decoders the indexes use (DecodeProviderAfter,
// DecodeHostCapacityShared) hand out one map per distinct inventories
// value, from a table keyed by the value's JSON bytes.
//
// The rule that makes this safe: a map these decoders return is shared
// and read-only. Whoever changes a record's inventories builds a new map
// (Provider.Clone, placement's reshape, the agent's reports); the plain
// Decode still gives a fresh map to a caller that wants one to mutate.

// maxSharedValues bounds each table: past it, new values are decoded
// into maps (or slices) of their own, so a varied (or hostile) cloud
// cannot grow it without end. Each entry costs its key's bytes (~300 for
// inventories, less for the others) and one map or slice.
const maxSharedValues = 4096

// valueTable holds one decoded value per distinct JSON value (its
// bytes), up to maxSharedValues. Safe for concurrent use (an index
// load decodes on several goroutines); lookups take only the read lock.
// The inventories, usages and name lists of the records an index keeps
// each have one.
type valueTable[V any] struct {
	mu sync.RWMutex
	m  map[string]V
	// full is set once m holds maxSharedValues values: a miss then
	// skips the write lock (a cloud past the bound misses on most
	// decodes, from several indexes' goroutines at once).
	full atomic.Bool
}

var sharedInventories valueTable[map[string]Inventory]

// lookup returns the value held for raw, if any.
func (t *valueTable[V]) lookup(raw []byte) (V, bool) {
	t.mu.RLock()
	v, ok := t.m[string(raw)]
	t.mu.RUnlock()
	return v, ok
}

// share returns the value held for raw, holding v for it first when the
// table has room; v (decoded from raw) is returned when it does not.
func (t *valueTable[V]) share(raw []byte, v V) V {
	if t.full.Load() {
		return v
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if held, ok := t.m[string(raw)]; ok {
		return held
	}
	if t.m == nil {
		t.m = make(map[string]V)
	}
	if len(t.m) < maxSharedValues {
		t.m[string(raw)] = v
	}
	if len(t.m) >= maxSharedValues {
		t.full.Store(true)
	}
	return v
}

// inventoriesShared reads a provider's (or a host capacity's)
// inventories as inventories does, returning was when they are exactly
// was's (allocation ratios compared bit for bit: -0 is not 0 here), else
// the shared table's map for the same JSON bytes: neither may be mutated
// by the caller or anyone it hands them to.
func (r *jsonReader) inventoriesShared(was map[string]Inventory) (map[string]Inventory, bool) {
	if r.null() {
		return nil, true
	}
	r.i = skipWS(r.data, r.i)
	start := r.i
	type entry struct {
		rc  []byte
		inv Inventory
	}
	var buf [8]entry
	entries := buf[:0]
	ok := r.object(func(rc []byte) bool {
		for _, e := range entries {
			if string(e.rc) == string(rc) {
				return false // encoding/json would let the last win
			}
		}
		inv, ok := r.inventory()
		entries = append(entries, entry{rc, inv})
		return ok
	})
	if !ok {
		return nil, false
	}
	same := was != nil && len(entries) == len(was)
	for i := 0; same && i < len(entries); i++ {
		e := entries[i]
		old, found := was[string(e.rc)]
		same = found && old.Total == e.inv.Total && old.Reserved == e.inv.Reserved && old.MinUnit == e.inv.MinUnit &&
			old.MaxUnit == e.inv.MaxUnit && old.StepSize == e.inv.StepSize &&
			math.Float64bits(old.AllocationRatio) == math.Float64bits(e.inv.AllocationRatio)
	}
	if same {
		return was, true
	}
	raw := r.data[start:r.i]
	if m, ok := sharedInventories.lookup(raw); ok {
		return m, true
	}
	m := make(map[string]Inventory, len(entries))
	for _, e := range entries {
		m[internName(e.rc)] = e.inv
	}
	return sharedInventories.share(raw, m), true
}

// A placement index keeps each provider's usages, traits and aggregates
// too, and most hosts' are equal: every idle host's usages are {}, a
// cloud's hosts share a few trait lists and aggregates. At 100,000 hosts
// their maps, slices and strings were ~4 heap objects per provider per
// index, each one a collection marks. They are shared as the inventories
// are, with the same rule: read-only. Whoever changes a record's usages,
// traits or aggregates builds new ones (Provider.Clone, the claim's new
// usages map).
var (
	sharedUsages valueTable[map[string]int64]
	sharedNames  valueTable[[]string]
)

// usagesShared reads a provider's usages as int64Map does, returning the
// shared table's map for the same JSON bytes: read-only.
func (r *jsonReader) usagesShared() (map[string]int64, bool) {
	if r.null() {
		return nil, true
	}
	r.i = skipWS(r.data, r.i)
	start := r.i
	var buf [8]int64Entry
	entries, ok := r.int64Entries(buf[:0])
	if !ok {
		return nil, false
	}
	raw := r.data[start:r.i]
	if m, ok := sharedUsages.lookup(raw); ok {
		return m, true
	}
	m := make(map[string]int64, len(entries))
	for _, e := range entries {
		m[internName(e.name)] = e.n
	}
	return sharedUsages.share(raw, m), true
}

// stringsShared reads an array of strings as stringsAs does: was's
// (capped) when its elements are was's, else the shared table's slice
// for the same JSON bytes, capped at its length so that an append to a
// record's slice copies. Either is read-only.
func (r *jsonReader) stringsShared(was []string) ([]string, bool) {
	if r.null() {
		return nil, true
	}
	r.i = skipWS(r.data, r.i)
	start := r.i
	if !r.next('[') {
		return nil, false
	}
	if r.next(']') {
		if was != nil && len(was) == 0 {
			return was[:0:0], true
		}
		return []string{}, true
	}
	same := true
	n := 0
	for {
		s, ok := r.str()
		if !ok {
			return nil, false
		}
		same = same && n < len(was) && string(s) == was[n]
		n++
		if r.next(',') {
			continue
		}
		if !r.next(']') {
			return nil, false
		}
		break
	}
	if same {
		return was[:n:n], true
	}
	raw := r.data[start:r.i]
	if held, ok := sharedNames.lookup(raw); ok {
		return held, true
	}
	again := jsonReader{data: raw}
	out, ok := again.strings()
	if !ok || len(out) != n {
		return nil, false
	}
	return sharedNames.share(raw, out[:n:n]), true
}
