package placement

import (
	"sort"

	"github.com/berth-project/berth/etcdschema"
)

// render turns allocation requests into the contract's Candidates, with a
// summary of every provider in the trees they draw from (only the providers
// used when the pre-1.29 nested exclusion applied, as Placement does).
//
// The answer shares maps with the index and with other answers, so callers
// must treat it as read-only: each provider's summary is rendered once per
// provider record (a select_destinations at 1,000 candidates otherwise
// spent a quarter of its CPU rebuilding unchanged summaries), and
// allocation requests asking the same amounts of one provider share one
// resources map.
func (st *indexState) render(areqs []*areq, onlyUsed, omitMappings bool) *Candidates {
	out := &Candidates{
		AllocationRequests: make([]AllocationRequest, 0, len(areqs)),
		ProviderSummaries:  make(map[string]ProviderSummary, len(areqs)),
		roots:              make([]string, 0, len(areqs)),
	}
	// Sized for the usual one provider per request: growing these maps
	// was a visible share of select_destinations' allocations.
	names := st.classNames()
	roots := newSlotSet(len(st.slots), len(areqs))
	used := newSlotSet(len(st.slots), len(areqs))
	// Every mapping list starts as a one-element window of one backing
	// array (capacity capped, so a second provider for the same group
	// copies instead of overwriting the next list): one allocation per
	// answer instead of one per allocation request.
	nmap := 0
	for _, a := range areqs {
		if !omitMappings {
			nmap += len(a.mappings)
		}
	}
	backing := make([]string, 0, nmap)
	var lastRes []resReq         // the amounts of the last single-provider request
	var lastMap map[string]int64 // and its resources map, shared while they repeat
	for _, a := range areqs {
		ar := AllocationRequest{Allocations: make(map[string]ProviderAllocation, 1)}
		if !omitMappings {
			ar.Mappings = make(map[string][]string, 1)
		}
		if single, ok := singleProviderRes(a.res); ok {
			if lastMap == nil || !sameAmounts(lastRes, a.res) {
				lastRes, lastMap = a.res, make(map[string]int64, len(a.res))
				for _, r := range a.res {
					lastMap[names[r.rc]] += r.amount
				}
			}
			e := st.slots[single]
			ar.Allocations[e.p.UUID] = ProviderAllocation{Resources: lastMap}
			roots.add(st.rootSlot(e))
			used.add(single)
		} else {
			for _, r := range a.res {
				e := st.slots[r.slot]
				pa, ok := ar.Allocations[e.p.UUID]
				if !ok {
					pa = ProviderAllocation{Resources: make(map[string]int64, len(a.res))}
					ar.Allocations[e.p.UUID] = pa
				}
				pa.Resources[names[r.rc]] += r.amount
				roots.add(st.rootSlot(e))
				used.add(r.slot)
			}
		}
		for _, m := range a.mappings {
			if omitMappings {
				break
			}
			uuid := st.slots[m.slot].p.UUID
			if prev, ok := ar.Mappings[m.suffix]; ok {
				ar.Mappings[m.suffix] = append(prev, uuid)
				continue
			}
			at := len(backing)
			backing = append(backing, uuid)
			ar.Mappings[m.suffix] = backing[at : at+1 : at+1]
		}
		for _, v := range ar.Mappings {
			sort.Strings(v)
		}
		out.AllocationRequests = append(out.AllocationRequests, ar)
		out.roots = append(out.roots, st.slots[a.anchor].p.UUID) // the tree root it is anchored at
	}
	// Each summary also notes its place in Placement's order (its tree's
	// creation, then its own); the sort waits for SummaryOrder, which
	// only the HTTP API asks for, so the scheduler's path pays an append.
	out.summaryOrder = make([]summaryPlace, 0, len(areqs))
	st.summarise(&roots, &used, onlyUsed, func(e *rpEntry, place summaryPlace) {
		out.ProviderSummaries[e.p.UUID] = *place.sum
		out.summaryOrder = append(out.summaryOrder, place)
	})
	return out
}

// summarise calls add for every provider an answer summarises, given
// the roots of the trees its allocation requests draw from and the
// providers they use: every provider of those trees, or only the used
// ones when the pre-1.29 nested exclusion applied (as Placement does).
// A provider may come twice; they come in the order of the sets, within
// a tree in the tree's map order.
func (st *indexState) summarise(roots, used *slotSet, onlyUsed bool, add func(e *rpEntry, place summaryPlace)) {
	addSlot := func(slot int32) {
		if e := st.slots[slot]; e != nil {
			add(e, summaryPlace{
				rootRev: st.slots[st.rootSlot(e)].createRev,
				rev:     e.createRev,
				uuid:    e.p.UUID,
				sum:     st.summaryOf(e),
			})
		}
	}
	if onlyUsed {
		for _, slot := range used.order {
			addSlot(slot)
		}
		return
	}
	// With no nested trees at all (every compute node a lone provider,
	// the usual cloud) each root is its whole tree: no lookup per root,
	// which was a third of render's time at 1,000 candidates.
	singletons := st.allSingletons()
	for _, root := range roots.order {
		re := st.slots[root]
		if singletons {
			addSlot(root)
			continue
		}
		if tree, ok := st.trees[re.p.RootProviderUUID]; ok && tree.len() > 1 {
			for slot := range tree.all() {
				addSlot(slot)
			}
		} else {
			addSlot(root)
		}
	}
}

// summaryOf is e's provider summary, rendered once per provider record
// and cached on the entry (shared: read-only).
func (st *indexState) summaryOf(e *rpEntry) *ProviderSummary {
	if ps := e.summary.Load(); ps != nil {
		return ps
	}
	ps := summarize(e.p)
	ps.memo = &summaryMemo{}
	e.summary.Store(ps)
	return ps
}

// summarize renders p's provider summary (no memo: the caller adds one
// when it shares the summary).
func summarize(p *etcdschema.Provider) *ProviderSummary {
	ps := &ProviderSummary{
		Resources:          make(map[string]ResourceSummary, len(p.Inventories)),
		Traits:             p.Traits,
		ParentProviderUUID: p.ParentProviderUUID,
		RootProviderUUID:   p.RootProviderUUID,
	}
	for rc, inv := range p.Inventories {
		ps.Resources[rc] = ResourceSummary{Capacity: inv.Capacity(), Used: p.Usages[rc]}
	}
	ps.std = [3]ResourceSummary{ps.Resources[VCPU], ps.Resources[MemoryMB], ps.Resources[DiskGB]}
	ps.hasStd = true
	return ps
}

// classNames maps class ids back to names. The slice is the index's:
// read-only, and valid while the caller holds the index's lock (a class
// made later is appended past its length, never written into it).
func (st *indexState) classNames() []string {
	return st.classNamesByID[:len(st.classNamesByID):len(st.classNamesByID)]
}

// singleProviderRes says whether every amount of res comes from one
// provider, and which.
func singleProviderRes(res []resReq) (int32, bool) {
	if len(res) == 0 {
		return 0, false
	}
	for _, r := range res[1:] {
		if r.slot != res[0].slot {
			return 0, false
		}
	}
	return res[0].slot, true
}

// sameAmounts says whether a and b ask the same amounts of the same
// classes in the same order (the provider may differ).
func sameAmounts(a, b []resReq) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].rc != b[i].rc || a[i].amount != b[i].amount {
			return false
		}
	}
	return true
}
