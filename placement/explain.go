package placement

import (
	"context"
	"sort"
	"strings"
)

// Why a query found no room. The candidate search answers "which trees
// fit"; when a request fails, an operator needs "why did each other tree
// not": MEMORY_MB was exhausted, VCPU 32 is over every host's max_unit,
// the host carries COMPUTE_STATUS_DISABLED. ExplainCandidates works that
// out per tree, over the same index, and only when asked: the scheduler
// asks once a request has failed, so the search that succeeds pays
// nothing for it.
//
// The per-condition checks follow Placement's order of the work, cheap
// administrative conditions first (the tree, the root's traits, aggregates),
// then the resources, so a disabled host that is also full is reported
// as disabled: that is what the operator must change. Within a class the
// unit limits come before the room (a flavor over max_unit never fits
// however empty the host). For a tree of several providers the checks are
// per class across its providers; a tree whose every part fits somewhere
// but that the search still refused (group_policy, same_subtree, traits
// spread over providers) is MissCombination.

// MissKind is the condition of a query one tree failed.
type MissKind uint8

// The kinds, in the order they are checked.
const (
	// MissNone: the tree fits (RootFit.Fits), or no reason was needed.
	MissNone MissKind = iota
	// MissInTree: in_tree names another tree.
	MissInTree
	// MissRootRequiredTrait: root_required names a trait the root lacks.
	MissRootRequiredTrait
	// MissRootForbiddenTrait: the root has a trait root_required forbids
	// (a disabled compute node has COMPUTE_STATUS_DISABLED).
	MissRootForbiddenTrait
	// MissForbiddenAggregate: the tree is in an aggregate member_of forbids.
	MissForbiddenAggregate
	// MissMemberOf: the tree is in none of a member_of's aggregates
	// (Class is the any-of list, comma-separated).
	MissMemberOf
	// MissForbiddenTrait: the root has a forbidden trait.
	MissForbiddenTrait
	// MissRequiredTrait: no provider of the tree has the trait (Class is
	// an any-of set, "|"-separated).
	MissRequiredTrait
	// MissNoInventory: no provider of the tree has the class.
	MissNoInventory
	// MissMaxUnit: Amount is over the class's max_unit (Limit, the
	// largest of the tree's providers).
	MissMaxUnit
	// MissMinUnit: Amount is under the class's min_unit (Limit).
	MissMinUnit
	// MissStepSize: Amount is not a multiple of step_size (Limit).
	MissStepSize
	// MissCapacity: not enough free: Free is capacity ((total - reserved)
	// × allocation_ratio) less usage, on the provider with the most.
	MissCapacity
	// MissCombination: each condition is met somewhere in the tree, but
	// no allocation request combines them.
	MissCombination
)

// Miss is the first condition of a query a tree failed.
type Miss struct {
	Kind MissKind
	// Class is the resource class, trait, aggregate list or tree the
	// condition is about.
	Class string
	// Amount is what the request asks of Class (resource kinds).
	Amount int64
	// Free is what is left of Class (MissCapacity).
	Free int64
	// Limit is the max_unit, min_unit or step_size Amount fails.
	Limit int64
}

// RootFit is one tree's answer to a query: whether it fits and, if not,
// why.
type RootFit struct {
	// Root is the uuid of the tree's root, Name its name (the compute
	// node's host name for a compute node).
	Root, Name string
	Fits       bool
	Miss       Miss
}

// ExplainCandidates answers q for every tree whose root is not a sharing
// provider: whether the search finds an allocation request anchored at it
// (whatever q's limit) and, for those it does not, the first condition
// failed. It searches the whole index: a failed request's cost, never a
// successful one's.
func (s *Service) ExplainCandidates(ctx context.Context, q CandidateQuery) ([]RootFit, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// The search below is bounded as a request's is (work and ctx): a
	// failed request must not buy an unbounded walk under the lock. A
	// search that stops leaves fits unknown; each tree is then judged by
	// its own conditions alone.
	b := newSearchBudget(ctx, s.candidateWorkLimit.Load(), len(q.Groups), &s.candidateSteps)
	defer b.flush()
	s.idx.mu.RLock()
	defer s.idx.mu.RUnlock()
	return s.idx.st.explain(q, b), nil
}

