package placement

import (
	"context"

	"github.com/berth-project/berth/etcdschema"
)

// The compact answer is for a caller in the same process (the scheduler):
// the same search and the same candidates, in the same order, as
// AllocationCandidates, without rendering Placement's map-shaped answer.
// A select_destinations at 1,000 candidates spent a fifth of its CPU (and
// most of its garbage) building 1,000 allocation requests and a provider
// summary map it then read one entry of per candidate. Here each candidate
// is a few words in one array per answer that name the provider, the
// shared resources map and the root's record (its summary rendered on
// demand: LazySummary); the contract's
// AllocationRequest is built only for the few the caller claims or
// offers as alternates. The HTTP API keeps rendering through render, so
// its answers do not change.

// CandidatePart is the resources one allocation request takes from one
// provider. Resources is shared with other candidates of the same answer:
// read-only.
type CandidatePart struct {
	Provider  string
	Resources map[string]int64
}

// Candidate is one allocation request in compact form.
type Candidate struct {
	// Root is the uuid of the tree root the request is anchored at.
	Root string
	// RootSlot is one more than Root's slot in the index that answered
	// (0: not known, a candidate made elsewhere). It is a hint for a
	// caller that keeps something per provider (the scheduler's host
	// join, scheduler/provider_slots.go) to find it without hashing the
	// uuid: within one answer a slot is one root, but a slot is reused
	// once its provider is gone, so whatever is kept by slot must be
	// checked against Root.
	RootSlot int32
	// RootSummary is Root's provider summary (capacity and usage per
	// class) as the search saw it, rendered when Get asks: a scheduler
	// reads the standard classes (CompactBuffers.RootStandard) and
	// seldom the summary, and rendering it after every claim on a
	// provider was about 650 B and 5 allocations per server booted.
	RootSummary LazySummary
	// Parts are the providers the request takes resources from.
	Parts []CandidatePart
}

// LazySummary is a provider's summary, rendered when Get asks, from the
// provider record an answer read (records are never mutated once
// indexed, so a later claim does not change it). The zero value is no
// summary.
type LazySummary struct {
	p *etcdschema.Provider
}

// Get renders the summary afresh on each call (the caller's to keep;
// no Memo): nil only when the root is not indexed (a half-applied tree
// move) or the candidate was made elsewhere.
func (l LazySummary) Get() *ProviderSummary {
	if l.p == nil {
		return nil
	}
	return summarize(l.p)
}

// standardCols are the index's VCPU, MEMORY_MB and DISK_GB columns (nil
// for a class no provider has).
type standardCols [3]*classCol

func (st *indexState) standardCols() standardCols {
	var out standardCols
	for i, rc := range [3]string{VCPU, MemoryMB, DiskGB} {
		if id, ok := st.classIDs[rc]; ok {
			out[i] = st.cols[id]
		}
	}
	return out
}

// of is slot's capacity and usage of the three classes as its summary
// has them (summaryOf): zero for a class it has no inventory of.
func (c standardCols) of(slot int32) [3]ResourceSummary {
	var out [3]ResourceSummary
	for i, col := range c {
		if col != nil && col.capacity[slot] >= 0 {
			out[i] = ResourceSummary{Capacity: col.capacity[slot], Used: col.used[slot]}
		}
	}
	return out
}

// AllocationRequest renders c as the contract's allocation request (no
// mappings: nothing in-process reads them). Its resources maps are shared
// with the answer: read-only.
func (c Candidate) AllocationRequest() AllocationRequest {
	ar := AllocationRequest{Allocations: make(map[string]ProviderAllocation, len(c.Parts))}
	for _, p := range c.Parts {
		if prev, ok := ar.Allocations[p.Provider]; ok {
			// Two parts on one provider (multi-provider search can give a
			// provider two classes): merge into a fresh map.
			m := make(map[string]int64, len(prev.Resources)+len(p.Resources))
			for rc, n := range prev.Resources {
				m[rc] += n
			}
			for rc, n := range p.Resources {
				m[rc] += n
			}
			ar.Allocations[p.Provider] = ProviderAllocation{Resources: m}
			continue
		}
		ar.Allocations[p.Provider] = ProviderAllocation{Resources: p.Resources}
	}
	return ar
}

// Amounts returns the resources c takes from provider uuid (nil if none).
// The map may be shared: read-only.
func (c Candidate) Amounts(uuid string) map[string]int64 {
	var out map[string]int64
	n := 0
	for _, p := range c.Parts {
		if p.Provider != uuid {
			continue
		}
		n++
		if n == 1 {
			out = p.Resources
			continue
		}
		m := make(map[string]int64, len(out)+len(p.Resources))
		for rc, v := range out {
			m[rc] += v
		}
		for rc, v := range p.Resources {
			m[rc] += v
		}
		out = m
	}
	return out
}

