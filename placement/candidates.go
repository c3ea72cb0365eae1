package placement

import (
	"context"
	"math/rand/v2"
	"sort"
	"strings"
	"time"
)

// The candidate search mirrors Placement's allocation_candidate.py and
// research_context.py over the in-memory index: each request group yields
// allocation requests anchored at a tree root, groups are merged per anchor
// (group_policy, same_subtree, a final capacity check), then limited.
// Placement builds every candidate before applying limit and returns them
// in no defined order; when a query has one request group the answer does
// not depend on the others, so the search stops at limit instead, and
// with several the merge stops once limit answers are kept (the ones
// Placement's limit keeps). The search's work is bounded
// (candidate_budget.go) and its long merges run off the index's lock
// (candidate_view.go).

// resReq is an amount of one class from one provider.
type resReq struct {
	slot   int32
	rc     int32
	amount int64
}

// mapEntry says a provider satisfied (part of) the group with suffix.
type mapEntry struct {
	suffix string
	slot   int32
}

// areq is an allocation request under construction.
type areq struct {
	anchor       int32
	res          []resReq
	mappings     []mapEntry
	sameProvider bool
}

// groupCtx is a request group resolved against the index.
type groupCtx struct {
	suffix       string
	sameProvider bool
	rcs          []int32
	amounts      []int64
	required     [][]int32
	forbidden    []int32
	hasMemberOf  bool
	inAggs       bitset
	badAggs      bitset
	treeRoot     string
}

