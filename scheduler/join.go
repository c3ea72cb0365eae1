package scheduler

import (
	"fmt"

	"github.com/berth-project/berth/placement"
)

// joinHosts joins placement's candidates with the host manager: one
// HostState per compute node (root provider) that has a known service,
// less the ignored hosts and those outside the requested destination.
func (s *Scheduler) joinHosts(c *Cycle, cands []placement.Candidate, aggs *aggregateSnapshot) []*HostState {
	spec := c.Spec
	var ignore map[string]bool
	if len(spec.IgnoreHosts) > 0 {
		ignore = make(map[string]bool, len(spec.IgnoreHosts))
		for _, h := range spec.IgnoreHosts {
			ignore[h] = true
		}
	}
	// Each candidate's root, and the distinct roots in answer order, so
	// the host manager is asked for all of them under one lock. The arrays
	// are the cycle's scratch (scratch.go).
	sc := c.joinScratch()
	rootIdx := resize(sc.rootIdx, len(cands)) // each written below
	roots, rootSlots := sc.distinctRoots(cands, rootIdx)
	views, oks := s.hosts.viewsForProviders(roots, rootSlots, resize(sc.views, len(roots)), grow(sc.oks, len(roots)))
	// Every state and every state's candidate list come from one array
	// each: a request joins up to 1,000 hosts, and one allocation per
	// host was the join's largest cost after the views.
	perRoot := grow(sc.perRoot, len(roots)+1)
	for _, j := range rootIdx {
		if j >= 0 {
			perRoot[j+1]++
		}
	}
	for j := 1; j < len(perRoot); j++ {
		perRoot[j] += perRoot[j-1]
	}
	backing := resize(sc.backing, len(cands)) // each slot a root's candidate reads is written below
	fill := grow(sc.fill, len(roots))
	firstIdx := resize(sc.firstIdx, len(roots)) // each root's first candidate's place in cands, written below
	for i, c := range cands {
		if j := rootIdx[i]; j >= 0 {
			if fill[j] == 0 {
				firstIdx[j] = i
			}
			backing[perRoot[j]+fill[j]] = c
			fill[j]++
		}
	}
	all := resize(sc.states, len(roots)) // each state in order is written whole below
	order := sc.order[:0]
	defer func() {
		sc.rootIdx, sc.roots, sc.rootSlots, sc.views, sc.oks, sc.perRoot = rootIdx, roots, rootSlots, views, oks, perRoot
		sc.backing, sc.fill, sc.firstIdx, sc.states, sc.order = backing, fill, firstIdx, all, order
	}()
	for j, root := range roots {
		v := &views[j]
		if !oks[j] {
			continue
		}
		if ignore[v.Host] || !spec.RequestedDestination.admits(v.Host, v.Cell) {
			if v.Host == spec.RequestedDestination.host() {
				if ignore[v.Host] {
					c.rejectRequested(v.Host, "ignore_hosts", "the request ignores it")
				} else {
					c.rejectRequested(v.Host, "requested_destination",
						fmt.Sprintf("in cell %s, not the requested cell %s", v.Cell, spec.RequestedDestination.Cell))
				}
			}
			continue
		}
		first := backing[perRoot[j]]
		// The summary's standard classes as the search read them, when it
		// built cands in the scratch: the summary itself is not rendered;
		// HostState.resourceMap renders it if a filter or weigher wants
		// another class.
		std, stdOK := sc.compact.RootStandard(cands, firstIdx[j])
		var resources map[string]placement.ResourceSummary
		if !stdOK {
			if ps := first.RootSummary.Get(); ps != nil {
				std, stdOK = ps.Standard()
				resources = ps.Resources
			}
		}
		hostAggs := aggs.byHost[v.Host]
		hs := &all[j]
		*hs = HostState{
			Host: v.Host, Cell: v.Cell, ProviderUUID: root, Service: v.Service, Up: v.Up,
			Instances: v.Instances, NumInstances: v.NumInstances,
			FailedBuilds: v.FailedBuilds,
			Resources:    resources, summary: first.RootSummary,
			Candidates: backing[perRoot[j]:perRoot[j+1]:perRoot[j+1]],
			NumIOOps:   v.IOOps, Aggregates: hostAggs,
			AvailabilityZone: hostAvailabilityZone(hostAggs, s.cfg.DefaultAvailabilityZone),
			std:              std, stdOK: stdOK,
			nameHash: v.NameHash,
			viewed:   true, trusted: v.Updated,
		}
		order = append(order, hs)
	}
	return order
}