// CompactCandidates answers q as AllocationCandidates does (same search,
// same candidates, same order) in compact form; see Candidate.
func (s *Service) CompactCandidates(ctx context.Context, q CandidateQuery) ([]Candidate, error) {
	return s.CompactCandidatesInto(ctx, q, nil)
}

// CompactBuffers are the arrays a caller lends CompactCandidatesInto to
// build its answer in, reused from answer to answer: the scheduler asks
// for candidates on every request, and the answer's two arrays were most
// of what a select allocated (about 9 KB for 100 candidates), garbage as
// soon as it answered. The zero value is ready to use.
type CompactBuffers struct {
	cands []Candidate
	parts []CandidatePart
	// std is each candidate's root's standard classes (RootStandard).
	std [][3]ResourceSummary
}

// RootStandard is cands[i].RootSummary.Get().Standard(), the root's VCPU,
// MEMORY_MB and DISK_GB, as the search read them from the index's class
// columns when it built cands in b: a scheduler weighs every candidate on
// these, and reading them from the summary was a cache miss per candidate
// (a claim on a provider makes its summary anew). false when cands is not
// b's last answer (read the summary). Kept beside the answer rather than
// in Candidate, whose size every copy of a candidate pays.
func (b *CompactBuffers) RootStandard(cands []Candidate, i int) ([3]ResourceSummary, bool) {
	if b == nil || len(cands) == 0 || len(b.std) != len(cands) || len(b.cands) == 0 || &b.cands[0] != &cands[0] || i >= len(cands) {
		return [3]ResourceSummary{}, false
	}
	return b.std[i], true
}

// CompactCandidatesInto is CompactCandidates building its answer in buf
// (nil: fresh arrays). The answer, its Parts included, lives in buf's
// arrays: it is the caller's until it lends buf again, and the caller
// must not keep any of it past that. Its resources maps and summaries are
// not buf's and stay shared and read-only, as in CompactCandidates.
func (s *Service) CompactCandidatesInto(ctx context.Context, q CandidateQuery, buf *CompactBuffers) ([]Candidate, error) {
	var out []Candidate
	err := s.runSearch(ctx, q, func(st *indexState, areqs []*areq, _, ok bool) {
		if ok {
			out = st.compact(areqs, buf)
		}
	})
	return out, err
}

// compact is render's counterpart for an in-process caller, in buf's
// arrays when buf is not nil.
func (st *indexState) compact(areqs []*areq, buf *CompactBuffers) []Candidate {
	var out []Candidate
	var backing []CandidatePart
	if buf != nil {
		// Every element of out is written whole below; backing is
		// appended to.
		if cap(buf.cands) < len(areqs) {
			buf.cands = make([]Candidate, len(areqs))
		}
		if cap(buf.parts) < len(areqs) {
			buf.parts = make([]CandidatePart, 0, len(areqs))
		}
		out, backing = buf.cands[:len(areqs)], buf.parts[:0]
		buf.std = buf.std[:0]
	} else {
		out, backing = make([]Candidate, len(areqs)), make([]CandidatePart, 0, len(areqs))
	}
	names := st.classNames()
	var std standardCols
	if buf != nil {
		std = st.standardCols()
	}
	// The usual request takes everything from one provider: its part is a
	// one-element window of one backing array (never grown past its
	// capacity, len(areqs), so the windows stay in it), and requests
	// asking the same amounts share one resources map, as in render.
	var lastRes []resReq
	var lastMap map[string]int64
	for i, a := range areqs {
		root := st.slots[a.anchor]
		out[i] = Candidate{Root: root.uuid, RootSlot: st.indexSlot(a.anchor) + 1, RootSummary: LazySummary{root.p}}
		if buf != nil {
			buf.std = append(buf.std, std.of(a.anchor))
		}
		if single, ok := singleProviderRes(a.res); ok {
			if lastMap == nil || !sameAmounts(lastRes, a.res) {
				lastRes, lastMap = a.res, make(map[string]int64, len(a.res))
				for _, r := range a.res {
					lastMap[names[r.rc]] += r.amount
				}
			}
			at := len(backing)
			backing = append(backing, CandidatePart{Provider: st.slots[single].uuid, Resources: lastMap})
			out[i].Parts = backing[at : at+1 : at+1]
			continue
		}
		// Several providers: one part per provider, in first-use order.
		var parts []CandidatePart
		for _, r := range a.res {
			uuid := st.slots[r.slot].uuid
			k := -1
			for j := range parts {
				if parts[j].Provider == uuid {
					k = j
					break
				}
			}
			if k < 0 {
				k = len(parts)
				parts = append(parts, CandidatePart{Provider: uuid, Resources: make(map[string]int64, len(a.res))})
			}
			parts[k].Resources[names[r.rc]] += r.amount
		}
		out[i].Parts = parts
	}
	return out
}
