package scheduler

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
)

// Weigher scores hosts; higher is better after its multiplier is applied.
type Weigher interface {
	Name() string
	// Weigh returns the raw value for h; the scheduler normalises it.
	Weigh(h *HostState, spec *RequestSpec) float64
}

var weigherFactories = map[string]func() Weigher{}

func registerWeigher(name string, f func() Weigher) { weigherFactories[name] = f }

// WeigherNames lists every known weigher.
func WeigherNames() []string {
	out := make([]string, 0, len(weigherFactories))
	for n := range weigherFactories {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

type weigherWithMultiplier struct {
	Weigher
	multiplier float64
	// metadataKey is the aggregate metadata key that overrides the
	// multiplier per host ("<name>_weight_multiplier", Nova's option name).
	metadataKey string
}

// multiplierFor is the multiplier for one host: the configured one unless
// the host's aggregates override it (the lowest override wins).
func (w weigherWithMultiplier) multiplierFor(h *HostState) float64 {
	if len(h.Aggregates) == 0 {
		return w.multiplier
	}
	return weightMultiplier(h, w.metadataKey, w.multiplier)
}

// NewWeighers builds weighers from name -> multiplier. A zero multiplier
// is kept: an aggregate may still override it for its hosts; weighHosts
// skips it when none does.
func NewWeighers(multipliers map[string]float64) ([]weigherWithMultiplier, error) {
	var out []weigherWithMultiplier
	for _, name := range sortedKeys(multipliers) {
		f, ok := weigherFactories[name]
		if !ok {
			return nil, fmt.Errorf("unknown weigher %q (known: %v)", name, WeigherNames())
		}
		out = append(out, weigherWithMultiplier{Weigher: f(), multiplier: multipliers[name],
			metadataKey: name + "_weight_multiplier"})
	}
	return out, nil
}

type weighed struct {
	host   *HostState
	weight float64
	order  int // position in the input, the tie-break that keeps sorting stable
}

// weighHosts sums each weigher's normalised value times its multiplier, as
// nova/weights.py does: values are scaled to [0,1] by (v-min)/(max-min),
// and all-equal values weigh 0; each host's normalised value is then
// multiplied by that host's multiplier (config, or its aggregates'
// override). The result is sorted best first; ties keep the input order so
// results are deterministic for a given input.
func weighHosts(ws []weigherWithMultiplier, hosts []*HostState, spec *RequestSpec) []weighed {
	r := weighRanking(ws, hosts, spec, len(hosts))
	return r.w
}

// requestConstant is a weigher that may know, from the request alone, that
// it weighs every host the same (the server-group weighers for a request
// in no group of their policy): weighing 1,000 hosts to find that out
// cost as much as a real weigher.
type requestConstant interface {
	constantFor(spec *RequestSpec) bool
}

// weighRanking weighs hosts (see weighHosts) and ranks them, sorting only
// the best k up front: a request claims the first host that takes it and
// offers a few alternates, so sorting all 1,000 candidates was mostly
// wasted. The ranking sorts the rest when a caller looks past k.
func weighRanking(ws []weigherWithMultiplier, hosts []*HostState, spec *RequestSpec, k int) *ranking {
	out := make([]weighed, len(hosts))
	for i, h := range hosts {
		out[i].host, out[i].order = h, i
	}
	if len(hosts) < 2 {
		return &ranking{w: out, sorted: len(out)}
	}
	// Only aggregates override a multiplier: without any, each weigher's
	// multiplier is the same for every host.
	anyAggs := false
	for _, h := range hosts {
		if len(h.Aggregates) > 0 {
			anyAggs = true
			break
		}
	}
	raw := make([]float64, len(hosts))
	var mult []float64
	if anyAggs {
		mult = make([]float64, len(hosts))
	}
	for _, w := range ws {
		if c, ok := w.Weigher.(requestConstant); ok && c.constantFor(spec) {
			continue // all-equal values weigh 0
		}
		if anyAggs {
			anyNonZero := false
			for i, h := range hosts {
				mult[i] = w.multiplierFor(h)
				anyNonZero = anyNonZero || mult[i] != 0
			}
			if !anyNonZero {
				continue // cannot change the order
			}
		} else if w.multiplier == 0 {
			continue
		}
		lo, hi := 0.0, 0.0
		for i, h := range hosts {
			v := w.Weigh(h, spec)
			raw[i] = v
			if i == 0 || v < lo {
				lo = v
			}
			if i == 0 || v > hi {
				hi = v
			}
		}
		if hi == lo {
			continue
		}
		span := hi - lo
		if anyAggs {
			for i := range out {
				out[i].weight += mult[i] * (raw[i] - lo) / span
			}
		} else {
			m := w.multiplier
			for i := range out {
				out[i].weight += m * (raw[i] - lo) / span
			}
		}
	}
	return newRanking(out, k)
}

// compareWeighed orders best first; the input order breaks ties, so an
// unstable sort gives a stable, deterministic order (sort.SliceStable was a
// quarter of a 10,000-host pick).
func compareWeighed(a, b weighed) int {
	if c := cmp.Compare(b.weight, a.weight); c != 0 {
		return c
	}
	return cmp.Compare(a.order, b.order)
}

// ranking is weighed hosts best first, sorted only as far as looked at:
// w[:sorted] are in their final order and each is better than any host
// after them; w[sorted:] are the rest, in no order until someone looks.
type ranking struct {
	w      []weighed
	sorted int
}

// newRanking sorts the best k of w to the front (all of w when k is not
// much smaller) and leaves the rest for later.
func newRanking(w []weighed, k int) *ranking {
	if k <= 0 || k*8 >= len(w) {
		slices.SortFunc(w, compareWeighed)
		return &ranking{w: w, sorted: len(w)}
	}
	// Keep the best k seen so far sorted in w[:k]; a better host swaps
	// with the worst of them (which moves to its slot, so nothing is lost)
	// and bubbles up. O(n) compares when few displace the best k.
	slices.SortFunc(w[:k], compareWeighed)
	for i := k; i < len(w); i++ {
		if compareWeighed(w[i], w[k-1]) >= 0 {
			continue
		}
		w[i], w[k-1] = w[k-1], w[i]
		for j := k - 1; j > 0 && compareWeighed(w[j], w[j-1]) < 0; j-- {
			w[j], w[j-1] = w[j-1], w[j]
		}
	}
	return &ranking{w: w, sorted: k}
}

// len is the number of hosts ranked.
func (r *ranking) len() int { return len(r.w) }

// at is the host ranked i (0 = best).
func (r *ranking) at(i int) weighed {
	if i >= r.sorted {
		slices.SortFunc(r.w[r.sorted:], compareWeighed)
		r.sorted = len(r.w)
	}
	return r.w[i]
}
