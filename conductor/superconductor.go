package conductor

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"sort"
	"time"

	"github.com/hashicorp/go-hclog"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/etcdschema/records"
	"github.com/berth-project/berth/internal/metrics"
	"github.com/berth-project/berth/internal/rawtxn"
	"github.com/berth-project/berth/internal/testhook"
	"github.com/berth-project/berth/internal/txnbatch"
	"github.com/berth-project/berth/internal/workqueue"
	"github.com/berth-project/berth/placement"
	"github.com/berth-project/berth/scheduler"
)

// Schedulers lists the schedulers a superconductor may ask, preferred
// first (scheduler.Pool: the in-process one, then those found under
// /members/scheduler/).
type Schedulers interface {
	Targets() []scheduler.Target
}

// Allocations is what conductors need of placement.
type Allocations interface {
	PutAllocations(ctx context.Context, consumer string, w placement.AllocationWrite) error
	DeleteAllocations(ctx context.Context, consumer string) error
}

// SuperconductorConfig configures a superconductor.
type SuperconductorConfig struct {
	Client     *clientv3.Client
	Keys       etcdschema.Keys
	Schedulers Schedulers
	Placement  Allocations
	Holder     string
	Workers    int
	LeaseTTL   time.Duration
	// SelectTimeout bounds one scheduler's answer; past it the next
	// scheduler is asked.
	SelectTimeout time.Duration
	MaxAttempts   int
	// RankGrace and HolderIdleAfter tune how build requests are spread
	// over the superconductors (workqueue.Config.Grace and IdleAfter;
	// zero: the defaults).
	RankGrace       time.Duration
	HolderIdleAfter time.Duration
	StealAfter      time.Duration // workqueue.Config.StealAfter; 0: never
	Log             hclog.Logger
	Metrics         *metrics.Metrics // nil: lease attempts are not counted
}

// Superconductor turns BuildRequests into instances in cells.
type Superconductor struct {
	cfg   SuperconductorConfig
	queue *workqueue.Queue
	// moves schedules MoveRequests (resizes, cold migrations; moves.go).
	moves *workqueue.Queue
	// handOffs sends the single-instance hand-offs of concurrent
	// requests as one etcd request when several are ready together
	// (package txnbatch): each is one work item's own keys, so they
	// commute, and each still commits or fails on its own.
	handOffs *txnbatch.Batcher
	// decoded holds the BuildRequests the Defer hook decoded, for
	// process to take instead of decoding them again.
	decoded decodedRequests
	log     hclog.Logger
}

// NewSuperconductor builds one; Run starts it.
func NewSuperconductor(cfg SuperconductorConfig) *Superconductor {
	s := &Superconductor{cfg: cfg, log: cfg.Log, handOffs: txnbatch.New(cfg.Client)}
	s.queue = workqueue.New(workqueue.Config{
		Client: cfg.Client, ItemPrefix: cfg.Keys.BuildRequests(), LeasePrefix: cfg.Keys.BuildRequestLeases(),
		LeaseKey: cfg.Keys.BuildRequestLease, Holder: cfg.Holder, LeaseTTL: cfg.LeaseTTL,
		Workers: cfg.Workers, Process: s.process, Defer: s.leadsElsewhere, Log: cfg.Log,
		HolderPrefix: cfg.Keys.BuildRequestHolders(), HolderKey: cfg.Keys.BuildRequestHolder,
		Grace: cfg.RankGrace, IdleAfter: cfg.HolderIdleAfter, StealAfter: cfg.StealAfter,
		Name: metrics.QueueBuildRequests, Metrics: cfg.Metrics,
		// Whether the instance already holds a claim, read as we lease it:
		// a claim can only be left by an earlier holder, so this read is
		// as good as one made after the lease, and costs no round trip.
		AlsoRead: func(id string) []string { return []string{cfg.Keys.Consumer(id)} },
		// A BuildRequest is put once (W1) and then only deleted (a user's
		// delete, W4, cell0): the lease compares its mod revision with
		// the watch's instead of reading it back.
		WrittenOnce: true,
		// Under load many workers lease requests at once: their W2s go as
		// one etcd request (each a nested transaction of its own), as
		// their hand-offs do (handOffs).
		BatchLeases: true,
	})
	s.moves = s.newMoveQueue()
	return s
}

