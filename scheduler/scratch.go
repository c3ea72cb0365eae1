package scheduler

import (
	"math/bits"
	"sync"

	"github.com/berth-project/berth/placement"
)

// joinScratch is the arrays one request's join is built in, reused from
// request to request (a sync.Pool): a request joins 100 to 1,000
// candidates, and making these afresh was about 40 KB and a dozen
// allocations a request, garbage the moment it answered. Everything in it
// is the request's alone, read by its stages on its goroutine, and
// nothing of it outlives the call: the Selections it answers copy what
// they take, and a NoValidHostError holds only strings.
type joinScratch struct {
	rootIdx []int
	pos     map[string]int
	roots   []string
	// rootSlots are roots' Candidate.RootSlot; bySlot is the table
	// distinctRoots de-duplicates them in.
	rootSlots []int32
	bySlot    []slotMark
	views     []hostView
	oks       []bool
	perRoot   []int
	fill      []int
	firstIdx  []int
	backing   []placement.Candidate
	states    []HostState
	order     []*HostState
	// rank is what each pick's weighing ranks in (weighRanking).
	rank rankBuf
	// compact is what placement builds the request's candidates in
	// (candidates in select.go).
	compact placement.CompactBuffers
	// claim is the one-entry writes map each claim hands placement
	// (claimWrites).
	claim map[string]placement.AllocationWrite
}

var joinScratchPool = sync.Pool{New: func() any { return &joinScratch{pos: map[string]int{}} }}

// getJoinScratch takes a scratch from the pool.
func getJoinScratch() *joinScratch { return joinScratchPool.Get().(*joinScratch) }

// claimWrites is the scratch's claim map holding only uuid's write. A
// map of one entry still takes a whole group of eight slots (about 0.9
// kB with AllocationWrite's 88 bytes), made afresh for every claim
// before; placement keeps nothing of the map (Placement's contract), so
// one per scratch serves every claim. The caller clears it after the
// claim, so that the pool does not keep a candidate's allocations alive.
func (j *joinScratch) claimWrites(uuid string, w placement.AllocationWrite) map[string]placement.AllocationWrite {
	if j.claim == nil {
		j.claim = make(map[string]placement.AllocationWrite, 1)
	}
	clear(j.claim)
	j.claim[uuid] = w
	return j.claim
}

// release gives the scratch back. Its arrays are not cleared: clearing
// arrays of pointers costs a write barrier per word while the GC marks
// (it was a twentieth of the superconductor's CPU in a boot), and each
// user overwrites what it reads (see resize). What a pooled scratch
// keeps alive until its next use, or until the pool drops it at the next
// GCs, is host records and summaries that are mostly alive anyway.
func (j *joinScratch) release() {
	joinScratchPool.Put(j)
}

// grow returns s with length n, zeroed, reusing its array when it is
// large enough: for counters and flags, which are read before written.
func grow[T any](s []T, n int) []T {
	s = resize(s, n)
	clear(s)
	return s
}

// resize returns s with length n, reusing its array when it is large
// enough, NOT zeroed: for arrays whose every element read was written
// first in the same use.
func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// slotMark says slot's root is roots[j] (slot 0: an empty place).
type slotMark struct {
	slot, j int32
}

// distinctRoots lists the candidates' roots, each once, in answer order,
// with their RootSlots, and sets rootIdx[i] to cands[i]'s root's place in
// them (-1 for a candidate with no root). Within one placement answer a
// slot is one root, so roots are told apart by slot, in a small open
// addressing table keyed by it (twice the candidates, so it stays in the
// cache): a map keyed by the uuid hashed 36 bytes per candidate. An
// answer with a candidate of unknown slot (one not made by placement's
// index) is de-duplicated by uuid. The caller keeps the slices it
// returns in the scratch.
func (j *joinScratch) distinctRoots(cands []placement.Candidate, rootIdx []int) ([]string, []int32) {
	roots, slots := j.roots[:0], j.rootSlots[:0]
	if len(cands) == 0 {
		return roots, slots
	}
	for i := range cands {
		if cands[i].RootSlot <= 0 && cands[i].Root != "" {
			return j.distinctRootsByUUID(cands, rootIdx, roots, slots)
		}
	}
	width := bits.Len(uint(2*len(cands) - 1))
	table := grow(j.bySlot, 1<<width)
	j.bySlot = table
	mask := uint32(len(table) - 1)
	for i := range cands {
		c := &cands[i]
		if c.Root == "" {
			rootIdx[i] = -1
			continue
		}
		// Fibonacci hashing: the product's high bits.
		h := (uint32(c.RootSlot) * 2654435769) >> (32 - width) & mask
		for table[h].slot != 0 && table[h].slot != c.RootSlot {
			h = (h + 1) & mask
		}
		if table[h].slot == 0 {
			table[h] = slotMark{slot: c.RootSlot, j: int32(len(roots))}
			roots, slots = append(roots, c.Root), append(slots, c.RootSlot)
		}
		rootIdx[i] = int(table[h].j)
	}
	return roots, slots
}

// distinctRootsByUUID is distinctRoots keyed by the roots' uuids.
func (j *joinScratch) distinctRootsByUUID(cands []placement.Candidate, rootIdx []int, roots []string, slots []int32) ([]string, []int32) {
	clear(j.pos) // the last request's roots
	for i, c := range cands {
		if c.Root == "" {
			rootIdx[i] = -1
			continue
		}
		k, ok := j.pos[c.Root]
		if !ok {
			k = len(roots)
			j.pos[c.Root] = k
			roots, slots = append(roots, c.Root), append(slots, c.RootSlot)
		}
		rootIdx[i] = k
	}
	return roots, slots
}
