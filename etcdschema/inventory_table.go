package etcdschema

import (
	"math"
	"sync"
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

// maxSharedInventories bounds the table: past it, new values are decoded
// into maps of their own, so a varied (or hostile) cloud cannot grow it
// without end. Each entry costs its key's bytes (~300) and one map.
const maxSharedInventories = 4096

// inventoryTable holds one decoded map per inventories value (its JSON
// bytes), up to maxSharedInventories. Safe for concurrent use (an index
// load decodes on several goroutines); lookups take only the read lock.
type inventoryTable struct {
	mu sync.RWMutex
	m  map[string]map[string]Inventory
}

var sharedInventories inventoryTable

// lookup returns the map held for raw, if any.
func (t *inventoryTable) lookup(raw []byte) (map[string]Inventory, bool) {
	t.mu.RLock()
	m, ok := t.m[string(raw)]
	t.mu.RUnlock()
	return m, ok
}

// share returns the map held for raw, holding m for it first when the
// table has room; m (decoded from raw) is returned when it does not.
func (t *inventoryTable) share(raw []byte, m map[string]Inventory) map[string]Inventory {
	t.mu.Lock()
	defer t.mu.Unlock()
	if held, ok := t.m[string(raw)]; ok {
		return held
	}
	if t.m == nil {
		t.m = make(map[string]map[string]Inventory)
	}
	if len(t.m) < maxSharedInventories {
		t.m[string(raw)] = m
	}
	return m
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
