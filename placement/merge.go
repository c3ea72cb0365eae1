package placement

// merge is Placement's _merge_candidates: per anchor root, every
// combination of one request from each group that satisfies group_policy
// and same_subtree, consolidated and checked against capacity again (two
// groups may take the same class from the same provider). Each distinct
// result goes to accept, in order, until accept returns false; Placement
// builds them all and then applies limit, so stopping once limit has
// been accepted gives the same answer. Every combination tried is a step
// of the search's budget.
func (s *search) merge(groups []*groupCtx, plan *mergePlan, q CandidateQuery, accept func(*areq) bool) {
	st := s.st
	numGranular := 0
	for _, g := range groups {
		if g.sameProvider {
			numGranular++
		}
	}
	seen := map[string]bool{}
	for _, anchor := range plan.anchors {
		lists := plan.byAnchor[anchor]
		idx := make([]int, len(lists))
		pick := make([]*areq, len(lists))
		for {
			if !s.budget.step() {
				return
			}
			for i := range lists {
				pick[i] = lists[i][idx[i]]
			}
			if groupPolicyOK(pick, q.GroupPolicy, numGranular) && s.sameSubtreeOK(pick, q.SameSubtree) {
				a := consolidate(anchor, pick)
				if !st.exceedsCapacity(a) {
					k := areqKey(a)
					if !seen[k] {
						seen[k] = true
						if !accept(a) {
							return
						}
					}
				}
			}
			i := len(idx) - 1
			for ; i >= 0; i-- {
				idx[i]++
				if idx[i] < len(lists[i]) {
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

// groupPolicyOK: with "isolate", each granular group uses its own provider.
func groupPolicyOK(pick []*areq, policy string, numGranular int) bool {
	if policy != "isolate" {
		return true
	}
	used := map[int32]bool{}
	for _, a := range pick {
		if a.sameProvider && len(a.mappings) > 0 {
			used[a.mappings[0].slot] = true
		}
	}
	return len(used) == numGranular
}

// sameSubtreeOK (1.36): the providers of the named groups must all sit
// under one of them.
func (s *search) sameSubtreeOK(pick []*areq, subtrees [][]string) bool {
	for _, suffixes := range subtrees {
		want := map[string]bool{}
		for _, x := range suffixes {
			want[x] = true
		}
		rps := map[int32]bool{}
		for _, a := range pick {
			for _, m := range a.mappings {
				if want[m.suffix] {
					rps[m.slot] = true
				}
			}
		}
		if !s.st.commonSubtree(rps) {
			return false
		}
	}
	return true
}

// commonSubtree reports whether one of rps is an ancestor-or-self of all.
func (st *indexState) commonSubtree(rps map[int32]bool) bool {
	if len(rps) <= 1 {
		return true
	}
	var common map[int32]bool
	for rp := range rps {
		anc := map[int32]bool{}
		for e := st.slots[rp]; e != nil; {
			anc[e.slot] = true
			if e.p.ParentProviderUUID == "" {
				break
			}
			e = st.providers[e.p.ParentProviderUUID]
		}
		if common == nil {
			common = anc
			continue
		}
		for x := range common {
			if !anc[x] {
				delete(common, x)
			}
		}
	}
	for rp := range rps {
		if common[rp] {
			return true
		}
	}
	return false
}

func consolidate(anchor int32, pick []*areq) *areq {
	out := &areq{anchor: anchor}
	for _, a := range pick {
	next:
		for _, r := range a.res {
			for i := range out.res {
				if out.res[i].slot == r.slot && out.res[i].rc == r.rc {
					out.res[i].amount += r.amount
					continue next
				}
			}
			out.res = append(out.res, r)
		}
		for _, m := range a.mappings {
			out.mappings = appendMapping(out.mappings, m)
		}
	}
	return out
}

// exceedsCapacity is the final check on consolidated amounts.
func (st *indexState) exceedsCapacity(a *areq) bool {
	for _, r := range a.res {
		c := st.cols[r.rc]
		if c.capacity[r.slot] < 0 || c.used[r.slot]+r.amount > c.capacity[r.slot] || r.amount > c.maxUnit[r.slot] {
			return true
		}
	}
	return false
}
