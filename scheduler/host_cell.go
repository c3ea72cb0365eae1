package scheduler

import (
	"sync"
	"sync/atomic"
)

// A host's cell is its host mapping's (hm.cells), else its service's. The
// mapping was a lookup in a 10,000-entry map keyed by the host's name for
// every candidate of every request: a few cache misses each, the largest
// part of the join once the provider lookup led straight to the record
// (0.44 s of the superconductor's 5.5 s in a 10,000-host boot). Mappings
// change only as hosts register or move cells, so each record remembers
// its mapping's cell for the current mappingsGen.

// cellMemo is a record's remembered mapping cell. It is written under the
// host manager's read lock, by any request that finds it out of date: all
// writers of one read-locked period store the same values (the mappings
// change only under the write lock), and cell is stored before gen, so a
// reader that sees the current gen reads that period's cell.
type cellMemo struct {
	gen  atomic.Uint64 // mappingsGen+1 when cell was read (0: never)
	cell atomic.Pointer[string]
}

// cellNames interns the cells' names, which are few, so that the memo of
// every host points at one string per cell (hot in the cache).
var cellNames sync.Map // string -> *string

func internCell(cell string) *string {
	if p, ok := cellNames.Load(cell); ok {
		return p.(*string)
	}
	name := cell // a copy: taking cell's address would move it to the heap on every call
	p, _ := cellNames.LoadOrStore(name, &name)
	return p.(*string)
}

// mappedCellLocked is r's host mapping's cell ("" if none); the caller
// holds the read lock.
func (hm *HostManager) mappedCellLocked(r *hostRecord) string {
	g := hm.mappingsGen.Load() + 1
	if r.cell.gen.Load() == g {
		if p := r.cell.cell.Load(); p != nil {
			return *p
		}
	}
	cell := hm.cells[r.name]
	r.cell.cell.Store(internCell(cell))
	r.cell.gen.Store(g)
	return cell
}