// AllocationCandidates answers a GET /allocation_candidates query from the
// in-memory index, which may lag etcd by a watch delivery: the claim that
// follows compares generations, so a stale answer costs a retry, never an
// over-commit. A query too large to answer in reason is ErrSearchTooLarge
// (candidate_budget.go); one whose ctx ends stops early with ctx's error,
// or ErrSearchTooLarge when its deadline passed.
func (s *Service) AllocationCandidates(ctx context.Context, q CandidateQuery) (*Candidates, error) {
	var out *Candidates
	err := s.runSearch(ctx, q, func(st *indexState, areqs []*areq, excludeNested, ok bool) {
		if !ok {
			out = emptyCandidates()
			return
		}
		out = st.render(areqs, excludeNested, q.OmitMappings)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// runSearch runs q's search under the index's read lock, or on a view
// of its own once the search would hold the lock too long
// (candidate_view.go), and hands finish the state it ended on with the
// search's answer. finish runs before the lock is released when that
// state is the index itself.
func (s *Service) runSearch(ctx context.Context, q CandidateQuery, finish func(st *indexState, out []*areq, excludeNested, ok bool)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if n := len(q.Groups); n > MaxRequestGroups {
		return detailf(ErrSearchTooLarge, "The request has %d request groups; Placement answers at most %d in one allocation candidates request, "+
			"because the search grows as the product of the groups' candidates. Ask for fewer groups (combine those that may share a provider).", n, MaxRequestGroups)
	}
	b := newSearchBudget(ctx, s.candidateWorkLimit.Load(), len(q.Groups), &s.candidateSteps)
	defer b.flush()
	s.idx.mu.RLock()
	locked, lockedAt := true, time.Now()
	release := func() {
		if locked {
			locked = false
			s.idx.mu.RUnlock()
			s.noteSearchLock(time.Since(lockedAt))
		}
	}
	defer release()
	// The search's requests are cut from a pooled slab, which goes back
	// once finish has made its answer (areq_slab.go); deferred before
	// release, it runs after it.
	slab := getSlab()
	defer putSlab(slab)
	live := s.idx.st
	st, out, excludeNested, ok := live.search(q, b, release, s.searchViewAbove.Load(), slab)
	if st != live {
		s.searchViews.Add(1)
	}
	if b.err != nil {
		return b.err
	}
	finish(st, out, excludeNested, ok)
	return nil
}

func emptyCandidates() *Candidates {
	return &Candidates{AllocationRequests: []AllocationRequest{}, ProviderSummaries: map[string]ProviderSummary{}}
}

// search finds q's allocation requests, limited, in answer order, and
// returns the state they name slots of: st itself, or the view the
// search moved to after calling release (which gives up st's lock; nil:
// never move) when the merge may try more than viewAbove combinations.
// The requests and the list of them are cut from slab, whose owner
// keeps it until they are no longer used. excludeNested says the pre-1.29 nested exclusion applied;
// ok false means the answer is empty. When b stops the search, b.err
// says why and the answer is incomplete.
func (st *indexState) search(q CandidateQuery, b *searchBudget, release func(), viewAbove int64, slab *areqSlab) (_ *indexState, out []*areq, excludeNested, ok bool) {
	if len(q.Groups) == 0 {
		return st, nil, false, false
	}
	anchorOK, ok := st.anchorFilter(q.RootRequired, q.RootForbidden)
	if !ok {
		return st, nil, false, false
	}
	groups := make([]*groupCtx, 0, len(q.Groups))
	for _, g := range q.Groups {
		gc, ok := st.buildGroup(g)
		if !ok {
			return st, nil, false, false
		}
		groups = append(groups, gc)
	}
	hasTrees := !st.allSingletons()
	excludeNested = q.NotNestedAware && hasTrees
	var sharingAnchors map[int32][]int32
	if st.sharing.count() > 0 {
		sharingAnchors = st.sharingAnchors()
	}
	s := &search{st: st, anchorOK: anchorOK, sharingAnchors: sharingAnchors, hasTrees: hasTrees, budget: b, slab: slab}
	if n := len(st.slots); q.RandomStart && n > 0 {
		s.start = rand.Int32N(int32(n))
	}

	if len(groups) == 1 {
		// One group: stream, dropping what the nested exclusion would
		// drop, and stop at limit.
		g := groups[0]
		// A sharing provider's request is found once per anchor it serves;
		// Placement answers each distinct request once.
		var seen map[string]bool
		if sharingAnchors != nil {
			seen = map[string]bool{}
		}
		out = slab.out[:0]
		s.group(g, func(a *areq) bool {
			if excludeNested && !singleProviderPerTree(st, a) {
				return true
			}
			if seen != nil {
				k := areqKey(a)
				if seen[k] {
					return true
				}
				seen[k] = true
			}
			out = append(out, a)
			return q.Limit <= 0 || len(out) < q.Limit
		})
		slab.out = out // its array serves the next search
		return st, out, excludeNested, true
	}
	perGroup := make([][]*areq, len(groups))
	for i, g := range groups {
		s.group(g, func(a *areq) bool {
			perGroup[i] = append(perGroup[i], a)
			return true
		})
		if !b.check() {
			return st, nil, false, false
		}
		if len(perGroup[i]) == 0 {
			return st, nil, false, false
		}
	}
	plan := planMerge(len(groups), perGroup)
	if plan.bound > viewAbove && release != nil {
		view, remap := st.viewFor(plan)
		release()
		plan = plan.remapped(remap)
		s.st = view
	}
	s.merge(groups, plan, q, func(a *areq) bool {
		if excludeNested && !singleProviderPerTree(s.st, a) {
			return true
		}
		out = append(out, a)
		return q.Limit <= 0 || len(out) < q.Limit
	})
	return s.st, out, excludeNested, true
}

// search holds what one query computed once for all its groups.
type search struct {
	st             *indexState
	anchorOK       func(root int32) bool
	sharingAnchors map[int32][]int32 // sharing slot -> anchor root slots
	hasTrees       bool
	// start is the slot the walks begin at (they wrap around): 0, or
	// random for CandidateQuery.RandomStart.
	start int32
	// budget counts the combinations tried (candidate_budget.go).
	budget *searchBudget
	// slab is what the requests are cut from.
	slab *areqSlab
}

func (st *indexState) buildGroup(g RequestGroup) (*groupCtx, bool) {
	gc := &groupCtx{suffix: g.Suffix, sameProvider: g.Suffix != ""}
	rcs := make([]string, 0, len(g.Resources))
	for rc := range g.Resources {
		rcs = append(rcs, rc)
	}
	sort.Strings(rcs)
	// Sized once: grown by append, three classes were five allocations.
	gc.rcs, gc.amounts = make([]int32, 0, len(rcs)), make([]int64, 0, len(rcs))
	for _, rc := range rcs {
		id, ok := st.classID(rc, false)
		if !ok {
			return nil, false // no provider has the class
		}
		gc.rcs = append(gc.rcs, id)
		gc.amounts = append(gc.amounts, g.Resources[rc])
	}
	anySets := make([][]string, 0, len(g.Required)+len(g.RequiredAny))
	for _, t := range g.Required {
		anySets = append(anySets, []string{t})
	}
	anySets = append(anySets, g.RequiredAny...)
	for _, set := range anySets {
		var ids []int32
		for _, t := range set {
			if id, ok := st.traitID(t, false); ok {
				ids = append(ids, id)
			}
		}
		if len(ids) == 0 {
			return nil, false // no provider can have any of them
		}
		gc.required = append(gc.required, ids)
	}
	for _, t := range g.Forbidden {
		if id, ok := st.traitID(t, false); ok {
			gc.forbidden = append(gc.forbidden, id)
		}
	}
	if len(g.MemberOf) > 0 {
		gc.hasMemberOf = true
		for i, anyOf := range g.MemberOf {
			var set bitset
			for _, a := range anyOf {
				if id, ok := st.aggID(a, false); ok {
					set = orBits(set, st.aggBits[id])
				}
			}
			if i == 0 {
				gc.inAggs = set
			} else {
				gc.inAggs = andBits(gc.inAggs, set)
			}
		}
		if gc.inAggs.count() == 0 {
			return nil, false
		}
	}
	for _, a := range g.ForbiddenAggregates {
		if id, ok := st.aggID(a, false); ok {
			gc.badAggs = orBits(gc.badAggs, st.aggBits[id])
		}
	}
	if g.InTree != "" {
		e, ok := st.providers[g.InTree]
		if !ok {
			return nil, false
		}
		gc.treeRoot = e.p.RootProviderUUID
	}
	return gc, true
}

func orBits(a, b bitset) bitset {
	out := make(bitset, max(len(a), len(b)))
	copy(out, a)
	for i, w := range b {
		out[i] |= w
	}
	return out
}

func andBits(a, b bitset) bitset {
	out := make(bitset, min(len(a), len(b)))
	for i := range out {
		out[i] = a[i] & b[i]
	}
	return out
}

// anchorFilter builds the root_required test (1.35): a root qualifies when
// it has every required trait and none of the forbidden ones. ok is false
// when nothing can qualify.
func (st *indexState) anchorFilter(required, forbidden []string) (func(int32) bool, bool) {
	if len(required) == 0 && len(forbidden) == 0 {
		return func(int32) bool { return true }, true
	}
	var req, forb []int32
	for _, t := range required {
		id, ok := st.traitID(t, false)
		if !ok {
			return nil, false
		}
		req = append(req, id)
	}
	for _, t := range forbidden {
		if id, ok := st.traitID(t, false); ok {
			forb = append(forb, id)
		}
	}
	return func(root int32) bool {
		e := st.slots[root]
		if e == nil || e.hasParent {
			return false
		}
		for _, id := range req {
			if !st.traitBits[id].has(root) {
				return false
			}
		}
		for _, id := range forb {
			if st.traitBits[id].has(root) {
				return false
			}
		}
		return true
	}, true
}

// rootSlot is the slot of the root of e's tree (e's own when the root is
// not indexed, which only a half-applied tree move can cause).
func (st *indexState) rootSlot(e *rpEntry) int32 {
	if e.isRoot {
		return e.slot
	}
	if r, ok := st.providers[e.p.RootProviderUUID]; ok {
		return r.slot
	}
	return e.slot
}

// sharingAnchors maps every sharing provider to the roots of the trees that
// share an aggregate with it (its own tree included when it is in one).
func (st *indexState) sharingAnchors() map[int32][]int32 {
	out := map[int32][]int32{}
	for w, word := range st.sharing {
		for word != 0 {
			b := int32(w*64) + int32(trailingZeros(word))
			word &= word - 1
			e := st.slots[b]
			if e == nil {
				continue
			}
			seen := map[int32]bool{}
			var anchors []int32
			for _, agg := range e.aggs {
				forEachBit(st.aggBits[agg], func(q int32) {
					if qe := st.slots[q]; qe != nil {
						r := st.rootSlot(qe)
						if !seen[r] {
							seen[r] = true
							anchors = append(anchors, r)
						}
					}
				})
			}
			sort.Slice(anchors, func(i, j int) bool { return anchors[i] < anchors[j] })
			out[b] = anchors
		}
	}
	return out
}

func forEachBit(b bitset, fn func(int32)) {
	for w, word := range b {
		for word != 0 {
			fn(int32(w*64) + int32(trailingZeros(word)))
			word &= word - 1
		}
	}
}

// traitsOK checks a group's trait rules on one provider alone.
func (st *indexState) traitsOK(g *groupCtx, slot int32) bool {
	for _, anyOf := range g.required {
		hit := false
		for _, id := range anyOf {
			if st.traitBits[id].has(slot) {
				hit = true
				break
			}
		}
		if !hit {
			return false
		}
	}
	for _, id := range g.forbidden {
		if st.traitBits[id].has(slot) {
			return false
		}
	}
	return true
}

// group emits the allocation requests of one group; emit returns false to
// stop the search.
func (s *search) group(g *groupCtx, emit func(*areq) bool) {
	if !g.sameProvider && (s.hasTrees || s.sharingAnchors != nil) {
		s.multiProvider(g, emit)
		return
	}
	s.singleProvider(g, emit)
}

// singleProvider is the path where one provider satisfies the whole group
// (suffixed groups, or no trees and no sharing anywhere). It is the hot
// loop of every scheduling request, so it reads the compact columns only.
func (s *search) singleProvider(g *groupCtx, emit func(*areq) bool) {
	st := s.st
	cols := make([]*classCol, len(g.rcs))
	for i, rc := range g.rcs {
		cols[i] = st.cols[rc]
	}
	slab := s.slab
	n := int32(len(st.slots))
	for i := int32(0); i < n; i++ {
		slot := i + s.start
		if slot >= n {
			slot -= n
		}
		e := st.slots[slot]
		if e == nil {
			continue
		}
		fit := true
		for i, c := range cols {
			if !c.fits(slot, g.amounts[i]) {
				fit = false
				break
			}
		}
		if !fit {
			continue
		}
		// Placement applies in_tree only to the resource query, so a
		// resourceless group ignores it.
		if len(cols) > 0 && g.treeRoot != "" && e.p.RootProviderUUID != g.treeRoot {
			continue
		}
		if !st.traitsOK(g, slot) {
			continue
		}
		if g.hasMemberOf && !g.inAggs.has(slot) {
			continue
		}
		if g.badAggs.has(slot) {
			continue
		}
		root := st.rootSlot(e)
		res := slab.resReqs(len(g.rcs))
		for i, rc := range g.rcs {
			res[i] = resReq{slot: slot, rc: rc, amount: g.amounts[i]}
		}
		mk := func(anchor int32) *areq {
			a := slab.areq()
			*a = areq{anchor: anchor, res: res, mappings: slab.mapEntries(1), sameProvider: g.sameProvider}
			a.mappings[0] = mapEntry{g.suffix, slot}
			return a
		}
		if s.anchorOK(root) {
			if !emit(mk(root)) {
				return
			}
		}
		for _, anchor := range s.sharingAnchors[slot] {
			if anchor == root || !s.anchorOK(anchor) {
				continue
			}
			if !emit(mk(anchor)) {
				return
			}
		}
	}
}

// multiProvider is the unsuffixed group when trees or sharing providers
// exist: each class may come from a different provider of one tree, or
// from a sharing provider in an aggregate with it. Trees are visited in
// root slot order; each yields the product of its per-class choices.
func (s *search) multiProvider(g *groupCtx, emit func(*areq) bool) {
	st := s.st
	if len(g.rcs) == 0 {
		return // Placement finds no trees for a resourceless unsuffixed group
	}
	if len(g.required) > 0 {
		any := false
		for _, set := range g.required {
			for _, id := range set {
				if st.traitBits[id].count() > 0 {
					any = true
				}
			}
		}
		if !any {
			return
		}
	}
	// Sharing providers offered to each anchor, per class.
	var shared map[int32][]int32 // anchor -> sharing slots
	if s.sharingAnchors != nil && g.treeRoot == "" {
		shared = map[int32][]int32{}
		for sp, anchors := range s.sharingAnchors {
			if g.hasMemberOf && !g.inAggs.has(sp) {
				continue
			}
			for _, a := range anchors {
				shared[a] = append(shared[a], sp)
			}
		}
		for a := range shared {
			sort.Slice(shared[a], func(i, j int) bool { return shared[a][i] < shared[a][j] })
		}
	}
	seen := map[string]bool{} // Placement keeps a set: equal requests collapse
	n := int32(len(st.slots))
	choices := make([][]int32, len(g.rcs))
	for i := int32(0); i < n; i++ {
		root := i + s.start
		if root >= n {
			root -= n
		}
		re := st.slots[root]
		if re == nil || re.p.ParentProviderUUID != "" {
			continue
		}
		if g.treeRoot != "" && re.p.UUID != g.treeRoot {
			continue
		}
		if !s.anchorOK(root) {
			continue
		}
		var members []int32
		if tree, ok := st.trees[re.p.UUID]; ok && tree.len() == 1 {
			members = []int32{root}
		} else {
			members = st.treeSlots(re.p.UUID)
		}
		rootInAggs := g.hasMemberOf && g.inAggs.has(root)
		rootBad := g.badAggs.has(root)
		if rootBad {
			continue
		}
		ok := true
		for i, rc := range g.rcs {
			c := st.cols[rc]
			choices[i] = choices[i][:0]
			add := func(p int32) {
				if !c.fits(p, g.amounts[i]) {
					return
				}
				if g.hasMemberOf && !rootInAggs && !g.inAggs.has(p) {
					return
				}
				if g.badAggs.has(p) {
					return
				}
				for _, x := range choices[i] {
					if x == p {
						return
					}
				}
				choices[i] = append(choices[i], p)
			}
			for _, p := range members {
				add(p)
			}
			for _, sp := range shared[root] {
				add(sp)
			}
			if len(choices[i]) == 0 {
				ok = false
				break
			}
		}
		if !ok {
			continue
		}
		if (len(g.required) > 0 || len(g.forbidden) > 0) && s.sharingAnchors == nil && !st.treeTraitsPossible(g, choices) {
			continue
		}
		// The product of the per-class choices.
		idx := make([]int, len(choices))
		for {
			if !s.budget.step() {
				return
			}
			combo := make([]int32, len(choices))
			for i := range choices {
				combo[i] = choices[i][idx[i]]
			}
			if st.comboTraitsOK(g, combo) {
				a := &areq{anchor: root}
				for i, p := range combo {
					a.res = append(a.res, resReq{slot: p, rc: g.rcs[i], amount: g.amounts[i]})
					a.mappings = appendMapping(a.mappings, mapEntry{g.suffix, p})
				}
				k := areqKey(a)
				if !seen[k] {
					seen[k] = true
					if !emit(a) {
						return
					}
				}
			}
			i := len(idx) - 1
			for ; i >= 0; i-- {
				idx[i]++
				if idx[i] < len(choices[i]) {
					break
				}
				idx[i] = 0
			}
			if i < 0 {
				break
			}
		}
	}
}

// treeTraitsPossible is Placement's _get_trees_with_traits: the tree's
// candidate providers without forbidden traits must together be able to
// meet the required traits.
func (st *indexState) treeTraitsPossible(g *groupCtx, choices [][]int32) bool {
	good := map[int32]bool{}
	for _, cs := range choices {
		for _, p := range cs {
			clean := true
			for _, id := range g.forbidden {
				if st.traitBits[id].has(p) {
					clean = false
					break
				}
			}
			if clean {
				good[p] = true
			}
		}
	}
	if len(good) == 0 {
		return false
	}
	for _, anyOf := range g.required {
		hit := false
		for p := range good {
			for _, id := range anyOf {
				if st.traitBits[id].has(p) {
					hit = true
				}
			}
		}
		if !hit {
			return false
		}
	}
	return true
}

// comboTraitsOK is _check_traits_for_alloc_request: no provider used may
// have a forbidden trait, and together they meet every required any-of set.
func (st *indexState) comboTraitsOK(g *groupCtx, combo []int32) bool {
	for _, p := range combo {
		for _, id := range g.forbidden {
			if st.traitBits[id].has(p) {
				return false
			}
		}
	}
	for _, anyOf := range g.required {
		hit := false
		for _, p := range combo {
			for _, id := range anyOf {
				if st.traitBits[id].has(p) {
					hit = true
				}
			}
		}
		if !hit {
			return false
		}
	}
	return true
}

func appendMapping(ms []mapEntry, m mapEntry) []mapEntry {
	for _, x := range ms {
		if x == m {
			return ms
		}
	}
	return append(ms, m)
}

// areqKey identifies an allocation request as Placement's set does: its
// resources and mappings, not its anchor.
func areqKey(a *areq) string {
	res := make([]string, 0, len(a.res))
	for _, r := range a.res {
		res = append(res, itoa(int64(r.slot))+"/"+itoa(int64(r.rc))+"/"+itoa(r.amount))
	}
	sort.Strings(res)
	ms := make([]string, 0, len(a.mappings))
	for _, m := range a.mappings {
		ms = append(ms, m.suffix+"="+itoa(int64(m.slot)))
	}
	sort.Strings(ms)
	return strings.Join(res, ",") + "|" + strings.Join(ms, ",")
}

func singleProviderPerTree(st *indexState, a *areq) bool {
	roots := map[int32]int32{}
	for _, r := range a.res {
		root := st.rootSlot(st.slots[r.slot])
		if p, ok := roots[root]; ok && p != r.slot {
			return false
		}
		roots[root] = r.slot
	}
	return true
}
