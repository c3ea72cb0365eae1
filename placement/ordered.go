package placement

import (
	"context"
	"slices"
	"strings"
	"sync"
)

// OrderedCandidates is an allocation-candidates answer in the order the
// HTTP API writes it: every object's keys sorted as encoding/json sorts a
// map's, the summaries in Placement's order. The API wrote Candidates'
// maps, which at 1,000 candidates meant building 2,000 small maps to
// iterate and sort each once more (a quarter of the request in render,
// a sixth in the encoder's map walks); this is built from the search in
// one pass with a few arrays per answer. A nil slice stands where the
// map-shaped answer has a nil map or list (JSON null), an empty one
// where it has an empty one.
type OrderedCandidates struct {
	Requests  []OrderedRequest
	Summaries []OrderedSummary
	// scratch holds the arrays the answer is cut from, when they came
	// from orderedScratchPool (Release).
	scratch *orderedScratch
}

// Release hands the answer's arrays back for the next answer's use:
// call it once the answer is written, and read nothing of it after
// (the summaries themselves belong to the index and stay valid). At
// limit 1000 an answer is some 400 KB of small arrays, which, made anew
// for every request, kept the collector busy for a fifth of the
// request's CPU.
func (c *OrderedCandidates) Release() {
	sc := c.scratch
	c.Requests, c.Summaries, c.scratch = nil, nil, nil
	if sc == nil || len(sc.requests) > maxPooledAnswer || len(sc.places) > maxPooledAnswer {
		return
	}
	sc.clear()
	orderedScratchPool.Put(sc)
}

// maxPooledAnswer is the most requests or summaries an answer may hold
// and still have its arrays kept for the next: an answer with no limit
// over 100,000 providers is left to the collector, not kept for ever.
const maxPooledAnswer = 10_000

// orderedScratch is the arrays one ordered answer is cut from, and the
// sets and lists renderOrdered builds it with.
type orderedScratch struct {
	requests    []OrderedRequest
	parts       []ProviderAmounts
	groups      []GroupProviders
	uuids       []string
	summaries   []OrderedSummary
	places      []summaryPlace
	keys        []placeKey
	sorted      []summaryPlace
	roots, used slotSet
}

var orderedScratchPool = sync.Pool{New: func() any { return new(orderedScratch) }}

// clear drops what the arrays point to (provider records and summaries
// an index may have replaced since), keeping the arrays.
func (sc *orderedScratch) clear() {
	clear(sc.requests)
	clear(sc.parts)
	clear(sc.groups)
	clear(sc.uuids)
	clear(sc.summaries)
	clear(sc.places)
	clear(sc.sorted)
}

// OrderedRequest is one allocation request.
type OrderedRequest struct {
	Allocations []ProviderAmounts // by provider uuid
	Mappings    []GroupProviders  // by suffix
}

// ProviderAmounts is what one request takes from one provider.
// Resources may be shared with other requests of the answer (the same
// amounts of the same classes): read-only.
type ProviderAmounts struct {
	Provider  string
	Resources []ClassAmount // by class name
}

// ClassAmount is an amount of one resource class.
type ClassAmount struct {
	Class  string
	Amount int64
}

// GroupProviders is a request group's suffix and the providers that
// satisfy it (1.34's mappings), in uuid order.
type GroupProviders struct {
	Suffix    string
	Providers []string
}

// OrderedSummary is one provider's summary, shared with the index:
// read-only.
type OrderedSummary struct {
	UUID    string
	Summary *ProviderSummary
}