// leadsElsewhere defers a BuildRequest while a lower-index sibling of the
// same reservation exists: that sibling's holder gathers the whole request
// and schedules it as one, as Nova's multi-create does (all or nothing,
// each pick seeing the previous ones). The requests it decodes are kept
// for process (decodedRequests).
func (s *Superconductor) leadsElsewhere(it workqueue.Item, all iter.Seq[workqueue.Item]) bool {
	br, err := s.decoded.get(it)
	if err != nil || br.Count < 2 || br.Index == 0 {
		return false
	}
	for o := range all {
		if o.ID == it.ID {
			continue
		}
		sib, err := s.decoded.get(o)
		if err == nil && sib.ReservationID == br.ReservationID && sib.Index < br.Index {
			return true
		}
	}
	return false
}

// Run works BuildRequests and MoveRequests until ctx ends (or either
// queue fails, which stops the other).
func (s *Superconductor) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	moved := make(chan error, 1)
	go func() {
		err := s.moves.Run(ctx)
		cancel()
		moved <- err
	}()
	err := s.queue.Run(ctx)
	cancel()
	if merr := <-moved; err == nil {
		err = merr
	}
	return err
}

// WaitSynced blocks until both queues have loaded.
func (s *Superconductor) WaitSynced(ctx context.Context) error {
	if err := s.queue.WaitSynced(ctx); err != nil {
		return err
	}
	return s.moves.WaitSynced(ctx)
}

type leasedRequest struct {
	item workqueue.Item
	br   etcdschema.BuildRequest
}

func (s *Superconductor) process(ctx context.Context, it workqueue.Item) error {
	br, err := s.decoded.take(it)
	if err != nil {
		// An unreadable request can never be built: bury it so the user sees
		// why instead of it sitting in BUILD forever.
		return s.bury(ctx, []leasedRequest{{item: it, br: etcdschema.BuildRequest{InstanceUUID: it.ID}}},
			fmt.Sprintf("Build request could not be read: %v", err), "")
	}
	group := []leasedRequest{{item: it, br: br}}
	if br.Count > 1 {
		group = append(group, s.gatherSiblings(ctx, br)...)
		sort.Slice(group, func(a, b int) bool { return group[a].br.Index < group[b].br.Index })
	}
	if err := s.schedule(ctx, group); err != nil {
		// Hand back the siblings too; the worker releases the first item.
		for _, g := range group[1:] {
			s.queue.Release(context.WithoutCancel(ctx), g.item)
		}
		return err
	}
	for _, g := range group[1:] {
		s.queue.Done(g.item)
	}
	return nil
}

// gatherSiblings leases the other pending BuildRequests of the same
// reservation, so a multi-instance request is scheduled as one.
func (s *Superconductor) gatherSiblings(ctx context.Context, br etcdschema.BuildRequest) []leasedRequest {
	var ids []string
	for _, p := range s.queue.Pending() {
		if p.ID == br.InstanceUUID {
			continue
		}
		sib, err := s.decoded.get(p)
		if err != nil || sib.ReservationID != br.ReservationID {
			continue
		}
		ids = append(ids, p.ID)
	}
	// One transaction leases them all (each on its own terms): a
	// 64-server request costs one lease write, not 63.
	got, err := s.queue.TryAcquireMany(ctx, ids)
	if err != nil {
		s.log.Warn("could not lease every sibling; scheduling those leased", "reservation", br.ReservationID, "error", err)
	}
	var out []leasedRequest
	for _, it := range got {
		sib, err := s.decoded.take(it)
		if err != nil {
			s.queue.Release(ctx, it)
			continue
		}
		out = append(out, leasedRequest{item: it, br: sib})
	}
	return out
}

func (s *Superconductor) schedule(ctx context.Context, group []leasedRequest) error {
	first := group[0].br
	spec := requestSpec(&first)
	for _, g := range group {
		spec.InstanceUUIDs = append(spec.InstanceUUIDs, g.br.InstanceUUID)
		// Read-your-writes: the scheduler sees every host that
		// registered before the request was made.
		spec.MinRevision = max(spec.MinRevision, g.item.ModRev)
	}
	// A superconductor that died after claiming but before the hand-off
	// left a claim behind; we hold the requests now, so it is stale. The
	// lease transaction read each instance's consumer key: only those
	// that exist are freed.
	var stale []string
	for _, g := range group {
		if _, ok := g.item.Extra[s.cfg.Keys.Consumer(g.br.InstanceUUID)]; ok || g.item.Extra == nil {
			stale = append(stale, g.br.InstanceUUID)
		}
	}
	if err := s.freeClaims(ctx, stale); err != nil {
		return err
	}
	sels, err := s.selectDestinations(ctx, spec)
	var nvh *scheduler.NoValidHostError
	if errors.As(err, &nvh) {
		// Logged with the request's ids here, where they are used: a
		// logger made With them for every request was 0.75 kB a server.
		s.log.Info("no valid host, burying in cell0", "request_id", first.RequestID, "reservation", first.ReservationID,
			"instances", len(group), "reason", nvh.Error())
		if err := s.bury(ctx, group, nvh.Error(), nvh.Details()); err != nil {
			return err
		}
		s.cfg.Metrics.Scheduled(metrics.ScheduledNoValidHost, len(group))
		return nil
	}
	if err != nil {
		s.cfg.Metrics.Scheduled(metrics.ScheduledError, len(group))
		return fmt.Errorf("select destinations for %d instance(s): %w", len(group), err)
	}
	return s.handOffAll(ctx, group, sels)
}

