package scheduler

import "math/rand/v2"

// The candidate cap, max_hosts_to_weigh, bounds the work of one request
// the way Nomad's limit iterator and kube-scheduler's
// percentageOfNodesToScore do: rather than filtering and weighing every
// candidate placement returned, the scheduler stops filtering once it has
// found that many hosts that pass, and weighs only those. Two things keep
// the sample fair:
//
//   - the walk starts at a random candidate and wraps around (as
//     kube-scheduler rotates its start), so concurrent schedulers look at
//     different hosts and do not all race for one, and no host is always
//     left out;
//   - the cap is raised to instances × max_attempts, so a multi-instance
//     request, anti-affinity and the alternates still have room.
//
// The price is that the best host may not be among those weighed; like
// host_subset_size this trades a perfect pick for speed at scale.
// Placement's own limit (max_placement_results) already samples before
// this; the cap bounds what remains, and 0 turns it off.

// effectiveCap is the number of passing hosts to look for, 0 = all.
func (s *Scheduler) effectiveCap(spec *RequestSpec) int {
	if s.cfg.MaxHostsToWeigh <= 0 {
		return 0
	}
	return max(s.cfg.MaxHostsToWeigh, len(spec.InstanceUUIDs)*s.cfg.MaxAttempts)
}

// filterFirst runs the filters for the first instance of a request, under
// the cap when one is set.
func (s *Scheduler) filterFirst(hosts []*HostState, c *Cycle) []*HostState {
	limit := s.effectiveCap(c.Spec)
	if limit == 0 || len(hosts) <= limit {
		return runFilters(s.filters, hosts, c)
	}
	return runFiltersLimited(s.filters, hosts, c, limit, rand.IntN(len(hosts)))
}

// runFiltersLimited filters host by host from start, wrapping around, until
// limit hosts pass. Each removed host is counted against the first filter
// that refused it, which is what runFilters counts too.
func runFiltersLimited(filters []Filter, hosts []*HostState, c *Cycle, limit, start int) []*HostState {
	out := make([]*HostState, 0, limit)
	for n := 0; n < len(hosts) && len(out) < limit; n++ {
		h := hosts[(start+n)%len(hosts)]
		passed := true
		for _, f := range filters {
			if st := f.Filter(h, c); !st.Passed() {
				c.reject(f.Name(), h, st)
				passed = false
				break
			}
		}
		if passed {
			out = append(out, h)
		}
	}
	return out
}
