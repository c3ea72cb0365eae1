package scheduler

import (
	"context"
	"fmt"
	"strings"

	"github.com/hashicorp/go-hclog"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/placement"
)

// Why a request that failed found no host (reason.go words it). Nothing
// here runs unless the request has failed, and not for a sampled attempt
// that is tried again over every candidate: the request that succeeds
// keeps its cost, and one that fails pays a walk over placement's index
// and its own host states.
//
// Each host gets one verdict, from the best source for it:
//
//   - a host placement offered and the scheduler joined (stage 4): the
//     first filter that refuses it for the instance that could not be
//     placed, else the class its free room (less this request's own
//     picks) is short of, else its claim was refused (another request
//     took the room);
//   - a host placement offered but the join left out: the request's
//     ignore_hosts or requested_destination, or no compute service;
//   - any other: placement's own reason (ExplainCandidates): the class
//     that ran out, max_unit, a trait, an aggregate; a provider with
//     COMPUTE_STATUS_DISABLED is the disabled service, with its reason.
//
// Hosts outside a requested host's tree (in_tree) are not counted: the
// request named its host.

// candidateExplainer is the part of placement.Service that says why trees
// miss a query (a test double need not have it).
type candidateExplainer interface {
	ExplainCandidates(ctx context.Context, q placement.CandidateQuery) ([]placement.RootFit, error)
}

// explainFailure builds the failure of c's current instance, having
// placed c.Index instances before it; weighed are the hosts the pick
// weighed (nil before the picks).
func (s *Scheduler) explainFailure(ctx context.Context, c *Cycle, weighed []*HostState, log hclog.Logger) failure {
	f := failure{Placed: c.Index, Instances: len(c.Spec.InstanceUUIDs)}
	// Under max_hosts_to_weigh a pick weighs only some of the hosts that
	// pass the filters: one left out was not refused.
	var left map[*HostState]bool
	if s.effectiveCap(c.Spec) > 0 {
		left = make(map[*HostState]bool, len(c.hosts))
		for _, h := range c.hosts {
			left[h] = true
		}
		for _, h := range weighed {
			delete(left, h)
		}
	}
	joined := make(map[string]*HostState, len(c.hosts))
	for _, h := range c.hosts {
		joined[h.ProviderUUID] = h
	}
	offered := make(map[string]bool, len(c.cands))
	for _, cand := range c.cands {
		offered[cand.Root] = true
	}
	var fits []placement.RootFit
	if ex, ok := s.placement.(candidateExplainer); ok {
		var err error
		if fits, err = ex.ExplainCandidates(ctx, c.query); err != nil {
			log.Warn("could not explain the missing candidates", "error", err)
		}
	}
	seen := make(map[string]bool, len(fits))
	for _, rf := range fits {
		seen[rf.Root] = true
		if rf.Miss.Kind == placement.MissInTree {
			continue
		}
		if h := joined[rf.Root]; h != nil {
			f.Verdicts = append(f.Verdicts, s.joinedVerdict(h, c, left[h]))
			continue
		}
		f.Verdicts = append(f.Verdicts, s.placementVerdict(rf, offered[rf.Root], c))
	}
	// Without an explainer (or a host the index no longer has), the
	// joined hosts speak for themselves.
	for _, h := range c.hosts {
		if !seen[h.ProviderUUID] {
			f.Verdicts = append(f.Verdicts, s.joinedVerdict(h, c, left[h]))
		}
	}
	return f
}

// joinedVerdict is why a host the scheduler joined could not take c's
// current instance; unweighed says the pick did not weigh it (the cap).
func (s *Scheduler) joinedVerdict(h *HostState, c *Cycle, unweighed bool) hostVerdict {
	for _, flt := range s.filters {
		if st := flt.Filter(h, c); !st.Passed() {
			return hostVerdict{Host: h.Host, Kind: verdictFilter, By: flt.Name(), Reason: st.Reason(h, c)}
		}
	}
	if c.requestedRes == nil {
		c.requestedAmount(placement.VCPU) // fills requestedRes
	}
	rcs := sortedKeys(c.requestedRes)
	for _, rc := range rcs {
		r, ok := h.resourceMap()[rc]
		if !ok {
			continue // from a child or a sharing provider: placement's to judge
		}
		if want := c.requestedRes[rc]; r.Capacity-r.Used < want {
			return hostVerdict{Host: h.Host, Kind: verdictMiss,
				Miss: placement.Miss{Kind: placement.MissCapacity, Class: rc, Amount: want, Free: r.Capacity - r.Used}}
		}
	}
	if unweighed {
		return hostVerdict{Host: h.Host, Kind: verdictUnweighed}
	}
	return hostVerdict{Host: h.Host, Kind: verdictClaimLost}
}

