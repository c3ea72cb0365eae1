package scheduler

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/backoff"
	"github.com/berth-project/berth/internal/informer"
	"github.com/berth-project/berth/placement"
)

// The empty-Placement fallback (seed resource-providers-scheduler-db-filters,
// scheduler { empty_placement_fallback = true }, off by default).
//
// The seed's case: Placement is new and empty (every provider gone, as
// after an upgrade that brought up an empty Placement, or an operator
// wiping it) while the hosts run. Its answer is then no candidates at
// all, which is not "no host has room" but "nobody told Placement yet";
// Nova's scheduler fell back to its old path over every compute node.
// Berth does the same, only when Placement has no provider AT ALL (one
// provider without room is the ordinary NoValidHost): the request is
// scheduled over the host manager's hosts, with Nova's legacy
// Core/Ram/Disk filters checking the capacities the agents report
// (HostCapacity, Nova's compute node record) before the enabled filters,
// and the enabled weighers. The claim still goes through Placement, on the
// host's provider: each agent re-creates its provider at its next provider
// sync, so the claim waits for it, with backoff, up to
// FallbackProviderWait for the whole request, then the host is skipped.
// Placement's request filters (aggregates, traits) have nothing to work
// on and are not applied, as on Nova's legacy path.

// defaultFallbackProviderWait bounds a fallback request's waits for
// providers: within the superconductor's select_timeout (30 s).
const defaultFallbackProviderWait = 10 * time.Second

// fallbackState is a request's fallback: whether it is on, until when its
// claims may wait for providers, and the wait's backoff.
type fallbackState struct {
	on      bool
	until   time.Time
	backoff *backoff.Backoff
	// missing are the hosts whose provider was absent at a claim: only
	// those are waited on, and a claim refused for room on them right
	// after their provider appeared (before its inventory) too.
	missing map[string]bool
}

// fallbackFilters are Nova's legacy resource filters, run first on a
// fallback request: Placement checked no room for it.
var fallbackFilters = []Filter{CoreFilter{}, RamFilter{}, DiskFilter{}}

// providerCounter is the part of placement.Service that counts providers
// (a test double need not have it: then the fallback never applies).
type providerCounter interface {
	ProviderCount() int
}

// placementEmpty is called when Placement offered no candidate: it says
// whether the request falls back (Placement has no provider at all and
// the fallback is on), and logs why either way.
func (s *Scheduler) placementEmpty(c *Cycle, log hclog.Logger) bool {
	pc, ok := s.placement.(providerCounter)
	if !ok || pc.ProviderCount() > 0 {
		return false
	}
	if !s.cfg.EmptyPlacementFallback {
		log.Info("placement has no resource provider at all; empty_placement_fallback is off, so no valid host",
			"reason", "placement_empty", "fallback", false)
		return false
	}
	wait := s.cfg.FallbackProviderWait
	if wait <= 0 {
		wait = defaultFallbackProviderWait
	}
	c.fallback = fallbackState{on: true, until: time.Now().Add(wait),
		backoff: backoff.New(50*time.Millisecond, time.Second), missing: map[string]bool{}}
	return true
}

