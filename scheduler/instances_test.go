package scheduler

import (
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/berth-project/berth/etcdschema"
)

// TestNeedsInstancesSkipsZeroWeighers: a weigher that reads instances
// makes a request read untrusted hosts' instances from the cells only when
// it can weigh something, i.e. its multiplier is non-zero for one of the
// hosts (the configured one, or an aggregate's override).
func TestNeedsInstancesSkipsZeroWeighers(t *testing.T) {
	plain := &HostState{Host: "a"}
	override := &HostState{Host: "b", Aggregates: []*etcdschema.Aggregate{
		{Name: "agg", Metadata: map[string]string{"num_instances_weight_multiplier": "2"}}}}
	otherKey := &HostState{Host: "c", Aggregates: []*etcdschema.Aggregate{
		{Name: "agg", Metadata: map[string]string{"ram_weight_multiplier": "2"}}}}
	cases := []struct {
		desc    string
		weights map[string]float64
		filters []string
		hosts   []*HostState
		want    bool
	}{
		{desc: "num_instances at 0 (the default config)", weights: map[string]float64{"ram": 1, "num_instances": 0},
			hosts: []*HostState{plain, otherKey}, want: false},
		{desc: "num_instances weighing", weights: map[string]float64{"num_instances": -1},
			hosts: []*HostState{plain}, want: true},
		{desc: "num_instances at 0, an aggregate overrides it for one host", weights: map[string]float64{"num_instances": 0},
			hosts: []*HostState{plain, override}, want: true},
		{desc: "a filter that always reads instances", weights: map[string]float64{"num_instances": 0},
			filters: []string{"TypeAffinityFilter"}, hosts: []*HostState{plain}, want: true},
		{desc: "no reader at all", weights: map[string]float64{"ram": 1},
			hosts: []*HostState{override}, want: false},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			filters := tc.filters
			if filters == nil {
				filters = []string{"ComputeFilter"}
			}
			s, err := New(Config{MaxAttempts: 1, EnabledFilters: filters, Weights: tc.weights}, nil, nil, hclog.NewNullLogger())
			if err != nil {
				t.Fatal(err)
			}
			c := newCycle(spec(1, 256, "i"))
			if got := s.needsInstances(c, tc.hosts); got != tc.want {
				t.Fatalf("needsInstances = %v, want %v", got, tc.want)
			}
		})
	}
}
