package scheduler

import (
	"fmt"
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
}

// NewWeighers builds weighers from name -> multiplier; zero multipliers are
// skipped, since they cannot change the order.
func NewWeighers(multipliers map[string]float64) ([]weigherWithMultiplier, error) {
	var out []weigherWithMultiplier
	for _, name := range sortedKeys(multipliers) {
		f, ok := weigherFactories[name]
		if !ok {
			return nil, fmt.Errorf("unknown weigher %q (known: %v)", name, WeigherNames())
		}
		if m := multipliers[name]; m != 0 {
			out = append(out, weigherWithMultiplier{Weigher: f(), multiplier: m})
		}
	}
	return out, nil
}

type weighed struct {
	host   *HostState
	weight float64
}

// weighHosts sums each weigher's normalised value times its multiplier, as
// nova/weights.py does: values are scaled to [0,1] by (v-min)/(max-min),
// and all-equal values weigh 0. The result is sorted best first; ties keep
// the input order so results are deterministic for a given input.
func weighHosts(ws []weigherWithMultiplier, hosts []*HostState, spec *RequestSpec) []weighed {
	out := make([]weighed, len(hosts))
	for i, h := range hosts {
		out[i].host = h
	}
	if len(hosts) < 2 {
		return out
	}
	raw := make([]float64, len(hosts))
	for _, w := range ws {
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
			out[i].weight += w.multiplier * (raw[i] - lo) / (hi - lo)
		}
	}
	sort.SliceStable(out, func(a, b int) bool { return out[a].weight > out[b].weight })
	return out
}
