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
	out := make([]weighed, len(hosts))
	for i, h := range hosts {
		out[i].host, out[i].order = h, i
	}
	if len(hosts) < 2 {
		return out
	}
	raw := make([]float64, len(hosts))
	mult := make([]float64, len(hosts))
	for _, w := range ws {
		anyNonZero := false
		for i, h := range hosts {
			mult[i] = w.multiplierFor(h)
			anyNonZero = anyNonZero || mult[i] != 0
		}
		if !anyNonZero {
			continue // cannot change the order
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
		for i := range out {
			out[i].weight += mult[i] * (raw[i] - lo) / (hi - lo)
		}
	}
	// An unstable sort with the input order as tie-break is stable and
	// O(n log n); sort.SliceStable was a quarter of a 10,000-host pick.
	slices.SortFunc(out, func(a, b weighed) int {
		if c := cmp.Compare(b.weight, a.weight); c != 0 {
			return c
		}
		return cmp.Compare(a.order, b.order)
	})
	return out
}
