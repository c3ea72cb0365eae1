package scheduler

import (
	"cmp"
	"fmt"
	"slices"
	"sort"

	"github.com/berth-project/berth/internal/rendezvous"
)

// Weigher scores hosts; higher is better after its multiplier is applied.
type Weigher interface {
	Name() string
	// Weigh returns the raw value for h; the scheduler normalises it.
	Weigh(h *HostState, c *Cycle) float64
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
	// tie orders hosts of exactly equal weight (see tieKey); 0 for every
	// host when the scheduler has no tie seed.
	tie   uint64
	order int // position in the input, the last tie-break: sorting stays stable
}

// weighHosts sums each weigher's normalised value times its multiplier, as
// nova/weights.py does: values are scaled to [0,1] by (v-min)/(max-min),
// and all-equal values weigh 0; each host's normalised value is then
// multiplied by that host's multiplier (config, or its aggregates'
// override). The result is sorted best first; ties keep the input order so
// results are deterministic for a given input.
func weighHosts(ws []weigherWithMultiplier, hosts []*HostState, c *Cycle) []weighed {
	r := weighRanking(ws, hosts, c, len(hosts), 0, nil)
	return r.w
}

// requestConstant is a weigher that may know, from the request alone, that
// it weighs every host the same (the server-group weighers for a request
// in no group of their policy): weighing 1,000 hosts to find that out
// cost as much as a real weigher.
type requestConstant interface {
	constantFor(c *Cycle) bool
}

// weighRanking weighs hosts (see weighHosts) and ranks them, sorting only
// the best k up front: a request claims the first host that takes it and
// offers a few alternates, so sorting all 1,000 candidates was mostly
// wasted. The ranking sorts the rest when a caller looks past k.
// tieSeed orders hosts of equal weight (tieKey); 0 keeps the input order.
// buf, when not nil, holds the arrays and the ranking, reused: the ranking
// it returns is valid until buf's next use.
func weighRanking(ws []weigherWithMultiplier, hosts []*HostState, c *Cycle, k int, tieSeed uint64, buf *rankBuf) *ranking {
	if buf == nil {
		buf = &rankBuf{}
	}
	out := resize(buf.w, len(hosts))
	buf.w = out
	for i, h := range hosts {
		out[i] = weighed{host: h, order: i} // whole: buf's array is reused
		if tieSeed != 0 {
			nh := h.nameHash
			if nh == 0 { // a state not made by the join
				nh = hostNameHash(h.Host)
			}
			out[i].tie = tieKey(tieSeed, nh)
		}
	}
	if len(hosts) < 2 {
		buf.r = ranking{w: out, sorted: len(out)}
		return &buf.r
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
	raw := resize(buf.raw, len(hosts)) // written per weigher before read
	buf.raw = raw
	var mult []float64
	if anyAggs {
		mult = resize(buf.mult, len(hosts))
		buf.mult = mult
	}
	for _, w := range ws {
		if rc, ok := w.Weigher.(requestConstant); ok && rc.constantFor(c) {
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
			v := w.Weigh(h, c)
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
	buf.r = newRanking(out, k)
	return &buf.r
}

// rankBuf is what weighRanking ranks in; a request reuses one for each of
// its picks (only the last pick's ranking is read after the next one is
// made: the alternates come from it).
type rankBuf struct {
	w         []weighed
	raw, mult []float64
	r         ranking
}

// compareWeighed orders best first; among equal weights the tie key, then
// the input order, so an unstable sort gives a stable, deterministic order
// (sort.SliceStable was a quarter of a 10,000-host pick).
func compareWeighed(a, b weighed) int {
	if c := cmp.Compare(b.weight, a.weight); c != 0 {
		return c
	}
	if c := cmp.Compare(b.tie, a.tie); c != 0 {
		return c
	}
	return cmp.Compare(a.order, b.order)
}

// Tie order among hosts of exactly equal weight. Nova sorts the weighed
// hosts stably, so equal weights keep the order the host states came in:
// the database's, which nothing specifies (no ORDER BY). Concurrent
// requests that see the same hosts then pick alike among equals: in one
// scheduler their claims queue behind each other on the same host (the
// claim batch plans the later ones again), across schedulers all but one
// lose the claim transaction and try again. Berth's candidates come from
// a random start (placement_sample_size), which spreads them somewhat,
// but the first of equals after a random start is the same host for
// every start that falls in the run of worse hosts before it.
//
// So each instance ranks equals by a rendezvous hash of its uuid and the
// host (highest first): an order as arbitrary as the database's, fixed for
// the instance (a request scheduled again ranks them the same), and
// independent between instances, so two requests' first choices among n
// common equals coincide with probability 1/n. No weighed preference
// changes: a host of higher weight still comes first. Nova's own
// remedies, host_subset_size and shuffle_best_same_weighed_hosts, keep
// their defaults and meaning (they act on this order as on Nova's).
//
// A per-scheduler order (a hash of the scheduler's id instead of the
// instance's) was tried first: it sends schedulers to different hosts,
// but all of one scheduler's requests to the same one (lost races 360 →
// 91 per 10,000 servers with 3 schedulers, but claims planned again
// behind their own scheduler's 168 → 1,310); docs/benchmarks-history.md.

// tieSeedOf is the tie seed of an instance ("" gives 0: input order).
func tieSeedOf(id string) uint64 {
	if id == "" {
		return 0
	}
	return rendezvous.Mix(rendezvous.Add(rendezvous.Offset, id)) | 1
}

// hostNameHash is a host's half of its tie keys: its name hashed, which
// the host manager does once per host record (hostRecord.nameHash), not
// once per candidate of every pick (the name's bytes were a cache miss
// apiece, and the hash a chain of multiplications).
func hostNameHash(host string) uint64 {
	return rendezvous.Add(rendezvous.Offset, host)
}

// tieKey is the rank among equals, for seed, of the host whose name
// hashes to nameHash (higher first): independent for each seed (the
// seed and the name's hash are mixed whole).
func tieKey(seed, nameHash uint64) uint64 {
	return rendezvous.Mix(seed ^ nameHash)
}

// ranking is weighed hosts best first, sorted only as far as looked at:
// w[:sorted] are in their final order and each is better than any host
// after them; w[sorted:] are the rest, in no order until someone looks.
type ranking struct {
	w      []weighed
	sorted int
}

// newRanking sorts the best k of w to the front (all of w when k is not
// much smaller) and leaves the rest for later. It returns the ranking by
// value, for the caller's buffer (a pointer was an allocation per pick).
// The default request ranks placement_sample_size = 100 hosts for k = 15:
// sorting all 100 was half of its weighing, the best 15 found in one pass
// about a fifth.
func newRanking(w []weighed, k int) ranking {
	if k <= 0 || k*2 >= len(w) {
		slices.SortFunc(w, compareWeighed)
		return ranking{w: w, sorted: len(w)}
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
	return ranking{w: w, sorted: k}
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
