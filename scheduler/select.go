package scheduler

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
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
	// It keeps nothing of writes once it returns: the scheduler reuses
	// the map for its next claim (joinScratch.claimWrites).
	PutAllocationsWithOptions(ctx context.Context, writes map[string]placement.AllocationWrite, opts placement.ClaimOptions) (int64, error)
	DeleteAllocationsGuarded(ctx context.Context, consumer string, guards ...clientv3.Cmp) error
}

// compactInto is placement.Service's CompactCandidates into arrays the
// caller lends, which a request keeps in its pooled scratch.
type compactInto interface {
	CompactCandidatesInto(ctx context.Context, q placement.CandidateQuery, buf *placement.CompactBuffers) ([]placement.Candidate, error)
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
	// EmptyPlacementFallback schedules over the host manager's hosts
	// with the legacy Core/Ram/Disk filters when Placement has no
	// provider at all (seed resource-providers-scheduler-db-filters);
	// FallbackProviderWait bounds how long such a request's claims wait
	// for a host's provider to appear (0: fallback.go's default).
	EmptyPlacementFallback bool
	FallbackProviderWait   time.Duration
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
// to max_placement_results of them. It runs these stages in order, each a
// method below:
//
//  1. query: the request as placement's query, narrowed by the aggregate
//     request filters and the requested destination;
//  2. group: the request's server group, read from etcd;
//  3. candidates: placement's allocation candidates for the query;
//  4. host states: the candidates joined with the host manager's view;
//  5. filters: the hosts that may take the first instance;
//  6. pick and claim: per instance, weigh, claim the best host that takes
//     it, and filter again for the next;
//  7. alternates: per instance, the next best hosts of its cell.
//
// The stages keep their scratch state in the request's Cycle. Once a
// claim is made, a failure aborts the cycle, which frees the claims and
// server group places.
func (s *Scheduler) selectOnce(ctx context.Context, spec *RequestSpec, maySample bool) (out [][]etcdschema.Selection, err error) {
	start := time.Now()
	if len(spec.InstanceUUIDs) == 0 {
		return nil, fmt.Errorf("select destinations: no instance uuids")
	}
	c := newCycle(spec)
	// The host states live in the cycle's pooled scratch: nothing of them
	// is read once this call has answered.
	defer c.release()
	c.log = requestLog{Logger: s.log, id: spec.RequestID}
	log := hclog.Logger(&c.log) // s.log.With("request_id", ...) when it logs (request_log.go)
	if spec.MinRevision > 0 {
		s.catchUp(ctx, spec.MinRevision, log)
	}
	q, aggs, err := s.query(c)
	if err != nil {
		return nil, err
	}
	c.query = q
	if err := s.loadRequestGroup(ctx, c); err != nil {
		return nil, err
	}
	sampled := false
	if n := s.sampleSize(c); maySample && n > 0 && n < q.Limit {
		q.Limit, q.RandomStart, sampled = n, true, true
		c.sampled = true
		defer func() {
			var nvh *NoValidHostError
			if errors.As(err, &nvh) {
				nvh.sampled = true
			}
		}()
	}
	cands, err := s.candidates(ctx, c, q, log)
	if err != nil {
		return nil, err
	}
	var hosts []*HostState
	if c.fallback.on {
		hosts, err = s.fallbackHosts(ctx, c, aggs, log)
	} else {
		hosts, err = s.hostStates(ctx, c, cands, aggs)
	}
	if err != nil {
		return nil, err
	}
	c.cands, c.hosts = cands, hosts
	filtered := s.filter(hosts, c, log)
	picks, last, passed, err := s.pickAndClaim(ctx, c, filtered, log)
	if err != nil {
		c.abort(ctx, s)
		return nil, err
	}
	out = s.alternates(c, picks, last)
	if log.IsDebug() { // its arguments are boxed even when not logged, per request
		log.Debug("selected destinations", "instances", len(picks), "candidates", len(hosts), "sampled", sampled,
			"passed_filters", passed, "elapsed", time.Since(start))
	}
	return out, nil
}

// query is stage 1: the request as placement's allocation candidates
// query (the flavor's resources and traits, compute_status_filter),
// narrowed by the aggregate request filters and the requested destination.
// It returns the aggregates it read, for the host states.
func (s *Scheduler) query(c *Cycle) (placement.CandidateQuery, *aggregateSnapshot, error) {
	spec := c.Spec
	q := BuildPlacementQuery(spec, s.cfg.MaxPlacementResults)
	// Nothing here or in the conductors reads an allocation request's
	// mappings (claims take its allocations): skip building them.
	q.OmitMappings = true
	aggs := s.hosts.aggregates()
	if err := applyAggregateRequestFilters(&q, spec, aggs.all, s.cfg); err != nil {
		return q, nil, &NoValidHostError{Reason: err.Error() + "."}
	}
	if err := s.applyRequestedDestination(&q, spec); err != nil {
		return q, nil, err
	}
	return q, aggs, nil
}

// loadRequestGroup is stage 2: the server group named by the group hint,
// read into the cycle (Nova's setup_instance_group). A group that does not
// exist, or whose hard policy has no enabled filter, is a NoValidHost.
func (s *Scheduler) loadRequestGroup(ctx context.Context, c *Cycle) error {
	name := c.Spec.Hints.Group
	if name == "" {
		return nil
	}
	g, err := s.loadGroup(ctx, name)
	if errors.Is(err, ErrGroupNotFound) {
		return &NoValidHostError{Reason: fmt.Sprintf("Server group %s does not exist.", name)}
	}
	if err != nil {
		return fmt.Errorf("select destinations: %w", err)
	}
	if err := s.checkGroupPolicy(g); err != nil {
		return &NoValidHostError{Reason: err.Error() + "."}
	}
	c.Group = g
	return nil
}

// candidates is stage 3: placement's allocation candidates for q, from its
// in-memory index. None is a NoValidHost, which says why (explain.go).
func (s *Scheduler) candidates(ctx context.Context, c *Cycle, q placement.CandidateQuery, log hclog.Logger) ([]placement.Candidate, error) {
	var cands []placement.Candidate
	var err error
	if p, ok := s.placement.(compactInto); ok {
		// In the cycle's scratch: nothing reads the candidates once the
		// request has answered (scratch.go).
		cands, err = p.CompactCandidatesInto(ctx, q, &c.joinScratch().compact)
	} else {
		cands, err = s.placement.CompactCandidates(ctx, q)
	}
	if err != nil {
		return nil, fmt.Errorf("select destinations: allocation candidates: %w", err)
	}
	if len(cands) == 0 {
		if s.placementEmpty(c, log) {
			return nil, nil // fallback.go schedules it over the host manager's hosts
		}
		if host := c.Spec.RequestedDestination.host(); host != "" {
			if why := s.whyNoCandidate(host, c.sampled); why != "" {
				c.rejectRequested(host, "Placement", why)
			}
		}
		return nil, s.failNoValidHost(ctx, c, nil, "Placement found no resource provider with room for the flavor.", log)
	}
	return cands, nil
}

// whyNoCandidate is the exact reason placement offered nothing on a
// requested host, when it is known without an explanation ("" when the
// explanation will say it). Placement's query forbids
// COMPUTE_STATUS_DISABLED, so a disabled host is never a candidate
// whatever its room; saying "no room" for it sent operators looking at
// the wrong thing. A host that is down but has room is a candidate, and
// ComputeFilter names it.
func (s *Scheduler) whyNoCandidate(host string, sampled bool) string {
	if s.hosts != nil {
		if v, ok := s.hosts.view(host); ok && v.Service.Disabled {
			if v.Service.DisabledReason != "" {
				return "compute service is disabled (" + v.Service.DisabledReason + "), so its provider has " + placement.TraitComputeStatusDisabled
			}
			return "compute service is disabled, so its provider has " + placement.TraitComputeStatusDisabled
		}
	}
	if sampled {
		return "no allocation candidate with room for the flavor"
	}
	return ""
}

// hostStates is stage 4: the candidates joined with the host manager's
// view (joinHosts), and the instances of hosts whose cache is not trusted
// read from the cells when a filter or weigher needs them.
func (s *Scheduler) hostStates(ctx context.Context, c *Cycle, cands []placement.Candidate, aggs *aggregateSnapshot) ([]*HostState, error) {
	hosts := s.joinHosts(c, cands, aggs)
	if err := s.fillUntrustedInstances(ctx, c, hosts); err != nil {
		return nil, fmt.Errorf("select destinations: %w", err)
	}
	return hosts, nil
}

// Stage 5, the filters for the first instance, is filterFirst (limit.go).

// pick is one instance's host and the allocation request claimed on it.
type pick struct {
	host *HostState
	req  placement.Candidate
}

// pickAndClaim is stage 6: for each instance in turn, filter the hosts
// left (the first instance's were filtered by stage 5), weigh them and
// claim the first that takes the instance (pickOne), then consume the
// claim from the host so the next pick sees it. It returns the picks, the
// last pick's ranking (the alternates come from it) and how many hosts
// passed the filters last. Not placing every instance is a NoValidHost;
// the caller aborts the cycle on any error.
func (s *Scheduler) pickAndClaim(ctx context.Context, c *Cycle, filtered []*HostState, log hclog.Logger) ([]pick, *ranking, int, error) {
	n := len(c.Spec.InstanceUUIDs)
	picks := make([]pick, 0, n)
	var last *ranking
	for i := range c.Spec.InstanceUUIDs {
		c.at(i)
		if i > 0 {
			filtered = s.filter(filtered, c, log)
		}
		var p pick
		var err error
		p, last, filtered, err = s.pickOne(ctx, c, filtered, log)
		if err != nil {
			return nil, nil, 0, err
		}
		if p.host == nil {
			return nil, nil, 0, s.failNoValidHost(ctx, c, filtered,
				fmt.Sprintf("There are not enough hosts available (placed %d of %d).", i, n), log)
		}
		// Only a later pick reads what a pick consumed: the last pick's
		// host is left as it is (copying its resources and instance maps
		// was the single-server request's largest garbage after the claim).
		if i < n-1 {
			p.host.consume(p.req)
			p.host.addInstance(c.Instance, c.Spec.Flavor)
		}
		picks = append(picks, p)
	}
	return picks, last, len(filtered), nil
}

// pickOne weighs the filtered hosts and claims the first that takes the
// current instance (claimFirst). A server-group guard lost to another
// scheduler means our view of the group is old: re-read it, filter again
// and walk again, at most maxGroupReloads times. No host taking it is a
// zero pick, not an error. It returns the hosts as filtered last.
func (s *Scheduler) pickOne(ctx context.Context, c *Cycle, filtered []*HostState, log hclog.Logger) (pick, *ranking, []*HostState, error) {
	for reload := 0; ; reload++ {
		sorted := s.sortHosts(filtered, c)
		if log.IsDebug() {
			log.Debug("weighed hosts", "instance", c.Instance, "weighed", weighedHosts(sorted))
		}
		p, rev, guardLost, err := s.claimFirst(ctx, sorted, c)
		if err != nil {
			return pick{}, sorted, filtered, err
		}
		if p.host != nil {
			c.claimed(p.host.Host, rev)
			return p, sorted, filtered, nil
		}
		if !guardLost || reload >= maxGroupReloads {
			return pick{}, sorted, filtered, nil
		}
		if err := s.reloadGroup(ctx, c); err != nil {
			return pick{}, sorted, filtered, fmt.Errorf("select destinations: %w", err)
		}
		filtered = s.filter(filtered, c, log)
		log.Debug("server group changed under the request; filtered again", "instance", c.Instance,
			"group", c.Spec.Hints.Group, "hosts", len(filtered))
	}
}

// reloadGroup reads the request's server group again, with this request's
// own picks so far (committed) placed in it.
func (s *Scheduler) reloadGroup(ctx context.Context, c *Cycle) error {
	g, err := s.loadGroup(ctx, c.Spec.Hints.Group)
	if err != nil {
		return err
	}
	for _, u := range c.Spec.InstanceUUIDs[:c.Index] {
		g.place(c.placed[u], u)
	}
	c.Group = g
	return nil
}

// alternates is stage 7: each instance's Selection on its claimed host,
// followed by up to max_attempts-1 unclaimed alternates from the last
// ranking, all of the pick's cell: first the hosts no instance of the
// request took (Nova's alternates), then the hosts the request's other
// instances took. Nova stops at the first kind, so a request that spans
// every host (12 servers on 6 hosts) gets no alternates at all and each
// failed build is an ERROR; a host already given to a sibling may well
// have room for one more, and the retry's claim checks that room (and the
// server group's policy) anyway. A hard anti-affinity group gets only the
// first kind: a sibling's host is the one place its policy forbids.
func (s *Scheduler) alternates(c *Cycle, picks []pick, last *ranking) [][]etcdschema.Selection {
	taken := make(map[string]bool, len(picks))
	for _, p := range picks {
		taken[p.host.Host] = true
	}
	siblings := c.Group == nil || c.Group.Policy() != etcdschema.PolicyAntiAffinity
	out := make([][]etcdschema.Selection, len(picks))
	// Each instance's list in a window of one array, each as long as it
	// can grow (max_attempts, or fewer when fewer hosts ranked): grown
	// by append from nil, a list of three was three allocations of 1, 2
	// and 4 Selections.
	per := min(s.cfg.MaxAttempts, 1+last.len())
	backing := make([]etcdschema.Selection, 0, len(picks)*per)
	for i, p := range picks {
		out[i] = append(backing[i*per:i*per:(i+1)*per], s.selection(p.host, p.req))
		out[i] = s.appendAlternates(out[i], p, last, func(h string) bool { return !taken[h] })
		if siblings {
			out[i] = s.appendAlternates(out[i], p, last, func(h string) bool { return taken[h] && h != p.host.Host })
		}
	}
	return out
}

// appendAlternates adds to sels, in ranking order and up to max_attempts
// in all, the hosts of last in p's cell that want accepts.
func (s *Scheduler) appendAlternates(sels []etcdschema.Selection, p pick, last *ranking, want func(host string) bool) []etcdschema.Selection {
	for k := 0; k < last.len() && len(sels) < s.cfg.MaxAttempts; k++ {
		alt := last.at(k).host
		if alt.Cell != p.host.Cell || !want(alt.Host) || len(alt.Candidates) == 0 {
			continue
		}
		sels = append(sels, s.selection(alt, alt.Candidates[0]))
	}
	return sels
}

// sortHosts weighs hosts and moves a random one of the best
// host_subset_size to the front, as Nova does. Only the best few are
// sorted up front (see weighRanking): enough for the claim, the subset
// and the alternates of a request that meets no conflict. Hosts of equal
// weight are in the instance's own order (tieSeedOf in weigher.go).
func (s *Scheduler) sortHosts(hosts []*HostState, c *Cycle) *ranking {
	k := 2*s.cfg.MaxAttempts + s.cfg.HostSubsetSize + 8
	sorted := weighRanking(s.weighers, hosts, c, k, tieSeedOf(c.Instance), &c.joinScratch().rank)
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

func (s *Scheduler) selection(h *HostState, c placement.Candidate) etcdschema.Selection {
	sel := etcdschema.Selection{
		ComputeNodeUUID: h.ProviderUUID, ServiceHost: h.Host, Nodename: h.Host, Cell: h.Cell,
		AllocationRequest: allocationRequestJSON(c), AllocationRequestVersion: AllocationRequestVersion,
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
