package placement

// areqSlab hands out a search's allocation requests and their small
// lists from chunks: the single-provider search made three allocations
// per candidate (the request, its amounts, its one mapping), which at
// limit 1000 were nearly all of a candidates request's allocations. Every
// list is capacity-capped, so an append to one (merge, render) copies
// instead of writing into its neighbour. A chunk lives while any request
// cut from it does.
type areqSlab struct {
	areqs []areq
	res   []resReq
	maps  []mapEntry
}

// slabChunk is how many of each a chunk holds.
const slabChunk = 128

func (s *areqSlab) areq() *areq {
	if len(s.areqs) == cap(s.areqs) {
		s.areqs = make([]areq, 0, slabChunk)
	}
	s.areqs = s.areqs[:len(s.areqs)+1]
	return &s.areqs[len(s.areqs)-1]
}

func (s *areqSlab) resReqs(n int) []resReq {
	if cap(s.res)-len(s.res) < n {
		s.res = make([]resReq, 0, max(slabChunk, n))
	}
	at := len(s.res)
	s.res = s.res[:at+n]
	return s.res[at : at+n : at+n]
}

func (s *areqSlab) mapEntries(n int) []mapEntry {
	if cap(s.maps)-len(s.maps) < n {
		s.maps = make([]mapEntry, 0, max(slabChunk, n))
	}
	at := len(s.maps)
	s.maps = s.maps[:at+n]
	return s.maps[at : at+n : at+n]
}
