package placement

import "sync"

// areqSlab hands out a search's allocation requests and their small
// lists from chunks: the single-provider search made three allocations
// per candidate (the request, its amounts, its one mapping), which at
// limit 1000 were nearly all of a candidates request's allocations. Every
// list is capacity-capped, so an append to one (merge, render) copies
// instead of writing into its neighbour.
//
// A slab serves one search and what its caller makes of the answer
// (runSearch's finish), after which nothing points into it: render,
// renderOrdered and compact copy what they keep, and merge builds new
// requests. runSearch then resets it and puts it back in slabPool, so
// the next search cuts from the same chunks (made anew for every
// request, they were most of what a candidates request left to the
// collector once its answer's arrays were reused).
type areqSlab struct {
	areqs chunks[areq]
	res   chunks[resReq]
	maps  chunks[mapEntry]
	// out is the search's answer list, kept for the next search.
	out []*areq
}

// slabChunk is how many of each a chunk holds.
const slabChunk = 128

// maxPooledSlab is the most requests a slab may have handed out and
// still be kept for the next search: a search with no limit over
// 100,000 providers leaves its slab to the collector.
const maxPooledSlab = 16 * 1024

var slabPool = sync.Pool{New: func() any { return new(areqSlab) }}

// getSlab is a reset slab from the pool.
func getSlab() *areqSlab { return slabPool.Get().(*areqSlab) }

// putSlab resets sl and gives it back to the pool (or to the collector
// when it grew large); nothing it handed out may be used after.
func putSlab(sl *areqSlab) {
	if sl.areqs.made > maxPooledSlab || cap(sl.out) > maxPooledSlab {
		return
	}
	sl.areqs.reset()
	sl.res.reset()
	sl.maps.reset()
	clear(sl.out)
	sl.out = sl.out[:0]
	slabPool.Put(sl)
}

func (s *areqSlab) areq() *areq            { return &s.areqs.take(1)[0] }
func (s *areqSlab) resReqs(n int) []resReq { return s.res.take(n) }
func (s *areqSlab) mapEntries(n int) []mapEntry {
	return s.maps.take(n)
}

// chunks cuts capacity-capped lists from chunks it keeps for reuse.
type chunks[T any] struct {
	list [][]T // every chunk made
	cur  int   // the chunk being cut from
	made int   // the elements of every chunk made
}

// take returns a list of n zero or stale elements (the caller sets
// every one) that no other take shares.
func (c *chunks[T]) take(n int) []T {
	for ; c.cur < len(c.list); c.cur++ {
		if ch := c.list[c.cur]; cap(ch)-len(ch) >= n {
			at := len(ch)
			c.list[c.cur] = ch[:at+n]
			return ch[at : at+n : at+n]
		}
	}
	ch := make([]T, n, max(slabChunk, n))
	c.list = append(c.list, ch)
	c.made += cap(ch)
	return ch[:n:n]
}

// reset makes every chunk free again, dropping what they point to.
func (c *chunks[T]) reset() {
	for i, ch := range c.list {
		clear(ch)
		c.list[i] = ch[:0]
	}
	c.cur = 0
}
