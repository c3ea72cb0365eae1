package conductor

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/etcdschema/records"
	"github.com/berth-project/berth/internal/testhook"
	"github.com/berth-project/berth/internal/workqueue"
	"github.com/berth-project/berth/placement"
	"github.com/berth-project/berth/scheduler"
)

// The superconductor's part of a live migration (Nova's
// LiveMigrationTask._find_destination; seed return-alternate-hosts puts
// its retry here, over the Selections' alternates). For a MoveRequest of
// kind live-migration whose migration is accepted it:
//
//  1. hands the source's allocation to the migration's consumer (once:
//     a consumer that already holds it was handed it by an earlier try,
//     and whatever the instance's consumer holds then is a stale claim
//     of a destination that failed, freed);
//  2. picks the next destination: on the first try the scheduler's
//     Selection (the source ignored, the server group kept, a requested
//     host pinned or, with force, forced), its alternates kept on the
//     migration; on a later try (the destination's pre-check failed and
//     its agent re-filed the MoveRequest, recording the reason on the
//     migration's last attempt) the next alternate, claimed in the
//     group's guard as a build's retry claims, and once they are used
//     up the scheduler again without every host tried (Nova's loop),
//     all bounded by max_attempts;
//  3. in one transaction, guarded by the request still being ours and
//     the instance and migration unchanged, records the destination
//     (migration preparing) and casts the pre-check to its agent.
//
// With no destination left the source's allocation goes back to the
// instance, the migration ends in error with every attempt's reason and
// the server stays ACTIVE on its source, as Nova's conductor leaves it.
// Every step reads what etcd holds, so a superconductor killed anywhere
// in between leaves the request to the next holder, which redoes it.

func init() {
	registerMoveKind(etcdschema.MigrationTypeLiveMigration, (*Superconductor).processLiveMigration)
}

// liveAllocator is what a live migration needs of placement
// (placement.Service has it).
type liveAllocator interface {
	Allocations
	MoveAllocator
	GetAllocations(ctx context.Context, consumer string) (*etcdschema.Consumer, error)
}

func (s *Superconductor) processLiveMigration(ctx context.Context, it workqueue.Item, req *etcdschema.MoveRequest) error {
	log := s.log.With("instance", req.InstanceUUID, "migration", req.MigrationUUID, "request_id", req.RequestID)
	pl, ok := s.cfg.Placement.(liveAllocator)
	if !ok {
		return fmt.Errorf("live migration of %s: placement cannot move allocations", req.InstanceUUID)
	}
	rd, err := s.readMove(ctx, req)
	if err != nil {
		return err
	}
	if rd.instGone || rd.inst.MigrationUUID != req.MigrationUUID || rd.mig.UUID == "" ||
		rd.mig.Status != etcdschema.MigrationAccepted {
		if rd.instGone {
			s.freeMoveClaims(ctx, req.InstanceUUID, req.MigrationUUID)
		}
		log.Info("live migration request no longer current, dropping it")
		return s.finishMove(ctx, it, nil)
	}
	if rd.mig.AbortRequestID != "" {
		return s.cancelLiveMigration(ctx, it, rd, pl)
	}
	if err := s.holdSource(ctx, pl, rd); err != nil {
		return err
	}
	mig := &rd.mig
	if mig.MaxAttempts == 0 {
		mig.MaxAttempts = max(s.cfg.MaxAttempts, 1)
	}
	sel, reason, err := s.nextLiveDestination(ctx, log, it, rd)
	if err != nil {
		return err
	}
	if sel == nil {
		return s.failLiveMigration(ctx, it, rd, pl, reason)
	}
	return s.handOffLive(ctx, it, rd, *sel)
}

