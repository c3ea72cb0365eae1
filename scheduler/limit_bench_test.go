package scheduler

import (
	"fmt"
	"testing"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/placement"
)

// BenchmarkFilterAndWeigh measures what max_hosts_to_weigh saves: the
// filters and weighers of one pick over n candidate hosts, some of them in
// aggregates with metadata, with the cap off and at 100.
func BenchmarkFilterAndWeigh(b *testing.B) {
	aggs := []*etcdschema.Aggregate{
		agg("az1", "availability_zone", "az1", "ram_weight_multiplier", "2"),
		agg("ssd", "ssd", "true"),
	}
	filters, err := NewFilters([]string{"ComputeFilter", "SameHostFilter", "DifferentHostFilter",
		"ServerGroupAntiAffinityFilter", "ServerGroupAffinityFilter", "AvailabilityZoneFilter",
		"AggregateInstanceExtraSpecsFilter"})
	if err != nil {
		b.Fatal(err)
	}
	ws, err := NewWeighers(map[string]float64{"ram": 1, "cpu": 1, "disk": 1, "io_ops": -1,
		"build_failure": 1e6, "soft_affinity": 1, "soft_anti_affinity": 1, "num_instances": 0})
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		n        int
		withAggs bool
	}{{1000, true}, {10000, false}, {10000, true}} {
		n, withAggs := c.n, c.withAggs
		hosts := make([]*HostState, n)
		for i := range hosts {
			h := hostWith(true, false)
			h.Host = fmt.Sprintf("h%d", i)
			h.Resources = map[string]placement.ResourceSummary{
				placement.VCPU:     {Capacity: 64, Used: int64(i % 64)},
				placement.MemoryMB: {Capacity: 262144, Used: int64(i%97) * 1024},
				placement.DiskGB:   {Capacity: 2000, Used: int64(i % 500)},
			}
			if withAggs && i%2 == 0 {
				h.Aggregates = aggs
			}
			hosts[i] = h
		}
		spec := flavorSpec("1", "m1.small")
		if withAggs {
			spec = flavorSpec("1", "m1.small", "aggregate_instance_extra_specs:ssd", "true")
		}
		for _, limit := range []int{0, 100} {
			s := &Scheduler{cfg: Config{MaxAttempts: 3, MaxHostsToWeigh: limit, HostSubsetSize: 1}, filters: filters, weighers: ws}
			b.Run(fmt.Sprintf("hosts=%d/aggregates=%v/max_hosts_to_weigh=%d", n, withAggs, limit), func(b *testing.B) {
				for b.Loop() {
					c := newCycle(spec)
					passed := s.filterFirst(hosts, c)
					if len(passed) == 0 {
						b.Fatal("no host passed")
					}
					s.sortHosts(passed, c)
				}
			})
		}
	}
}