// maxHandOffsPerTxn keeps a batched hand-off within etcd's default of 128
// operations per transaction level (each instance is one sub-transaction).
const maxHandOffsPerTxn = 64

// handOffAll hands off every instance of a request: a single one in its
// own transaction, several in one transaction with a sub-transaction each
// (each with its own compares, so each succeeds or fails alone, exactly
// as separate hand-offs would): a multi-create's hand-offs cost one etcd
// write, not one per instance.
func (s *Superconductor) handOffAll(ctx context.Context, group []leasedRequest, sels [][]etcdschema.Selection) error {
	if len(group) == 1 {
		return s.handOff(ctx, group[0], sels[0])
	}
	var firstErr error
	note := func(err error) {
		if err != nil && firstErr == nil {
			firstErr = err
		}
	}
	for start := 0; start < len(group); start += maxHandOffsPerTxn {
		end := min(start+maxHandOffsPerTxn, len(group))
		subs := make([]*pb.RequestOp, 0, end-start)
		for i := start; i < end; i++ {
			cmps, ops, err := s.handOffOps(ctx, group[i], sels[i])
			if err != nil {
				return err
			}
			subs = append(subs, rawtxn.Nested(&pb.TxnRequest{Compare: cmps, Success: ops}))
		}
		resp, err := rawtxn.Commit(ctx, s.cfg.Client.KV, &pb.TxnRequest{Success: subs})
		if err != nil {
			return fmt.Errorf("hand off %d instances: %w", end-start, err)
		}
		for i := start; i < end; i++ {
			if sub := resp.Responses[i-start].GetResponseTxn(); sub != nil && sub.Succeeded {
				s.handedOff(group[i], sels[i])
				continue
			}
			note(s.lostHandOff(ctx, group[i]))
		}
	}
	return firstErr
}