// OrderedAllocationCandidates answers q as AllocationCandidates does,
// in OrderedCandidates' form.
func (s *Service) OrderedAllocationCandidates(ctx context.Context, q CandidateQuery) (*OrderedCandidates, error) {
	var out *OrderedCandidates
	err := s.runSearch(ctx, q, func(st *indexState, areqs []*areq, excludeNested, ok bool) {
		if !ok {
			out = &OrderedCandidates{Requests: []OrderedRequest{}}
			return
		}
		out = st.renderOrdered(areqs, excludeNested)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Ordered returns c in OrderedCandidates' form (for an answer built by
// hand; the API asks the index for the ordered form directly).
func (c *Candidates) Ordered() *OrderedCandidates {
	out := &OrderedCandidates{}
	if c.AllocationRequests != nil {
		out.Requests = make([]OrderedRequest, 0, len(c.AllocationRequests))
	}
	for _, ar := range c.AllocationRequests {
		var r OrderedRequest
		if ar.Allocations != nil {
			r.Allocations = make([]ProviderAmounts, 0, len(ar.Allocations))
			for rp, pa := range ar.Allocations {
				r.Allocations = append(r.Allocations, ProviderAmounts{Provider: rp, Resources: orderedAmounts(pa.Resources)})
			}
			slices.SortFunc(r.Allocations, func(a, b ProviderAmounts) int { return strings.Compare(a.Provider, b.Provider) })
		}
		if ar.Mappings != nil {
			r.Mappings = make([]GroupProviders, 0, len(ar.Mappings))
			for sfx, l := range ar.Mappings {
				r.Mappings = append(r.Mappings, GroupProviders{Suffix: sfx, Providers: l})
			}
			slices.SortFunc(r.Mappings, func(a, b GroupProviders) int { return strings.Compare(a.Suffix, b.Suffix) })
		}
		out.Requests = append(out.Requests, r)
	}
	for _, rp := range c.SummaryOrder() {
		ps := c.ProviderSummaries[rp]
		out.Summaries = append(out.Summaries, OrderedSummary{UUID: rp, Summary: &ps})
	}
	return out
}

// orderedAmounts is m by class name (nil for nil).
func orderedAmounts(m map[string]int64) []ClassAmount {
	if m == nil {
		return nil
	}
	out := make([]ClassAmount, 0, len(m))
	for rc, n := range m {
		out = append(out, ClassAmount{rc, n})
	}
	slices.SortFunc(out, func(a, b ClassAmount) int { return strings.Compare(a.Class, b.Class) })
	return out
}

// renderOrdered is render in OrderedCandidates' form: the same
// requests, amounts, mappings and summaries (TestCandidatesJSONMatches-
// ReferenceOverHTTP in the API compares the two answers' bytes). The
// answer's small lists are windows of a few arrays, capacity capped so
// appending to one copies instead of overwriting the next.
func (st *indexState) renderOrdered(areqs []*areq, onlyUsed bool) *OrderedCandidates {
	sc := orderedScratchPool.Get().(*orderedScratch)
	sc.requests = resized(sc.requests, len(areqs))
	out := &OrderedCandidates{Requests: sc.requests, scratch: sc}
	names := st.classNames()
	sc.roots.reset(len(st.slots), len(areqs))
	sc.used.reset(len(st.slots), len(areqs))
	roots, used := &sc.roots, &sc.used
	nparts, nmap := 0, 0
	for _, a := range areqs {
		if _, single := singleProviderRes(a.res); single {
			nparts++
		} else {
			nparts += len(a.res)
		}
		nmap += len(a.mappings)
	}
	parts := resized(sc.parts, nparts)[:0]
	groups := resized(sc.groups, nmap)[:0]
	uuids := resized(sc.uuids, nmap)[:0]
	var lastRes []resReq       // the amounts of the last single-provider request
	var lastAmts []ClassAmount // and its amounts, shared while they repeat
	for i, a := range areqs {
		r := &out.Requests[i]
		at := len(parts)
		if single, ok := singleProviderRes(a.res); ok {
			if lastAmts == nil || !sameAmounts(lastRes, a.res) {
				lastRes, lastAmts = a.res, addAmounts(nil, a.res, names)
			}
			e := st.slots[single]
			parts = append(parts, ProviderAmounts{Provider: e.p.UUID, Resources: lastAmts})
			roots.add(st.rootSlot(e))
			used.add(single)
		} else {
			for _, rr := range a.res {
				e := st.slots[rr.slot]
				j := slices.IndexFunc(parts[at:], func(p ProviderAmounts) bool { return p.Provider == e.p.UUID })
				if j < 0 {
					j = len(parts) - at
					parts = append(parts, ProviderAmounts{Provider: e.p.UUID})
				}
				parts[at+j].Resources = addAmounts(parts[at+j].Resources, []resReq{rr}, names)
				roots.add(st.rootSlot(e))
				used.add(rr.slot)
			}
			slices.SortFunc(parts[at:], func(a, b ProviderAmounts) int { return strings.Compare(a.Provider, b.Provider) })
		}
		r.Allocations = parts[at:len(parts):len(parts)]
		gat := len(groups)
		for _, m := range a.mappings {
			uuid := st.slots[m.slot].p.UUID
			j := slices.IndexFunc(groups[gat:], func(g GroupProviders) bool { return g.Suffix == m.suffix })
			if j >= 0 {
				groups[gat+j].Providers = append(groups[gat+j].Providers, uuid)
				continue
			}
			u := len(uuids)
			uuids = append(uuids, uuid)
			groups = append(groups, GroupProviders{Suffix: m.suffix, Providers: uuids[u : u+1 : u+1]})
		}
		r.Mappings = groups[gat:len(groups):len(groups)]
		for _, g := range r.Mappings {
			slices.Sort(g.Providers)
		}
		slices.SortFunc(r.Mappings, func(a, b GroupProviders) int { return strings.Compare(a.Suffix, b.Suffix) })
	}
	places := resized(sc.places, len(areqs))[:0]
	st.summarise(roots, used, onlyUsed, func(_ *rpEntry, place summaryPlace) { places = append(places, place) })
	sorted := sortPlacesInto(places, &sc.keys, sc.sorted)
	out.Summaries = resized(sc.summaries, len(sorted))
	for i, p := range sorted {
		out.Summaries[i] = OrderedSummary{UUID: p.uuid, Summary: p.sum}
	}
	sc.parts, sc.groups, sc.uuids, sc.places = parts, groups, uuids, places
	sc.sorted, sc.summaries = sorted, out.Summaries
	return out
}

// addAmounts adds res's amounts to amts by class name, keeping amts in
// class order (a class asked twice, by two groups of one provider, is
// summed as render sums it). It returns a new list: amts may be shared.
func addAmounts(amts []ClassAmount, res []resReq, names []string) []ClassAmount {
	out := make([]ClassAmount, len(amts), len(amts)+len(res))
	copy(out, amts)
	for _, r := range res {
		name := names[r.rc]
		i, found := slices.BinarySearchFunc(out, name, func(a ClassAmount, n string) int { return strings.Compare(a.Class, n) })
		if found {
			out[i].Amount += r.amount
			continue
		}
		out = slices.Insert(out, i, ClassAmount{name, r.amount})
	}
	return out
}
