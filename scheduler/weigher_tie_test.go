package scheduler

import (
	"fmt"
	"slices"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// hostsNamed is one host per name, with the free RAM given (MB).
func hostsNamed(freeRAM map[string]int64, names ...string) []*HostState {
	out := make([]*HostState, len(names))
	for i, n := range names {
		out[i] = hostRes(n, freeRAM[n], 0, 0, 0)
	}
	return out
}

// byTieKey is names sorted as an instance with seed orders equals.
func byTieKey(seed uint64, names ...string) []string {
	out := slices.Clone(names)
	slices.SortFunc(out, func(a, b string) int {
		ka, kb := tieKey(seed, hostNameHash(a)), tieKey(seed, hostNameHash(b))
		switch {
		case ka > kb:
			return -1
		case ka < kb:
			return 1
		}
		return 0
	})
	return out
}

// The tie order changes only the order among hosts of exactly equal
// weight: a better host stays first for every scheduler.
func TestTieOrder(t *testing.T) {
	seedA, seedB := tieSeedOf("3f0c1a4e-5b52-4f0e-9d7c-2a4c7c1e9b01"), tieSeedOf("8d2e6f10-7a3b-4c55-b1e2-94f0d3a6c702")
	eq := map[string]int64{"h1": 1000, "h2": 1000, "h3": 1000, "h4": 1000}
	cases := []struct {
		desc  string
		seed  uint64
		ram   map[string]int64
		input []string
		want  []string
	}{
		{"no seed: equals keep the input order", 0, eq,
			[]string{"h3", "h1", "h4", "h2"}, []string{"h3", "h1", "h4", "h2"}},
		{"a seed orders equals by its rendezvous hash", seedA, eq,
			[]string{"h1", "h2", "h3", "h4"}, byTieKey(seedA, "h1", "h2", "h3", "h4")},
		{"the same seed, the same order whatever the input order", seedA, eq,
			[]string{"h4", "h2", "h3", "h1"}, byTieKey(seedA, "h1", "h2", "h3", "h4")},
		{"another seed, its own order", seedB, eq,
			[]string{"h1", "h2", "h3", "h4"}, byTieKey(seedB, "h1", "h2", "h3", "h4")},
		{"a heavier host first whatever the seed", seedA,
			map[string]int64{"h1": 1000, "h2": 1000, "h3": 4000, "h4": 500},
			[]string{"h1", "h2", "h3", "h4"}, append(append([]string{"h3"}, byTieKey(seedA, "h1", "h2")...), "h4")},
		{"a heavier host first, other seed", seedB,
			map[string]int64{"h1": 1000, "h2": 1000, "h3": 4000, "h4": 500},
			[]string{"h4", "h1", "h3", "h2"}, append(append([]string{"h3"}, byTieKey(seedB, "h1", "h2")...), "h4")},
	}
	ws, err := NewWeighers(map[string]float64{"ram": 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			hosts := hostsNamed(tc.ram, tc.input...)
			for _, k := range []int{1, len(hosts)} { // partly and fully sorted up front
				r := weighRanking(ws, hosts, newCycle(&RequestSpec{}), k, tc.seed, nil)
				var got []string
				for i := 0; i < r.len(); i++ {
					got = append(got, r.at(i).host.Host)
				}
				if !slices.Equal(got, tc.want) {
					t.Fatalf("k=%d: order %v, want %v", k, got, tc.want)
				}
			}
		})
	}
	if slices.Equal(byTieKey(seedA, "h1", "h2", "h3", "h4"), byTieKey(seedB, "h1", "h2", "h3", "h4")) {
		t.Fatal("the two instances' tie orders are the same: the test would not tell them apart")
	}
}

// Instances' first choices among equals are spread evenly: over many
// instances each of n equal hosts comes first about 1/n of the time, so
// two requests coincide about 1/n of the time rather than always. Hosts
// are named alike, as real fleets are.
func TestTieOrderSpreadsInstances(t *testing.T) {
	const nHosts, nInstances = 10, 5000
	names := make([]string, nHosts)
	for i := range names {
		names[i] = fmt.Sprintf("compute-%05d", i+17)
	}
	ws, _ := NewWeighers(map[string]float64{"ram": 1})
	hosts := hostsNamed(map[string]int64{}, names...)
	first := map[string]int{}
	var prev string
	same := 0
	for n := 0; n < nInstances; n++ {
		id := fmt.Sprintf("%08x-0000-4000-8000-%012x", n*2654435761%(1<<32), n)
		top := weighRanking(ws, hosts, newCycle(&RequestSpec{}), 1, tieSeedOf(id), nil).at(0).host.Host
		first[top]++
		if top == prev {
			same++
		}
		prev = top
	}
	for _, n := range names {
		if c := first[n]; c < nInstances/nHosts*7/10 || c > nInstances/nHosts*13/10 {
			t.Errorf("%s first for %d of %d instances, want about %d: %v", n, c, nInstances, nInstances/nHosts, first)
		}
	}
	if same > nInstances/nHosts*13/10 {
		t.Errorf("consecutive instances chose the same host %d times of %d, want about %d", same, nInstances, nInstances/nHosts)
	}
}

// The scheduler ranks equals in the order of the instance it places;
// without an instance (no uuid) they keep the candidates' order.
func TestSortHostsTieOrderPerInstance(t *testing.T) {
	names := []string{"h1", "h2", "h3", "h4", "h5", "h6"}
	hosts := hostsNamed(map[string]int64{}, names...)
	s, err := New(DefaultConfig(), nil, nil, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	idA, idB := "3f0c1a4e-5b52-4f0e-9d7c-2a4c7c1e9b01", "8d2e6f10-7a3b-4c55-b1e2-94f0d3a6c702"
	for _, tc := range []struct {
		desc, instance, want string
	}{
		{"no instance: the first candidate", "", "h1"},
		{"an instance: its hash's first", idA, byTieKey(tieSeedOf(idA), names...)[0]},
		{"another instance: its own", idB, byTieKey(tieSeedOf(idB), names...)[0]},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if got := s.sortHosts(hosts, newCycle(&RequestSpec{InstanceUUIDs: []string{tc.instance}})).at(0).host.Host; got != tc.want {
				t.Fatalf("first %s, want %s", got, tc.want)
			}
		})
	}
	if byTieKey(tieSeedOf(idA), names...)[0] == byTieKey(tieSeedOf(idB), names...)[0] {
		t.Fatal("both instances pick the same first host: the test would not tell them apart")
	}
}
