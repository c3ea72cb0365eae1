package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/metrics"
	"github.com/berth-project/berth/placement"
)

// AllocationRequestVersion is the Placement microversion an alternate's
// allocation request is written for (Nova records it in the Selection).
const AllocationRequestVersion = "1.36"

// Placement is what the scheduler needs of the placement service: the
// candidate search on its in-memory index and the claim transactions.
type Placement interface {
	// CompactCandidates is the allocation candidates search in placement's
	// in-process form: the HTTP API's map-shaped answer costs a request a
	// fifth of its CPU to build and is not needed here.
	CompactCandidates(ctx context.Context, q placement.CandidateQuery) ([]placement.Candidate, error)
	// PutAllocationsWithOptions returns the etcd revision of the claim, so
	// a rollback can free exactly that claim and nothing written since.
	PutAllocationsWithOptions(ctx context.Context, writes map[string]placement.AllocationWrite, opts placement.ClaimOptions) (int64, error)
	DeleteAllocationsGuarded(ctx context.Context, consumer string, guards ...clientv3.Cmp) error
}

// Config is the scheduler's tuning, from the HCL scheduler block.
type Config struct {
	MaxAttempts                 int
	HostSubsetSize              int
	MaxPlacementResults         int
	ShuffleBestSameWeighedHosts bool
	EnabledFilters              []string
	Weights                     map[string]float64
	// MaxHostsToWeigh caps the hosts filtered and weighed per request
	// (0 = all); see limit.go.
	MaxHostsToWeigh int
	// PlacementSampleSize asks placement for this many candidates from a
	// random start instead of max_placement_results in index order (0 =
	// Nova's behaviour); see sample.go.
	PlacementSampleSize int
	// DefaultAvailabilityZone is the AZ of hosts in no AZ aggregate
	// ("" means Nova's "nova").
	DefaultAvailabilityZone string
	// Nova's [scheduler] gates of the aggregate request filters.
	LimitTenantsToPlacementAggregate     bool
	PlacementAggregateRequiredForTenants bool
	EnableIsolatedAggregateFiltering     bool
}

// DefaultConfig is Nova's defaults.
func DefaultConfig() Config {
	return Config{
		MaxAttempts:         3,
		HostSubsetSize:      1,
		MaxPlacementResults: 1000,
		EnabledFilters:      []string{"ComputeFilter"},
		Weights:             map[string]float64{"ram": 1.0},
	}
}

// Scheduler answers select_destinations.
type Scheduler struct {
	cfg       Config
	placement Placement
	hosts     *HostManager
	filters   []Filter
	weighers  []weigherWithMultiplier
	log       hclog.Logger
	// guardLosses counts claims refused because another scheduler took a
	// server group's place first.
	guardLosses atomic.Int64
	metrics     *metrics.Metrics // nil: not observed
}

// New builds a scheduler over a placement service and a host manager.
func New(cfg Config, p Placement, hm *HostManager, log hclog.Logger) (*Scheduler, error) {
	if cfg.MaxAttempts < 1 {
		return nil, fmt.Errorf("scheduler: max_attempts must be at least 1, got %d", cfg.MaxAttempts)
	}
	if cfg.HostSubsetSize < 1 {
		cfg.HostSubsetSize = 1
	}
	filters, err := NewFilters(cfg.EnabledFilters)
	if err != nil {
		return nil, fmt.Errorf("scheduler: enabled_filters: %w", err)
	}
	ws, err := NewWeighers(cfg.Weights)
	if err != nil {
		return nil, fmt.Errorf("scheduler: weights: %w", err)
	}
	if cfg.DefaultAvailabilityZone == "" {
		cfg.DefaultAvailabilityZone = "nova"
	}
	for _, f := range filters {
		if l, ok := f.(legacyFilter); ok {
			log.Warn("legacy filter enabled: placement already enforces what it checks",
				"filter", f.Name(), "detail", l.LegacyNotice())
		}
	}
	return &Scheduler{cfg: cfg, placement: p, hosts: hm, filters: filters, weighers: ws, log: log}, nil
}