// fallbackHosts is stage 4 of a fallback request: every host the host
// manager knows with a service, a cell and a capacity report, as a
// HostState whose resources are the report's and whose one candidate
// asks the request's resources of the host's provider.
func (s *Scheduler) fallbackHosts(ctx context.Context, c *Cycle, aggs *aggregateSnapshot, log hclog.Logger) ([]*HostState, error) {
	spec := c.Spec
	c.requestedAmount(placement.VCPU) // fills c.requestedRes
	ignore := make(map[string]bool, len(spec.IgnoreHosts))
	for _, h := range spec.IgnoreHosts {
		ignore[h] = true
	}
	views := s.hosts.fallbackViews()
	hosts := make([]*HostState, 0, len(views))
	unreported := 0
	for _, fv := range views {
		v := fv.view
		if !fv.capacity.reported {
			unreported++
			continue
		}
		if ignore[v.Host] || !spec.RequestedDestination.admits(v.Host, v.Cell) {
			continue
		}
		provider := v.Service.ProviderUUID
		res := make(map[string]placement.ResourceSummary, len(fv.capacity.inventories))
		for rc, inv := range fv.capacity.inventories {
			res[rc] = placement.ResourceSummary{Capacity: inv.Capacity(), Used: fv.capacity.used[rc]}
		}
		hostAggs := aggs.byHost[v.Host]
		hosts = append(hosts, &HostState{
			Host: v.Host, Cell: v.Cell, ProviderUUID: provider, Service: v.Service, Up: v.Up,
			Instances: v.Instances, NumInstances: len(v.Instances), FailedBuilds: v.Service.FailedBuilds,
			Resources: res,
			Candidates: []placement.Candidate{{Root: provider,
				Parts: []placement.CandidatePart{{Provider: provider, Resources: c.requestedRes}}}},
			NumIOOps: v.IOOps, Aggregates: hostAggs,
			AvailabilityZone: hostAvailabilityZone(hostAggs, s.cfg.DefaultAvailabilityZone),
			viewed:           true, trusted: v.Updated,
		})
	}
	log.Info("placement has no resource provider at all; scheduling over the host manager's hosts with the legacy Core/Ram/Disk filters",
		"reason", "placement_empty", "fallback", true, "hosts", len(hosts), "hosts_without_capacity_report", unreported)
	if len(hosts) == 0 {
		return nil, &NoValidHostError{Reason: fmt.Sprintf(
			"Placement has no resource provider and no host reported its capacity (%d without a report).", unreported)}
	}
	if err := s.fillUntrustedInstances(ctx, c, hosts); err != nil {
		return nil, fmt.Errorf("select destinations: %w", err)
	}
	return hosts, nil
}

// waitForProvider is called after a fallback request's claim on h ended
// with err: it reports whether to claim again, having waited (with
// backoff, within the request's bound) for h's provider to appear, or,
// once it appeared, for its inventory.
func (s *Scheduler) waitForProvider(ctx context.Context, c *Cycle, h *HostState, err error) bool {
	fb := &c.fallback
	switch {
	case errors.Is(err, placement.ErrProviderNotFound):
		if !fb.missing[h.Host] {
			s.log.Info("waiting for the host's resource provider to appear", "host", h.Host,
				"provider", h.ProviderUUID, "request_id", c.Spec.RequestID, "until", fb.until)
		}
		fb.missing[h.Host] = true
	case errors.Is(err, placement.ErrInsufficientCapacity) && fb.missing[h.Host]:
		// The provider is back but its inventory not yet (the agent
		// creates the provider, then reports its inventory).
	default:
		return false
	}
	left := time.Until(fb.until)
	if left <= 0 {
		s.log.Info("gave up waiting for the host's resource provider", "host", h.Host,
			"provider", h.ProviderUUID, "request_id", c.Spec.RequestID)
		return false
	}
	return backoff.Sleep(ctx, min(fb.backoff.Next(), left))
}

// fallbackView is a host's view and its capacity report.
type fallbackView struct {
	view     hostView
	capacity hostCapacity
}

// hostCapacity is what a host record keeps of the host's HostCapacity
// report: its two maps, read-only (the inventories are every equal
// host's, etcdschema.DecodeHostCapacityShared, and so is the usage). Kept
// in the record by value, not as the decoded record: at 100,000 hosts
// that was one more live object a host that every collection marks.
type hostCapacity struct {
	inventories map[string]etcdschema.Inventory
	// used is nil for an idle host (read as zero).
	used map[string]int64
	// reported is false until the host's first report (and after its
	// report's delete).
	reported bool
}

// fallbackViews lists every host with a service record, with its
// capacity report (not reported: none yet), under one lock.
func (hm *HostManager) fallbackViews() []fallbackView {
	hm.mu.RLock()
	defer hm.mu.RUnlock()
	out := make([]fallbackView, 0, len(hm.hosts))
	for _, host := range sortedKeys(hm.hosts) {
		if v, ok := hm.viewLocked(host); ok {
			out = append(out, fallbackView{view: v, capacity: hm.hosts[host].capacity})
		}
	}
	return out
}

// applyCapacityLocked records a host's capacity report.
func (hm *HostManager) applyCapacityLocked(host string, ev informer.Event) {
	r := hm.record(host)
	if ev.Deleted {
		r.capacity = hostCapacity{}
		return
	}
	hc, err := decoded[*etcdschema.HostCapacity](ev)
	if err != nil {
		hm.log.Warn("ignoring unreadable capacity report", "host", host, "error", err)
		return
	}
	used := hc.Used
	if len(used) == 0 {
		// An idle host's empty usage is no map at all (read as zero).
		used = nil
	}
	r.capacity = hostCapacity{inventories: hc.Inventories, used: used, reported: true}
}