// holdSource makes the migration's consumer hold the source's
// allocation and the instance's consumer hold nothing, for every move
// kind that hands the source to its migration (cold moves, live
// migration, evacuation). When the migration already holds it, an
// earlier holder of the request moved it and may have died after its
// scheduler claimed a destination under the instance: that claim is
// stale and freed. Moving the instance's allocation again would have
// overwritten the source's with it.
func (s *Superconductor) holdSource(ctx context.Context, pl liveAllocator, rd *moveRead) error {
	held, err := pl.GetAllocations(ctx, rd.mig.UUID)
	if err != nil && !errors.Is(err, placement.ErrNotFound) {
		return fmt.Errorf("read the allocation of migration %s: %w", rd.mig.UUID, err)
	}
	if err == nil && len(held.Allocations) > 0 {
		if err := pl.DeleteAllocations(ctx, rd.inst.UUID); err != nil && !errors.Is(err, placement.ErrNotFound) {
			return fmt.Errorf("free stale live migration claim of %s: %w", rd.inst.UUID, err)
		}
		return nil
	}
	if _, err := pl.MoveAllocations(ctx, rd.inst.UUID, rd.mig.UUID); err != nil {
		return err
	}
	return nil
}

// nextLiveDestination claims the next destination to try (nil with the
// reason when none is left), updating rd.mig's alternates.
func (s *Superconductor) nextLiveDestination(ctx context.Context, log hclog.Logger, it workqueue.Item, rd *moveRead) (*etcdschema.Selection, string, error) {
	mig, inst := &rd.mig, &rd.inst
	tried := len(mig.Attempts)
	if tried >= mig.MaxAttempts {
		return nil, fmt.Sprintf("Exceeded max scheduling retries %d for instance %s during live migration",
			mig.MaxAttempts, inst.UUID), nil
	}
	if tried > 0 && len(mig.Remaining) > 0 {
		cl := alternateClaimer{pl: s.cfg.Placement, cli: s.cfg.Client, keys: s.cfg.Keys, log: s.log}
		sel, rest, claimed, err := cl.claim(ctx, log, inst.UUID, inst.Group, inst.ProjectID, inst.UserID,
			mig.Remaining, tried, mig.MaxAttempts)
		mig.Remaining = rest
		if err != nil {
			return nil, "", fmt.Errorf("live migration of %s: %w", inst.UUID, err)
		}
		if claimed {
			return &sel, "", nil
		}
	}
	if tried > 0 && mig.RequestedHost != "" {
		return nil, fmt.Sprintf("No valid host was found. The requested host %s failed its pre-check", mig.RequestedHost), nil
	}
	// The first try, or the alternates used up: the scheduler, without
	// the source and every host tried (Nova's _find_destination loop).
	spec := &scheduler.RequestSpec{InstanceUUIDs: []string{inst.UUID}, Flavor: mig.NewFlavor,
		ProjectID: inst.ProjectID, UserID: inst.UserID, RequestID: mig.RequestID, MinRevision: it.ModRev,
		RequestedDestination: &scheduler.Destination{Cell: inst.Cell}, IgnoreHosts: []string{mig.SourceHost}}
	for _, a := range mig.Attempts {
		spec.IgnoreHosts = append(spec.IgnoreHosts, a.Host)
	}
	switch {
	case mig.RequestedHost != "" && mig.ForceHost:
		spec.ForceHosts = []string{mig.RequestedHost}
	case mig.RequestedHost != "":
		spec.RequestedDestination.Host = mig.RequestedHost
	}
	if g := inst.Group; g != "" {
		if ok, err := s.groupExists(ctx, g); err != nil {
			return nil, "", err
		} else if ok {
			spec.Hints.Group = g
		}
	}
	sels, err := s.selectDestinations(ctx, spec)
	var nvh *scheduler.NoValidHostError
	if errors.As(err, &nvh) {
		log.Info("no valid host for the live migration", "reason", nvh.Error())
		return nil, nvh.Error(), nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("select destinations for live migration of %s: %w", inst.UUID, err)
	}
	mig.Remaining = nil
	if mig.RequestedHost == "" {
		mig.Remaining = sels[0][1:]
	}
	return &sels[0][0], "", nil
}