// selectDestinations is SelectDestinations without its metrics.
func (s *Scheduler) selectDestinations(ctx context.Context, spec *RequestSpec) ([][]etcdschema.Selection, error) {
	out, err := s.selectOnce(ctx, spec, true)
	var nvh *NoValidHostError
	if errors.As(err, &nvh) && nvh.sampled {
		// A sample can miss the hosts a request needs (few left with room,
		// different_host or anti-affinity ruling most out): sampling may
		// change which host is picked, never whether one is.
		s.log.Debug("no valid host in the sampled candidates; asking for all", "request_id", spec.RequestID,
			"reason", nvh.Reason)
		return s.selectOnce(ctx, spec, false)
	}
	return out, err
}

// selectOnce schedules the request over one candidate search: a sample of
// placement's candidates when maySample and sampleSize allow it, else up
// to max_placement_results of them.
func (s *Scheduler) selectOnce(ctx context.Context, spec *RequestSpec, maySample bool) (out [][]etcdschema.Selection, err error) {
	start := time.Now()
	if len(spec.InstanceUUIDs) == 0 {
		return nil, fmt.Errorf("select destinations: no instance uuids")
	}
	log := s.log.With("request_id", spec.RequestID)
	if spec.MinRevision > 0 {
		s.catchUp(ctx, spec.MinRevision, log)
	}
	q := BuildPlacementQuery(spec, s.cfg.MaxPlacementResults)
	// Nothing here or in the conductors reads an allocation request's
	// mappings (claims take its allocations): skip building them.
	q.OmitMappings = true
	aggs := s.hosts.aggregates()
	if err := applyAggregateRequestFilters(&q, spec, aggs.all, s.cfg); err != nil {
		return nil, &NoValidHostError{Reason: err.Error() + "."}
	}
	if err := s.applyRequestedDestination(&q, spec); err != nil {
		return nil, err
	}
	if spec.Hints.Group != "" {
		g, err := s.loadGroup(ctx, spec.Hints.Group)
		if errors.Is(err, ErrGroupNotFound) {
			return nil, &NoValidHostError{Reason: fmt.Sprintf("Server group %s does not exist.", spec.Hints.Group)}
		}
		if err != nil {
			return nil, fmt.Errorf("select destinations: %w", err)
		}
		if err := s.checkGroupPolicy(g); err != nil {
			return nil, &NoValidHostError{Reason: err.Error() + "."}
		}
		spec.Group = g
	}
	sampled := false
	if n := s.sampleSize(spec); maySample && n > 0 && n < q.Limit {
		q.Limit, q.RandomStart, sampled = n, true, true
		defer func() {
			var nvh *NoValidHostError
			if errors.As(err, &nvh) {
				nvh.sampled = true
			}
		}()
	}
	cands, err := s.placement.CompactCandidates(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("select destinations: allocation candidates: %w", err)
	}
	if len(cands) == 0 {
		return nil, &NoValidHostError{Reason: "Placement found no resource provider with room for the flavor."}
	}
	hosts := s.hostStates(spec, cands, aggs)
	if err := s.fillUntrustedInstances(ctx, spec, hosts); err != nil {
		return nil, fmt.Errorf("select destinations: %w", err)
	}
	counts := map[string]int{}
	spec.InstanceUUID = spec.InstanceUUIDs[0]
	filtered := s.filterFirst(hosts, spec, counts)

	n := len(spec.InstanceUUIDs)
	claimRevs := make([]int64, 0, n) // revision of each claim, for rollback
	chosen := make([]*HostState, 0, n)
	claimedReqs := make([]placement.Candidate, 0, n)
	selectedHosts := map[string]bool{}
	var lastSorted *ranking
	groupPlaced := map[string]string{}
	for i, uuid := range spec.InstanceUUIDs {
		spec.InstanceUUID = uuid
		if i > 0 {
			filtered = runFilters(s.filters, filtered, spec, i, counts)
		}
		var picked *HostState
		var pickedReq placement.Candidate
		// A server-group guard lost to another scheduler means our view
		// of the group is old: re-read it, filter again and walk again.
		for reload := 0; picked == nil; reload++ {
			sorted := s.sortHosts(filtered, spec)
			lastSorted = sorted
			var guardLost bool
			var err error
			var rev int64
			picked, pickedReq, rev, guardLost, err = s.claimFirst(ctx, sorted, spec, uuid)
			if picked != nil {
				claimRevs = append(claimRevs, rev)
			}
			if err != nil {
				s.rollback(ctx, spec.InstanceUUIDs[:i], claimRevs)
				s.releaseGroupPlaces(ctx, spec.Group, groupPlaced)
				return nil, err
			}
			if picked != nil || !guardLost || reload >= maxGroupReloads {
				break
			}
			g, err := s.loadGroup(ctx, spec.Hints.Group)
			if err != nil {
				s.rollback(ctx, spec.InstanceUUIDs[:i], claimRevs)
				s.releaseGroupPlaces(ctx, spec.Group, groupPlaced)
				return nil, fmt.Errorf("select destinations: %w", err)
			}
			for _, u := range spec.InstanceUUIDs[:i] { // our own picks are committed
				g.place(groupPlaced[u], u)
			}
			spec.Group = g
			filtered = runFilters(s.filters, filtered, spec, i, counts)
			log.Debug("server group changed under the request; filtered again", "instance", uuid,
				"group", spec.Hints.Group, "hosts", len(filtered))
		}
		if picked == nil {
			s.rollback(ctx, spec.InstanceUUIDs[:i], claimRevs)
			s.releaseGroupPlaces(ctx, spec.Group, groupPlaced)
			return nil, &NoValidHostError{
				Reason:  fmt.Sprintf("There are not enough hosts available (placed %d of %d).", i, n),
				Removed: orderedCounts(s.filters, counts),
			}
		}
		picked.consume(pickedReq)
		picked.addInstance(uuid, spec.Flavor)
		if spec.Group != nil {
			spec.Group.place(picked.Host, uuid)
			groupPlaced[uuid] = picked.Host
		}
		chosen = append(chosen, picked)
		claimedReqs = append(claimedReqs, pickedReq)
		selectedHosts[picked.Host] = true
	}

	out = make([][]etcdschema.Selection, n)
	for i, h := range chosen {
		out[i] = append(out[i], s.selection(h, claimedReqs[i]))
		for k := 0; k < lastSorted.len(); k++ {
			if len(out[i]) >= s.cfg.MaxAttempts {
				break
			}
			alt := lastSorted.at(k).host
			if alt.Cell != h.Cell || selectedHosts[alt.Host] || len(alt.Candidates) == 0 {
				continue
			}
			out[i] = append(out[i], s.selection(alt, alt.Candidates[0]))
		}
	}
	log.Debug("selected destinations", "instances", n, "candidates", len(hosts), "sampled", sampled,
		"passed_filters", len(filtered), "elapsed", time.Since(start))
	return out, nil
}