func (st *indexState) explain(q CandidateQuery, b *searchBudget) []RootFit {
	full := q
	full.Limit, full.RandomStart = 0, false
	fits := map[int32]bool{}
	slab := getSlab()
	if _, areqs, _, ok := st.search(full, b, nil, 0, slab); ok && b.err == nil {
		for _, a := range areqs {
			fits[a.anchor] = true
		}
	}
	putSlab(slab)
	var shared map[int32][]int32 // anchor root -> sharing slots
	if st.sharing.count() > 0 {
		shared = map[int32][]int32{}
		for sp, anchors := range st.sharingAnchors() {
			for _, a := range anchors {
				shared[a] = append(shared[a], sp)
			}
		}
	}
	// Each group's classes in order, sorted once for every root.
	rcs := make([][]string, len(q.Groups))
	for i, g := range q.Groups {
		for rc := range g.Resources {
			rcs[i] = append(rcs[i], rc)
		}
		sort.Strings(rcs[i])
	}
	var out []RootFit
	for _, e := range st.slots {
		if e == nil || e.p.ParentProviderUUID != "" || st.sharing.has(e.slot) {
			continue
		}
		rf := RootFit{Root: e.p.UUID, Name: e.p.Name, Fits: fits[e.slot]}
		if !rf.Fits {
			rf.Miss = st.firstMiss(q, rcs, e, shared[e.slot])
		}
		out = append(out, rf)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// firstMiss is the first condition of q the tree rooted at root fails,
// with its sharing providers; MissCombination when each is met.
func (st *indexState) firstMiss(q CandidateQuery, rcs [][]string, root *rpEntry, sharing []int32) Miss {
	// A tree the request did not name is out whatever else is true of it.
	for _, g := range q.Groups {
		if g.InTree == "" {
			continue
		}
		if e, ok := st.providers[g.InTree]; !ok || e.p.RootProviderUUID != root.p.UUID {
			return Miss{Kind: MissInTree, Class: g.InTree}
		}
	}
	for _, t := range q.RootRequired {
		if !st.hasTrait(root.slot, t) {
			return Miss{Kind: MissRootRequiredTrait, Class: t}
		}
	}
	for _, t := range q.RootForbidden {
		if st.hasTrait(root.slot, t) {
			return Miss{Kind: MissRootForbiddenTrait, Class: t}
		}
	}
	members := []int32{root.slot}
	if tree, ok := st.trees[root.p.UUID]; ok && tree.len() > 1 {
		members = st.treeSlots(root.p.UUID)
	}
	for i, g := range q.Groups {
		if m := st.groupMiss(g, rcs[i], root, members, sharing); m.Kind != MissNone {
			return m
		}
	}
	return Miss{Kind: MissCombination}
}

// groupMiss is the first condition of one request group the tree fails;
// rcs are the group's classes, sorted.
func (st *indexState) groupMiss(g RequestGroup, rcs []string, root *rpEntry, members, sharing []int32) Miss {
	inAny := func(aggs []string) bool {
		for _, a := range aggs {
			id, ok := st.aggID(a, false)
			if !ok {
				continue
			}
			for _, m := range members {
				if st.aggBits[id].has(m) {
					return true
				}
			}
		}
		return false
	}
	if inAny(g.ForbiddenAggregates) {
		return Miss{Kind: MissForbiddenAggregate, Class: strings.Join(g.ForbiddenAggregates, ",")}
	}
	for _, anyOf := range g.MemberOf {
		if !inAny(anyOf) {
			return Miss{Kind: MissMemberOf, Class: strings.Join(anyOf, ",")}
		}
	}
	for _, t := range g.Forbidden {
		if st.hasTrait(root.slot, t) {
			return Miss{Kind: MissForbiddenTrait, Class: t}
		}
	}
	sets := make([][]string, 0, len(g.Required)+len(g.RequiredAny))
	for _, t := range g.Required {
		sets = append(sets, []string{t})
	}
	sets = append(sets, g.RequiredAny...)
	for _, set := range sets {
		found := false
		for _, t := range set {
			for _, m := range members {
				if st.hasTrait(m, t) {
					found = true
				}
			}
		}
		if !found {
			return Miss{Kind: MissRequiredTrait, Class: strings.Join(set, "|")}
		}
	}
	for _, rc := range rcs {
		if m := st.classMiss(rc, g.Resources[rc], members, sharing); m.Kind != MissNone {
			return m
		}
	}
	return Miss{}
}

// classMiss says why no provider of the tree (or shared with it) can give
// amount of rc, or MissNone when one can. Among several providers it
// reports what is closest to fitting: the room of those whose unit limits
// admit the amount, else the limit that refuses it.
func (st *indexState) classMiss(rc string, amount int64, members, sharing []int32) Miss {
	id, ok := st.classID(rc, false)
	if !ok {
		return Miss{Kind: MissNoInventory, Class: rc, Amount: amount}
	}
	c := st.cols[id]
	best := Miss{Kind: MissNoInventory, Class: rc, Amount: amount}
	consider := func(p int32) bool {
		if c.capacity[p] < 0 {
			return false
		}
		if c.fits(p, amount) {
			return true
		}
		var m Miss
		switch {
		case amount > c.maxUnit[p]:
			m = Miss{Kind: MissMaxUnit, Limit: c.maxUnit[p]}
		case amount < c.minUnit[p]:
			m = Miss{Kind: MissMinUnit, Limit: c.minUnit[p]}
		case c.step[p] > 1 && amount%c.step[p] != 0:
			m = Miss{Kind: MissStepSize, Limit: c.step[p]}
		default:
			m = Miss{Kind: MissCapacity, Free: c.capacity[p] - c.used[p]}
		}
		m.Class, m.Amount = rc, amount
		best = closer(best, m)
		return false
	}
	for _, p := range members {
		if consider(p) {
			return Miss{}
		}
	}
	for _, p := range sharing {
		if consider(p) {
			return Miss{}
		}
	}
	return best
}

// closer is whichever of two misses of one class is closer to fitting: a
// lack of room over a unit limit over no inventory; the most free, the
// largest max_unit, the smallest min_unit.
func closer(a, b Miss) Miss {
	rank := func(k MissKind) int {
		switch k {
		case MissCapacity:
			return 4
		case MissStepSize:
			return 3
		case MissMinUnit:
			return 2
		case MissMaxUnit:
			return 1
		}
		return 0
	}
	switch ra, rb := rank(a.Kind), rank(b.Kind); {
	case ra != rb:
		if rb > ra {
			return b
		}
		return a
	case a.Kind == MissCapacity && b.Free > a.Free,
		a.Kind == MissMaxUnit && b.Limit > a.Limit,
		a.Kind == MissMinUnit && b.Limit < a.Limit:
		return b
	}
	return a
}