// selectDestinations asks the schedulers in turn until one answers with
// Selections or NoValidHost. A scheduler that failed or timed out may have
// claimed for some instances before it did: those claims are freed before
// the next scheduler is asked (and after the last), so none is orphaned.
// A claim it lands after that free makes the next scheduler's claim for
// that instance fail (a new consumer must not exist yet), which fails that
// attempt too; the free before the following attempt catches it. Its own
// rollback frees only the claims it wrote (guarded by revision), never the
// next scheduler's.
func (s *Superconductor) selectDestinations(ctx context.Context, spec *scheduler.RequestSpec) ([][]etcdschema.Selection, error) {
	targets := s.cfg.Schedulers.Targets()
	if len(targets) == 0 {
		return nil, errors.New("no scheduler is registered (none in this process, none under /members/scheduler/)")
	}
	var errs []error
	for i, t := range targets {
		if i > 0 {
			if err := s.freeClaims(ctx, spec.InstanceUUIDs); err != nil {
				return nil, err
			}
		}
		timeout := s.cfg.SelectTimeout
		if timeout <= 0 {
			timeout = 30 * time.Second
		}
		cctx, cancel := context.WithTimeout(ctx, timeout)
		sels, err := t.SelectDestinations(cctx, spec)
		cancel()
		var nvh *scheduler.NoValidHostError
		if err == nil && len(sels) != len(spec.InstanceUUIDs) {
			err = fmt.Errorf("answered %d selection lists for %d instances", len(sels), len(spec.InstanceUUIDs))
		}
		if err == nil || errors.As(err, &nvh) {
			return sels, err
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		s.log.Warn("scheduler failed, asking the next", "request_id", spec.RequestID, "scheduler", t.Name, "error", err,
			"left", len(targets)-i-1)
		errs = append(errs, fmt.Errorf("%s: %w", t.Name, err))
	}
	if err := s.freeClaims(ctx, spec.InstanceUUIDs); err != nil {
		errs = append(errs, err)
	}
	return nil, fmt.Errorf("every scheduler failed: %w", errors.Join(errs...))
}

// freeClaims frees whatever the instances hold. We hold their
// BuildRequests, so any claim they have is one no hand-off uses.
func (s *Superconductor) freeClaims(ctx context.Context, uuids []string) error {
	for _, u := range uuids {
		if err := s.cfg.Placement.DeleteAllocations(ctx, u); err != nil && !errors.Is(err, placement.ErrNotFound) {
			return fmt.Errorf("free stale claim of %s: %w", u, err)
		}
	}
	return nil
}

// handOff creates the instance in its cell, casts the build (with the
// alternates) to the host and deletes the BuildRequest: one transaction, so
// either all of it happened or none did and another holder starts over.
// Under load it rides in one etcd request with other requests' hand-offs
// (s.handOffs), as a nested transaction of its own.
func (s *Superconductor) handOff(ctx context.Context, g leasedRequest, sels []etcdschema.Selection) error {
	cmps, ops, err := s.handOffOps(ctx, g, sels)
	if err != nil {
		return err
	}
	out, err := s.handOffs.Commit(ctx, cmps, ops)
	if err != nil {
		return fmt.Errorf("hand off %s to %s: %w", g.br.InstanceUUID, sels[0].ServiceHost, err)
	}
	if !out.Succeeded {
		return s.lostHandOff(ctx, g)
	}
	s.handedOff(g, sels)
	return nil
}

// handOffOps are one instance's hand-off: the compares (the lease is still
// ours, the mapping present) and the writes.
// One per server (W4), so they are built as etcd's messages (package
// rawtxn), without clientv3's per-compare cloning.
func (s *Superconductor) handOffOps(ctx context.Context, g leasedRequest, sels []etcdschema.Selection) ([]*pb.Compare, []*pb.RequestOp, error) {
	k := s.cfg.Keys
	br := g.br
	chosen := sels[0]
	now := time.Now().UTC()
	inst := &etcdschema.Instance{
		UUID: br.InstanceUUID, Name: br.Name, Status: etcdschema.StatusBuild,
		TaskState: etcdschema.TaskSpawning, Host: chosen.ServiceHost, Node: chosen.Nodename,
		Cell: chosen.Cell, Flavor: br.Flavor, ProjectID: br.ProjectID, UserID: br.UserID,
		AvailabilityZone: chosen.AvailabilityZone, Attempts: 1, CreatedAt: br.CreatedAt, UpdatedAt: now,
	}
	br.CarryTo(inst)
	mapping := &etcdschema.InstanceMapping{InstanceUUID: br.InstanceUUID, Cell: chosen.Cell,
		ProjectID: br.ProjectID, CreatedAt: br.CreatedAt}
	alts := &etcdschema.Alternates{InstanceUUID: br.InstanceUUID, Cell: chosen.Cell,
		MaxAttempts: s.cfg.MaxAttempts, Remaining: sels[1:],
		Attempts: []etcdschema.Attempt{{Host: chosen.ServiceHost, At: now}}, Group: br.Hints.Group}
	// The cast carries the instance as written here (the agent need not
	// read it back) and the alternates (no key of their own to put now
	// and delete at ACTIVE): docs/flows.md, W4. EncodeCast writes each
	// record once, the instance's own value a substring of the cast.
	build := &etcdschema.Build{Op: etcdschema.OpBuild, InstanceUUID: br.InstanceUUID, Name: br.Name,
		Cell: chosen.Cell, Flavor: br.Flavor, ProjectID: br.ProjectID, UserID: br.UserID,
		Attempt: 1, RequestID: br.RequestID, CastAt: now, Image: br.Image}
	cast, instJSON, err := etcdschema.EncodeCast(build, inst, alts)
	if err != nil {
		return nil, nil, fmt.Errorf("hand off %s: %w", br.InstanceUUID, err)
	}
	held, err := s.queue.StillHeldCompare(ctx, g.item)
	if err != nil {
		return nil, nil, err
	}
	mappingKey := k.InstanceMapping(br.InstanceUUID)
	ops := []*pb.RequestOp{
		rawtxn.PutBytes(k.CellInstance(chosen.Cell, br.InstanceUUID), instJSON),
		rawtxn.PutBytes(mappingKey, etcdschema.MustEncodeBytes(mapping)),
		rawtxn.PutBytes(k.Build(chosen.ServiceHost, br.InstanceUUID), cast),
	}
	ops = append(ops, workqueue.FinishRequests(g.item)...)
	testhook.Pause(ctx, "superconductor.before-handoff", br.InstanceUUID)
	// No compare of the BuildRequest's mod revision: it is put once (W1)
	// and then only deleted, by a writer holding its lease key (a
	// hand-off, a bury: held fails) or with its mapping (a user's delete:
	// the mapping compare fails). TestHandOffGuards.
	cmps := []*pb.Compare{held, rawtxn.Present(mappingKey)}
	return cmps, ops, nil
}

func (s *Superconductor) handedOff(g leasedRequest, sels []etcdschema.Selection) {
	s.cfg.Metrics.Scheduled(metrics.ScheduledHandedOff, 1)
	if s.log.IsDebug() { // its arguments are boxed even when not logged, per server
		s.log.Debug("handed off", "instance", g.br.InstanceUUID, "host", sels[0].ServiceHost,
			"cell", sels[0].Cell, "alternates", len(sels)-1, "request_id", g.br.RequestID)
	}
}

// lostHandOff runs when a hand-off's compares failed.
func (s *Superconductor) lostHandOff(ctx context.Context, g leasedRequest) error {
	// Our lease key (if still ours) would otherwise outlive the request.
	defer s.queue.Release(context.WithoutCancel(ctx), g.item)
	return s.abandon(ctx, g.br.InstanceUUID)
}

// abandon runs when a hand-off's preconditions failed. If the user deleted
// the request meanwhile (its mapping is gone) our claim is an orphan and is
// freed; otherwise another holder has the request and owns the claim.
func (s *Superconductor) abandon(ctx context.Context, uuid string) error {
	resp, err := s.cfg.Client.Get(ctx, s.cfg.Keys.InstanceMapping(uuid))
	if err != nil {
		return fmt.Errorf("check mapping of %s: %w", uuid, err)
	}
	if len(resp.Kvs) > 0 {
		s.log.Warn("lost the lease on a build request mid hand-off; leaving it to its new holder", "instance", uuid)
		return nil
	}
	s.log.Info("build request deleted while scheduling, freeing its claim", "instance", uuid)
	if err := s.cfg.Placement.DeleteAllocations(ctx, uuid); err != nil && !errors.Is(err, placement.ErrNotFound) {
		return fmt.Errorf("free claim of deleted request %s: %w", uuid, err)
	}
	return nil
}

// bury records instances that could not be scheduled in cell0, in ERROR
// with the reason (the fault's message) and details, as Nova's
// _bury_in_cell0 does.
func (s *Superconductor) bury(ctx context.Context, group []leasedRequest, reason, details string) error {
	k := s.cfg.Keys
	now := time.Now().UTC()
	for _, g := range group {
		held, err := s.queue.StillHeld(ctx, g.item)
		if err != nil {
			return err
		}
		cmps, ops := records.BuryInCell0WithDetails(k, &g.br, reason, details, now)
		// Only while we hold it; and if the user deleted it meanwhile (no
		// mapping), there is nothing to record, just the item to finish.
		_, err = s.cfg.Client.Txn(ctx).If(held).Then(clientv3.OpTxn(
			cmps, append(ops, workqueue.FinishOps(g.item)...), workqueue.FinishOps(g.item))).Commit()
		if err != nil {
			return fmt.Errorf("bury %s in cell0: %w", g.br.InstanceUUID, err)
		}
	}
	return nil
}

// requestSpec is the RequestSpec of br's reservation, without its
// instances: a forced host or node (availability_zone "zone:host[:node]")
// is Nova's force_hosts / force_nodes, placed without the filters; a
// requested one (host / hypervisor_hostname, 2.74) is
// requested_destination, which goes through them.
func requestSpec(br *etcdschema.BuildRequest) *scheduler.RequestSpec {
	spec := &scheduler.RequestSpec{
		Flavor: br.Flavor, ProjectID: br.ProjectID, UserID: br.UserID,
		AvailabilityZone: br.AvailabilityZone, Hints: br.Hints, RequestID: br.RequestID,
	}
	switch {
	case br.Forced:
		if br.Host != "" {
			spec.ForceHosts = []string{br.Host}
		}
		if br.Node != "" {
			spec.ForceNodes = []string{br.Node}
		}
	case br.Host != "" || br.Node != "":
		spec.RequestedDestination = &scheduler.Destination{Host: br.Host, Node: br.Node}
	}
	return spec
}