// maxGroupReloads bounds how often one pick re-reads a server group whose
// guard another scheduler took first.
const maxGroupReloads = 3

// claimFirst walks the sorted hosts and claims the first that takes the
// instance: Nova's claim loop, with the server-group guard in the same
// etcd transaction as the claim. guardLost says a host was passed over
// because the group changed under us. rev is the claim's etcd revision.
func (s *Scheduler) claimFirst(ctx context.Context, sorted *ranking, spec *RequestSpec, uuid string) (picked *HostState, ar placement.Candidate, rev int64, guardLost bool, err error) {
	for k := 0; k < sorted.len(); k++ {
		h := sorted.at(k).host
		if len(h.Candidates) == 0 {
			continue
		}
		ar = h.Candidates[0]
		write := placement.AllocationWrite{Allocations: ar.AllocationRequest().Allocations, ProjectID: spec.ProjectID, UserID: spec.UserID}
		var opts placement.ClaimOptions
		committed := func(int64) {}
		if spec.Group != nil {
			opts.Guards, opts.GuardOps, committed = groupGuard(s.hosts.keys, spec.Group, h.Host, uuid)
		}
		rev, err = s.placement.PutAllocationsWithOptions(ctx, map[string]placement.AllocationWrite{uuid: write}, opts)
		switch {
		case err == nil:
			committed(rev)
			return h, ar, rev, guardLost, nil
		case errors.Is(err, placement.ErrGuardFailed):
			s.log.Debug("server group place taken by another scheduler", "instance", uuid, "host", h.Host,
				"group", spec.Group.Group.UUID)
			guardLost = true
			s.guardLosses.Add(1)
		case isClaimRace(err):
			s.log.Debug("claim lost, trying the next host", "instance", uuid, "host", h.Host, "error", err)
		default:
			return nil, ar, 0, false, fmt.Errorf("claim %s on %s: %w", uuid, h.Host, err)
		}
	}
	return nil, placement.Candidate{}, 0, guardLost, nil
}

