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

// release clears what points outside the scratch (host records, maps,
// placement's answer), so a pooled scratch keeps no request's data alive,
// and gives it back.
func (j *joinScratch) release() {
	clear(j.pos)
	clear(j.roots)
	clear(j.views)
	clear(j.backing)
	clear(j.states)
	clear(j.order)
	clear(j.rank.w)
	j.rank.r = ranking{}
	joinScratchPool.Put(j)
}

// grow returns s with length n, reusing its array when it is large enough.
func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	s = s[:n]
	clear(s)
	return s
}
