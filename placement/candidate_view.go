package placement

import (
	"math"
	"slices"
)

// The search's snapshot. A candidate search runs under the index's read
// lock, and while it holds it the watch cannot apply events nor a claim
// be assumed (a writer waiting for the lock also holds back every new
// reader: claims planned from the index wait too). Finding each group's
// requests is one pass over the providers; merging them is a product
// over the groups that can be millions of combinations. So when the
// merge may try more than lockedMergeSteps combinations, the search
// copies what the merge and the rendering read into a view of its own,
// releases the lock, and goes on from the view while followers keep
// applying events to the index.
//
// The view is consistent because indexed provider records are never
// mutated (a change replaces the record): the view is a fresh
// indexState into which the records of every tree the merge can draw
// from (and the sharing providers it may use) are put, as they are at
// the search's revision. Their slots keep their order (they are put in
// slot order into an empty state, and class ids are made in the index's
// order), so the merge visits anchors and combinations in the order it
// would have on the index itself and the answer is the same, byte for
// byte. The cached provider summaries are carried over, so an answer
// shares them with the index as it would have.

// SetSearchViewAbove sets the most combinations a merge tries under the
// index's lock before the search moves to a view (default
// lockedMergeSteps). Tests set 0 to run every multi-group search on a
// view, whose answers must be the index's own.
func (s *Service) SetSearchViewAbove(n int64) { s.searchViewAbove.Store(n) }

// lockedMergeSteps is the most combinations a merge tries under the
// index's lock: below it the view would cost more than it saves (a
// four-group request over a thousand NUMA trees is 8,000, a few
// milliseconds).
const lockedMergeSteps = 16_384

// mergePlan is the groups' allocation requests by anchor, the merge's
// input.
type mergePlan struct {
	anchors  []int32             // in slot order; each has requests of every group
	byAnchor map[int32][][]*areq // anchor -> per group
	// bound is how many combinations the merge may try: the sum over
	// anchors of the product of their groups' requests (saturating).
	bound int64
}

// planMerge buckets each group's requests by anchor, keeping only the
// anchors every group reaches.
func planMerge(ngroups int, perGroup [][]*areq) *mergePlan {
	byAnchor := map[int32][][]*areq{}
	var anchors []int32
	for gi, list := range perGroup {
		for _, a := range list {
			lists, ok := byAnchor[a.anchor]
			if !ok {
				lists = make([][]*areq, ngroups)
				byAnchor[a.anchor] = lists
				anchors = append(anchors, a.anchor)
			}
			lists[gi] = append(lists[gi], a)
		}
	}
	slices.Sort(anchors)
	p := &mergePlan{byAnchor: byAnchor}
	for _, anchor := range anchors {
		combos := int64(1)
		for _, l := range byAnchor[anchor] {
			combos = satMul(combos, int64(len(l)))
		}
		if combos == 0 {
			delete(byAnchor, anchor)
			continue
		}
		p.anchors = append(p.anchors, anchor)
		p.bound = satAdd(p.bound, combos)
	}
	return p
}

func satMul(a, b int64) int64 {
	if a == 0 || b == 0 {
		return 0
	}
	if a > math.MaxInt64/b {
		return math.MaxInt64
	}
	return a * b
}

func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// viewFor copies into a fresh state the providers plan can draw from:
// the whole tree of every anchor, and every provider a request names (a
// sharing provider may sit outside the anchor's tree). It returns the
// view and the slot each copied provider has in it. Call it under the
// index's read lock; the view is the caller's alone.
func (st *indexState) viewFor(plan *mergePlan) (*indexState, map[int32]int32) {
	want := map[int32]struct{}{}
	for _, anchor := range plan.anchors {
		want[anchor] = struct{}{}
		if e := st.slots[anchor]; e != nil {
			if tree, ok := st.trees[e.p.RootProviderUUID]; ok {
				for slot := range tree.all() {
					want[slot] = struct{}{}
				}
			}
		}
		for _, list := range plan.byAnchor[anchor] {
			for _, a := range list {
				for _, r := range a.res {
					want[r.slot] = struct{}{}
				}
				for _, m := range a.mappings {
					want[m.slot] = struct{}{}
				}
			}
		}
	}
	// commonSubtree walks up parents: a parent outside the tree's index
	// entry (a half-applied move) is copied too.
	for slot := range want {
		for e := st.slots[slot]; e != nil && e.p.ParentProviderUUID != ""; {
			pe, ok := st.providers[e.p.ParentProviderUUID]
			if !ok {
				break
			}
			if _, seen := want[pe.slot]; seen {
				break
			}
			want[pe.slot] = struct{}{}
			e = pe
		}
	}
	order := make([]int32, 0, len(want))
	for slot := range want {
		if st.slots[slot] != nil {
			order = append(order, slot)
		}
	}
	slices.Sort(order)
	view := newIndexState()
	view.rev = st.rev
	for _, name := range st.classNames() {
		view.classID(name, true)
	}
	remap := make(map[int32]int32, len(order))
	for _, slot := range order {
		e := st.slots[slot]
		view.putProvider(e.p, e.modRev)
		ve := view.providers[e.p.UUID]
		ve.createRev = e.createRev
		if ps := e.summary.Load(); ps != nil {
			ve.summary.Store(ps)
		}
		remap[slot] = ve.slot
		view.indexSlots = append(view.indexSlots, make([]int32, int(ve.slot)+1-len(view.indexSlots))...)
		view.indexSlots[ve.slot] = slot
	}
	return view, remap
}

// remapped is plan with every slot its requests name moved to the view's
// (remap from viewFor). The requests are copied: the index's search may
// share one res slice between requests.
func (p *mergePlan) remapped(remap map[int32]int32) *mergePlan {
	out := &mergePlan{byAnchor: make(map[int32][][]*areq, len(p.anchors)), bound: p.bound}
	for _, anchor := range p.anchors {
		na := remap[anchor]
		out.anchors = append(out.anchors, na)
		lists := p.byAnchor[anchor]
		nl := make([][]*areq, len(lists))
		for gi, list := range lists {
			nl[gi] = make([]*areq, len(list))
			for i, a := range list {
				b := &areq{anchor: na, sameProvider: a.sameProvider,
					res: make([]resReq, len(a.res)), mappings: make([]mapEntry, len(a.mappings))}
				for j, r := range a.res {
					b.res[j] = resReq{slot: remap[r.slot], rc: r.rc, amount: r.amount}
				}
				for j, m := range a.mappings {
					b.mappings[j] = mapEntry{suffix: m.suffix, slot: remap[m.slot]}
				}
				nl[gi][i] = b
			}
		}
		out.byAnchor[na] = nl
	}
	return out
}