// placementVerdict is why a host the scheduler did not join was not
// there: placement's reason, or the join's.
func (s *Scheduler) placementVerdict(rf placement.RootFit, offered bool, c *Cycle) hostVerdict {
	name := rf.Name
	var v hostView
	known := false
	if s.hosts != nil {
		v, known = s.hosts.viewForProvider(rf.Root)
		if known {
			name = v.Host
		}
	}
	if known {
		for _, ig := range c.Spec.IgnoreHosts {
			if ig == v.Host {
				return hostVerdict{Host: name, Kind: verdictExcluded, By: "ignore_hosts", Reason: "the request ignores it"}
			}
		}
		if d := c.Spec.RequestedDestination; !d.admits(v.Host, v.Cell) {
			why := "not the requested host"
			if d.Cell != "" && d.Cell != v.Cell {
				why = fmt.Sprintf("in cell %s, not the requested cell %s", v.Cell, d.Cell)
			}
			return hostVerdict{Host: name, Kind: verdictExcluded, By: "requested_destination", Reason: why}
		}
	}
	switch {
	case offered:
		// Placement offered it and the request did not leave it out: the
		// join found no compute service for it.
		return hostVerdict{Host: name, Kind: verdictNoService}
	case rf.Fits:
		return hostVerdict{Host: name, Kind: verdictUnoffered}
	case (rf.Miss.Kind == placement.MissRootForbiddenTrait || rf.Miss.Kind == placement.MissForbiddenTrait) &&
		rf.Miss.Class == placement.TraitComputeStatusDisabled:
		reason := ""
		if known && v.Service != nil {
			reason = v.Service.DisabledReason
		}
		return hostVerdict{Host: name, Kind: verdictDisabled, Reason: reason}
	}
	m := rf.Miss
	if m.Kind == placement.MissMemberOf || m.Kind == placement.MissForbiddenAggregate {
		m.Class = s.aggregateNames(m.Class)
	}
	return hostVerdict{Host: name, Kind: verdictMiss, Miss: m}
}

// aggregateNames words a comma-separated list of aggregate uuids (what
// the aggregate request filters put in member_of) as the operator named
// them, with the availability zone an aggregate sets: "az1-hosts
// (availability zone az1)". An unknown uuid stays as it is.
func (s *Scheduler) aggregateNames(uuids string) string {
	if s.hosts == nil {
		return uuids
	}
	byUUID := map[string]*etcdschema.Aggregate{}
	for _, a := range s.hosts.aggregates().all {
		byUUID[a.UUID] = a
	}
	parts := strings.Split(uuids, ",")
	for i, u := range parts {
		a := byUUID[u]
		if a == nil {
			continue
		}
		parts[i] = a.Name
		if z := a.AvailabilityZone(); z != "" {
			parts[i] += " (availability zone " + z + ")"
		}
	}
	return strings.Join(parts, ", ")
}

// failNoValidHost is the NoValidHostError of c's current instance: the
// explained reason, unless the attempt was sampled and is about to be
// tried again over every candidate (then fallback, which costs nothing).
// weighed are the hosts the failing pick weighed.
func (s *Scheduler) failNoValidHost(ctx context.Context, c *Cycle, weighed []*HostState, fallback string, log hclog.Logger) *NoValidHostError {
	if c.sampled {
		return c.noValidHost(s.filters, fallback)
	}
	f := s.explainFailure(ctx, c, weighed, log)
	host := c.Spec.RequestedDestination.host()
	for _, v := range f.Verdicts {
		if v.Host == host && host != "" {
			c.rejectRequested(host, verdictSource(v), (&verdictGroup{kind: v.Kind, miss: v.Miss, by: v.By,
				hosts: []hostVerdict{v}}).phrase(1))
		}
	}
	nvh := c.noValidHost(s.filters, f.String())
	if log.IsDebug() {
		log.Debug("no valid host", "instance", c.Instance, "reason", nvh.Reason, "filters", filterResults(nvh.Removed))
	}
	return nvh
}

// verdictSource is who turned a host down, for a requested host's
// rejection.
func verdictSource(v hostVerdict) string {
	switch v.Kind {
	case verdictFilter, verdictExcluded:
		return v.By
	case verdictClaimLost:
		return "claim"
	}
	return "Placement"
}

// filterResults is Nova's "Filter results" of a failed request: each
// filter with the hosts it removed.
func filterResults(counts []FilterCount) string {
	parts := make([]string, 0, len(counts))
	for _, fc := range counts {
		parts = append(parts, fmt.Sprintf("%s: (removed %d)", fc.Filter, fc.Removed))
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// maxLoggedWeighed is how many of the weighed hosts the debug log shows:
// Nova logs every one, which at thousands of hosts is a megabyte a pick.
const maxLoggedWeighed = 10

// weighedHosts is the best of a ranking as Nova's scheduler logs its
// weighed hosts (HostState's repr: free RAM and disk in MB): "WeighedHost
// [host: (compute-1, compute-1) ram: 2048MB disk: 10240MB io_ops: 0
// instances: 1, weight: 1]". Only for the debug log.
func weighedHosts(r *ranking) string {
	n := min(r.len(), maxLoggedWeighed)
	parts := make([]string, 0, n+1)
	for k := 0; k < n; k++ {
		w := r.at(k)
		h := w.host
		parts = append(parts, fmt.Sprintf("WeighedHost [host: (%s, %s) ram: %dMB disk: %dMB io_ops: %d instances: %d, weight: %g]",
			h.Host, h.Host, h.Free(placement.MemoryMB), h.Free(placement.DiskGB)*1024, h.NumIOOps, h.NumInstances, w.weight))
	}
	if r.len() > n {
		parts = append(parts, fmt.Sprintf("... %d more", r.len()-n))
	}
	return "[" + strings.Join(parts, ", ") + "]"
}
