package scheduler

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/berth-project/berth/placement"
)

func hostRes(name string, freeRAM, freeCPU int64, failed, instances int) *HostState {
	return &HostState{Host: name, FailedBuilds: failed, NumInstances: instances,
		Resources: map[string]placement.ResourceSummary{
			placement.MemoryMB: {Capacity: 100000, Used: 100000 - freeRAM},
			placement.VCPU:     {Capacity: 1000, Used: 1000 - freeCPU},
		}}
}

func order(ws []weighed) []string {
	var out []string
	for _, w := range ws {
		out = append(out, w.host.Host)
	}
	return out
}

func TestWeighHosts(t *testing.T) {
	a := hostRes("a", 1000, 10, 0, 5)
	b := hostRes("b", 4000, 5, 0, 1)
	c := hostRes("c", 2000, 20, 2, 0)
	cases := []struct {
		desc    string
		weights map[string]float64
		want    []string
	}{
		{"ram spreads to the most free RAM", map[string]float64{"ram": 1}, []string{"b", "c", "a"}},
		{"negative ram multiplier stacks", map[string]float64{"ram": -1}, []string{"a", "c", "b"}},
		{"cpu spreads to the most free vCPUs", map[string]float64{"cpu": 1}, []string{"c", "a", "b"}},
		{"build failures outweigh resources", map[string]float64{"ram": 1, "build_failure": 1e6}, []string{"b", "a", "c"}},
		{"num_instances positive packs", map[string]float64{"num_instances": 1}, []string{"a", "b", "c"}},
		{"all-equal values weigh nothing: input order kept", map[string]float64{"disk": 1}, []string{"a", "b", "c"}},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			ws, err := NewWeighers(tc.weights)
			if err != nil {
				t.Fatal(err)
			}
			got := order(weighHosts(ws, []*HostState{a, b, c}, newCycle(&RequestSpec{})))
			if len(got) != 3 || got[0] != tc.want[0] || got[1] != tc.want[1] || got[2] != tc.want[2] {
				t.Fatalf("order = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestWeighingNormalisesToUnitRange(t *testing.T) {
	ws, _ := NewWeighers(map[string]float64{"ram": 2})
	out := weighHosts(ws, []*HostState{hostRes("a", 0, 0, 0, 0), hostRes("b", 500, 0, 0, 0), hostRes("c", 1000, 0, 0, 0)}, newCycle(&RequestSpec{}))
	want := map[string]float64{"c": 2, "b": 1, "a": 0}
	for _, w := range out {
		if w.weight != want[w.host.Host] {
			t.Fatalf("%s weighs %v, want %v", w.host.Host, w.weight, want[w.host.Host])
		}
	}
}

// A ranking that sorts only the best k up front gives the same order as a
// full sort, wherever a caller stops looking, ties included.
func TestRankingMatchesFullSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 200; trial++ {
		n := 1 + rng.IntN(300)
		w := make([]weighed, n)
		for i := range w {
			w[i] = weighed{host: &HostState{Host: fmt.Sprint(i)}, weight: float64(rng.IntN(20)), order: i}
		}
		full := slices.Clone(w)
		slices.SortFunc(full, compareWeighed)
		k := 1 + rng.IntN(12)
		r := newRanking(slices.Clone(w), k)
		look := rng.IntN(n + 1) // how far a caller looks before all of it
		for i := 0; i < look; i++ {
			if r.at(i) != full[i] {
				t.Fatalf("trial %d (n=%d k=%d): rank %d is %v, want %v", trial, n, k, i, r.at(i), full[i])
			}
		}
		for i := 0; i < n; i++ {
			if r.at(i) != full[i] {
				t.Fatalf("trial %d (n=%d k=%d): rank %d is %v, want %v", trial, n, k, i, r.at(i), full[i])
			}
		}
	}
}