// handOffLive records the destination and casts its pre-check.
func (s *Superconductor) handOffLive(ctx context.Context, it workqueue.Item, rd *moveRead, sel etcdschema.Selection) error {
	k := s.cfg.Keys
	now := time.Now().UTC()
	mig := rd.mig
	mig.SetDestination(sel)
	if len(mig.Attempts) == 0 {
		mig.Done(etcdschema.EventScheduleLive, "", mig.CreatedAt, now, nil)
	}
	point := "superconductor.before-live-handoff"
	if len(mig.Attempts) > 0 {
		point = "superconductor.before-live-retry-handoff"
	}
	mig.Attempts = append(mig.Attempts, etcdschema.Attempt{Host: sel.ServiceHost, At: now})
	mig.Status, mig.UpdatedAt = etcdschema.MigrationPreparing, now
	cast := records.MoveCast(&rd.inst, &mig, etcdschema.LiveCheck, mig.RequestID, now)
	// A holder killed here leaves the source's allocation with the
	// migration and a claim of sel under the instance that no record
	// names: the next holder's holdSource frees it and schedules again.
	testhook.Pause(ctx, point, mig.InstanceUUID)
	ok, err := s.commitMove(ctx, it, rd, []clientv3.Op{
		clientv3.OpPut(k.Migration(mig.Cell, mig.UUID), etcdschema.MustEncode(&mig)),
		clientv3.OpPut(k.Build(sel.ServiceHost, mig.InstanceUUID), etcdschema.MustEncode(cast)),
	})
	if err != nil {
		return err
	}
	if !ok {
		// The next try frees this claim (holdLiveSource) or, the
		// server deleted, drops the request and its claims.
		return fmt.Errorf("live migration %s: instance or migration changed during the hand-off", mig.InstanceUUID)
	}
	s.log.Info("live migration handed off", "instance", mig.InstanceUUID, "migration", mig.UUID,
		"source", mig.SourceHost, "destination", sel.ServiceHost, "attempt", len(mig.Attempts),
		"alternates", len(mig.Remaining))
	return nil
}

// failLiveMigration ends a live migration no destination took: the
// source's allocation back to the instance (over any stale claim), the
// migration in error with every attempt's reason, the server ACTIVE on
// its source.
func (s *Superconductor) failLiveMigration(ctx context.Context, it workqueue.Item, rd *moveRead, pl liveAllocator, reason string) error {
	if _, err := pl.MoveAllocations(ctx, rd.mig.UUID, rd.inst.UUID); err != nil {
		return err
	}
	var tries []string
	for _, a := range rd.mig.Attempts {
		tries = append(tries, fmt.Sprintf("%s: %s", a.Host, a.Reason))
	}
	if len(tries) > 0 {
		reason += ". Attempts: " + strings.Join(tries, "; ")
	}
	now := time.Now().UTC()
	mig := rd.mig
	if len(mig.Attempts) == 0 {
		mig.Done(etcdschema.EventScheduleLive, "", mig.CreatedAt, now, errors.New(reason))
	}
	mig.Remaining = nil
	ops := records.FailedMove(s.cfg.Keys, rd.inst, mig, reason, now)
	if rd.inst.Group != "" {
		ops = append(ops, records.GroupMemberOn(s.cfg.Keys, rd.inst.Group, rd.inst.UUID, mig.SourceHost))
	}
	ok, err := s.commitMove(ctx, it, rd, ops)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("live migration %s: instance or migration changed while ending it in error", rd.inst.UUID)
	}
	s.log.Warn("live migration found no destination; server stays on its source", "instance", rd.inst.UUID,
		"migration", mig.UUID, "reason", reason)
	return nil
}

// cancelLiveMigration ends a live migration aborted before any host took
// it (DELETE /servers/{id}/migrations/{mid} from 2.65): the source's
// allocation back with the instance (over any claim it holds), the
// migration cancelled, the server ACTIVE on its source.
func (s *Superconductor) cancelLiveMigration(ctx context.Context, it workqueue.Item, rd *moveRead, pl liveAllocator) error {
	if _, err := pl.MoveAllocations(ctx, rd.mig.UUID, rd.inst.UUID); err != nil {
		return err
	}
	now := time.Now().UTC()
	mig := rd.mig
	mig.Remaining = nil
	ops := records.EndedMove(s.cfg.Keys, rd.inst, mig, etcdschema.MigrationCancelled, "aborted by request "+mig.AbortRequestID, now)
	if rd.inst.Group != "" {
		ops = append(ops, records.GroupMemberOn(s.cfg.Keys, rd.inst.Group, rd.inst.UUID, mig.SourceHost))
	}
	ok, err := s.commitMove(ctx, it, rd, ops)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("live migration %s: instance or migration changed while cancelling it", rd.inst.UUID)
	}
	s.log.Info("live migration aborted before it left the superconductor", "instance", rd.inst.UUID, "migration", mig.UUID)
	return nil
}