func isClaimRace(err error) bool {
	return errors.Is(err, placement.ErrInsufficientCapacity) ||
		errors.Is(err, placement.ErrConcurrentUpdate) ||
		errors.Is(err, placement.ErrProviderNotFound)
}

// rollback frees earlier claims of a request that cannot be placed whole.
// Each is freed only if the consumer is still the record this claim wrote
// (guarded by its revision): when a caller gave up on this scheduler (a
// timeout) it frees the claims and asks another scheduler, whose claims
// for the same instances a late rollback here must not touch.
func (s *Scheduler) rollback(ctx context.Context, uuids []string, revs []int64) {
	for i, u := range uuids {
		own := clientv3.Compare(clientv3.ModRevision(s.hosts.keys.Consumer(u)), "=", revs[i])
		err := s.placement.DeleteAllocationsGuarded(context.WithoutCancel(ctx), u, own)
		switch {
		case err == nil:
		case errors.Is(err, placement.ErrGuardFailed), errors.Is(err, placement.ErrNotFound):
			s.log.Info("claim already freed or replaced by another scheduler; leaving it", "instance", u)
		default:
			s.log.Error("could not free claim of unplaceable request", "instance", u, "error", err)
		}
	}
}

// sortHosts weighs hosts and moves a random one of the best
// host_subset_size to the front, as Nova does. Only the best few are
// sorted up front (see weighRanking): enough for the claim, the subset
// and the alternates of a request that meets no conflict. Hosts of equal
// weight are in the instance's own order (tieSeedOf in weigher.go).
func (s *Scheduler) sortHosts(hosts []*HostState, spec *RequestSpec) *ranking {
	k := 2*s.cfg.MaxAttempts + s.cfg.HostSubsetSize + 8
	sorted := weighRanking(s.weighers, hosts, spec, k, tieSeedOf(spec.InstanceUUID))
	if sorted.len() == 0 {
		return sorted
	}
	if s.cfg.ShuffleBestSameWeighedHosts {
		top := 1
		for top < sorted.len() && sorted.at(top).weight == sorted.at(0).weight {
			top++
		}
		rand.Shuffle(top, func(a, b int) { sorted.w[a], sorted.w[b] = sorted.w[b], sorted.w[a] })
	}
	if k := min(s.cfg.HostSubsetSize, sorted.len()); k > 1 {
		j := rand.IntN(k)
		pick := sorted.at(j)
		copy(sorted.w[1:j+1], sorted.w[:j])
		sorted.w[0] = pick
	}
	return sorted
}

