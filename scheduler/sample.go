package scheduler

import "github.com/berth-project/berth/etcdschema"

// Candidate sampling, placement_sample_size. Every request used to ask
// placement for max_placement_results (Nova's 1,000) candidates and join,
// filter and weigh all of them: at 10,000 hosts that is most of a
// request's CPU, and it is the same whether the cloud has 1,000 hosts or
// 100,000. A request that asks for a few instances needs a few good hosts,
// not the best of 1,000, so the scheduler asks instead for a sample:
// placement walks its providers from a random one, wrapping, and stops at
// the sample size (CandidateQuery.RandomStart). The filters and weighers
// still see every candidate they are given. This is what Nova operators
// at scale do by lowering max_placement_results with Placement's
// randomize_allocation_candidates, and what kube-scheduler
// (percentageOfNodesToScore) and Nomad (its limit iterator) do by default.
//
// Two things keep it from changing whether a request can be placed:
//
//   - requests that must land on particular hosts are not sampled: a
//     same_host hint, or a hard-affinity group that already has members
//     (a requested destination is already one tree via in_tree);
//   - a sampled request that finds no valid host is scheduled again over
//     max_placement_results candidates, as without sampling (few hosts
//     left with room, or different_host / anti-affinity ruling out most of
//     the sample). The second search costs what every request cost before.
//
// The sample is at least instances × max_attempts, so a multi-instance
// request and its alternates have room, and it is not taken when the cloud
// has no more compute nodes than the sample. 0 turns sampling off: every
// request then gets Nova's max_placement_results in index order.

// sampleSize is the number of candidates to sample for c's request, 0 = all.
func (s *Scheduler) sampleSize(c *Cycle) int {
	spec := c.Spec
	if s.cfg.PlacementSampleSize <= 0 || len(spec.Hints.SameHost) > 0 {
		return 0
	}
	if g := c.Group; g != nil && g.Policy() == etcdschema.PolicyAffinity && len(g.Members) > 0 {
		return 0
	}
	n := max(s.cfg.PlacementSampleSize, len(spec.InstanceUUIDs)*s.cfg.MaxAttempts)
	// With no more compute nodes than the sample, it would be all of them
	// in a random order: keep placement's order, as without sampling.
	if s.hosts != nil && s.hosts.providerCount() <= n {
		return 0
	}
	return n
}

// providerCount is the number of compute node providers with a service.
func (hm *HostManager) providerCount() int {
	hm.mu.RLock()
	defer hm.mu.RUnlock()
	return len(hm.byProvider)
}
