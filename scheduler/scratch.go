package scheduler

import (
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
	views   []hostView
	oks     []bool
	perRoot []int
	fill    []int
	backing []placement.Candidate
	states  []HostState
	order   []*HostState
	// rank is what each pick's weighing ranks in (weighRanking).
	rank rankBuf
}

var joinScratchPool = sync.Pool{New: func() any { return &joinScratch{pos: map[string]int{}} }}

// getJoinScratch takes a scratch from the pool.
func getJoinScratch() *joinScratch { return joinScratchPool.Get().(*joinScratch) }

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