// hostStates joins placement's candidates with the host manager: one
// HostState per compute node (root provider) that has a known service.
func (s *Scheduler) hostStates(spec *RequestSpec, cands []placement.Candidate, aggs *aggregateSnapshot) []*HostState {
	var ignore map[string]bool
	if len(spec.IgnoreHosts) > 0 {
		ignore = make(map[string]bool, len(spec.IgnoreHosts))
		for _, h := range spec.IgnoreHosts {
			ignore[h] = true
		}
	}
	// Each candidate's root, and the distinct roots in answer order, so
	// the host manager is asked for all of them under one lock.
	rootIdx := make([]int, len(cands))
	pos := make(map[string]int, len(cands))
	roots := make([]string, 0, len(cands))
	for i, c := range cands {
		if c.Root == "" {
			rootIdx[i] = -1
			continue
		}
		j, ok := pos[c.Root]
		if !ok {
			j = len(roots)
			pos[c.Root] = j
			roots = append(roots, c.Root)
		}
		rootIdx[i] = j
	}
	views, oks := s.hosts.viewsForProviders(roots)
	// Every state and every state's candidate list come from one array
	// each: a request joins up to 1,000 hosts, and one allocation per
	// host was the join's largest cost after the views.
	perRoot := make([]int, len(roots)+1)
	for _, j := range rootIdx {
		if j >= 0 {
			perRoot[j+1]++
		}
	}
	for j := 1; j < len(perRoot); j++ {
		perRoot[j] += perRoot[j-1]
	}
	backing := make([]placement.Candidate, len(cands))
	fill := make([]int, len(roots))
	for i, c := range cands {
		if j := rootIdx[i]; j >= 0 {
			backing[perRoot[j]+fill[j]] = c
			fill[j]++
		}
	}
	all := make([]HostState, len(roots))
	order := make([]*HostState, 0, len(roots))
	for j, root := range roots {
		v := &views[j]
		if !oks[j] || ignore[v.Host] || !spec.RequestedDestination.admits(v.Host, v.Cell) {
			continue
		}
		first := backing[perRoot[j]]
		var res map[string]placement.ResourceSummary
		if first.RootSummary != nil {
			res = first.RootSummary.Resources
		}
		hostAggs := aggs.byHost[v.Host]
		hs := &all[j]
		*hs = HostState{
			Host: v.Host, Cell: v.Cell, ProviderUUID: root, Service: v.Service, Up: v.Up,
			Instances: v.Instances, NumInstances: len(v.Instances),
			FailedBuilds: v.Service.FailedBuilds,
			Resources:    res,
			Candidates:   backing[perRoot[j]:perRoot[j+1]:perRoot[j+1]],
			NumIOOps:     v.IOOps, Aggregates: hostAggs,
			AvailabilityZone: hostAvailabilityZone(hostAggs, s.cfg.DefaultAvailabilityZone),
			viewed:           true, trusted: v.Updated,
		}
		order = append(order, hs)
	}
	return order
}

func (s *Scheduler) selection(h *HostState, c placement.Candidate) etcdschema.Selection {
	b, _ := json.Marshal(c.AllocationRequest())
	sel := etcdschema.Selection{
		ComputeNodeUUID: h.ProviderUUID, ServiceHost: h.Host, Nodename: h.Host, Cell: h.Cell,
		AllocationRequest: string(b), AllocationRequestVersion: AllocationRequestVersion,
		AvailabilityZone: h.AvailabilityZone,
	}
	if len(h.Limits) > 0 {
		sel.Limits = make(map[string]any, len(h.Limits))
		for k, v := range h.Limits {
			sel.Limits[k] = v
		}
	}
	return sel
}

func orderedCounts(filters []Filter, counts map[string]int) []FilterCount {
	var out []FilterCount
	for _, f := range filters {
		if !slices.ContainsFunc(out, func(c FilterCount) bool { return c.Filter == f.Name() }) {
			out = append(out, FilterCount{Filter: f.Name(), Removed: counts[f.Name()]})
		}
	}
	return out
}

// revisionWaiter is the part of placement.Service that waits for its index
// to reach a revision (a test double need not have it).
type revisionWaiter interface {
	WaitForRevision(ctx context.Context, rev int64) error
}

// catchUpTimeout bounds how long a request waits for the views to reach
// its revision; past it, it is scheduled on what the views hold.
const catchUpTimeout = 5 * time.Second

// catchUp waits until placement's index and the host manager have applied
// rev. A view that cannot catch up in time (etcd unreachable) is logged and
// the request goes on with what it has, as it would have without waiting.
func (s *Scheduler) catchUp(ctx context.Context, rev int64, log hclog.Logger) {
	ctx, cancel := context.WithTimeout(ctx, catchUpTimeout)
	defer cancel()
	if w, ok := s.placement.(revisionWaiter); ok {
		if err := w.WaitForRevision(ctx, rev); err != nil {
			log.Warn("placement index behind the request", "revision", rev, "error", err)
		}
	}
	if s.hosts == nil {
		return
	}
	if err := s.hosts.WaitForRevision(ctx, rev); err != nil {
		log.Warn("host view behind the request", "revision", rev, "error", err)
	}
}
