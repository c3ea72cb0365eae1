package conductor

import (
	"context"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/etcdschema/records"
	"github.com/berth-project/berth/internal/workqueue"
	"github.com/berth-project/berth/placement"
	"github.com/berth-project/berth/scheduler"
)

// The superconductor's part of a cold move (Nova's conductor
// migrate_server → MigrationTask): for each MoveRequest, hand the
// source's allocation to the migration's consumer, ask the scheduler for
// a destination with the new flavor in the instance's cell (the claim is
// the instance's, so source and destination both count), and in one
// transaction record the destination and its alternates on the
// migration and cast the first step to the destination's agent.
// A move that cannot be scheduled gives the allocation back and ends
// the migration in error; the server stays ACTIVE on its source, as in
// Nova.

// queueMoveRequests labels the move queue's metrics.
const queueMoveRequests = "move_requests"

// MoveAllocator is what a move needs of placement beyond Allocations:
// handing an allocation from one consumer to another in one step
// (placement.Service.MoveAllocations).
type MoveAllocator interface {
	MoveAllocations(ctx context.Context, from, to string) (bool, error)
}

// newMoveQueue's workers are half the build queue's: a move request's
// processing is mostly waiting on etcd (its reads, the allocation's
// hand-over, the claim, the hand-off), and a host drain puts hundreds
// in flight at once. With an eighth (8 of the default 64) the move
// requests queued for seconds in a 40-host drain (the
// conductor_migrate_server stage of `berth bench drain`: p50 1.7 s of a
// 2.5 s move).
func (s *Superconductor) newMoveQueue() *workqueue.Queue {
	k := s.cfg.Keys
	return workqueue.New(workqueue.Config{
		Client: s.cfg.Client, ItemPrefix: k.MoveRequests(), LeasePrefix: k.MoveRequestLeases(),
		LeaseKey: k.MoveRequestLease, Holder: s.cfg.Holder, LeaseTTL: s.cfg.LeaseTTL,
		Workers: max(s.cfg.Workers/2, 2), Process: s.processMove, Log: s.log.Named("moves"),
		HolderPrefix: k.MoveRequestHolders(), HolderKey: k.MoveRequestHolder,
		Grace: s.cfg.RankGrace, IdleAfter: s.cfg.HolderIdleAfter, StealAfter: s.cfg.StealAfter,
		Name: queueMoveRequests, Metrics: s.cfg.Metrics,
	})
}

// moveRead is what one try at a move read.
type moveRead struct {
	inst           etcdschema.Instance
	mig            etcdschema.Migration
	instRev, mgRev int64
	instGone       bool
}

func (s *Superconductor) processMove(ctx context.Context, it workqueue.Item) error {
	var req etcdschema.MoveRequest
	if err := etcdschema.Decode(it.Key, it.Value, &req); err != nil {
		s.log.Error("dropping unreadable move request", "key", it.Key, "error", err)
		return s.finishMove(ctx, it, nil)
	}
	if req.Kind != "" {
		h, ok := moveKinds[req.Kind]
		if !ok {
			// Written by a newer version: leave it for a superconductor
			// that knows the kind rather than drop a user's request.
			return fmt.Errorf("move request %s: unknown kind %q (written by a newer Berth?)", it.Key, req.Kind)
		}
		return h(s, ctx, it, &req)
	}
	log := s.log.With("instance", req.InstanceUUID, "migration", req.MigrationUUID, "request_id", req.RequestID)
	pl, ok := s.cfg.Placement.(liveAllocator)
	if !ok {
		return fmt.Errorf("move %s: placement cannot move allocations", req.InstanceUUID)
	}
	rd, err := s.readMove(ctx, &req)
	if err != nil {
		return err
	}
	if rd.instGone || rd.inst.MigrationUUID != req.MigrationUUID || rd.mig.UUID == "" ||
		rd.mig.Status != etcdschema.MigrationPreMigrating || rd.mig.DestHost != "" {
		// Deleted meanwhile, or this move was settled by an earlier
		// holder: nothing to schedule. A deleted server's claims go
		// with it (both frees are idempotent).
		if rd.instGone {
			s.freeMoveClaims(ctx, req.InstanceUUID, req.MigrationUUID)
		}
		log.Info("move request no longer current, dropping it")
		return s.finishMove(ctx, it, nil)
	}
	// Hand the source's allocation to the migration (a claim an earlier
	// holder left under the instance is stale: we hold the request now).
	if err := s.holdSource(ctx, pl, rd); err != nil {
		return err
	}
	spec := &scheduler.RequestSpec{InstanceUUIDs: []string{req.InstanceUUID}, Flavor: rd.mig.NewFlavor,
		ProjectID: rd.inst.ProjectID, UserID: rd.inst.UserID, RequestID: rd.mig.RequestID,
		MinRevision: it.ModRev, RequestedDestination: &scheduler.Destination{Cell: rd.inst.Cell}}
	if rd.mig.RequestedHost != "" {
		spec.RequestedDestination.Host = rd.mig.RequestedHost
	}
	if !rd.mig.AllowSameHost {
		spec.IgnoreHosts = []string{rd.mig.SourceHost}
	}
	// The instance's server group goes with the move as with its build
	// (Nova's request spec keeps instance_group), so a resize or
	// migration keeps its group's policy; a group deleted since is none.
	if g := rd.inst.Group; g != "" {
		if ok, err := s.groupExists(ctx, g); err != nil {
			return err
		} else if ok {
			spec.Hints.Group = g
		}
	}
	sels, err := s.selectDestinations(ctx, spec)
	var nvh *scheduler.NoValidHostError
	if errors.As(err, &nvh) {
		log.Info("no valid host for the move", "reason", nvh.Error())
		return s.failMove(ctx, it, rd, nvh.Error())
	}
	if err != nil {
		return fmt.Errorf("select destinations for move of %s: %w", req.InstanceUUID, err)
	}
	return s.handOffMove(ctx, it, rd, sels[0])
}

// moveKindHandler schedules one MoveRequest of its kind, ending it
// (workqueue.FinishOps in its final transaction) as processMove does.
type moveKindHandler func(s *Superconductor, ctx context.Context, it workqueue.Item, req *etcdschema.MoveRequest) error

// moveKinds are the handlers of the MoveRequest kinds other than the
// cold moves (live migration, evacuation, unshelve), each added by an
// init in that kind's file.
var moveKinds = map[string]moveKindHandler{}

// registerMoveKind adds the handler of a MoveRequest kind.
func registerMoveKind(kind string, h moveKindHandler) {
	if _, dup := moveKinds[kind]; dup || kind == "" {
		panic("conductor: move kind " + kind + " registered twice or empty")
	}
	moveKinds[kind] = h
}

func (s *Superconductor) readMove(ctx context.Context, req *etcdschema.MoveRequest) (*moveRead, error) {
	k := s.cfg.Keys
	ikey, mkey := k.CellInstance(req.Cell, req.InstanceUUID), k.Migration(req.Cell, req.MigrationUUID)
	resp, err := s.cfg.Client.Txn(ctx).Then(clientv3.OpGet(ikey), clientv3.OpGet(mkey)).Commit()
	if err != nil {
		return nil, fmt.Errorf("read move of %s: %w", req.InstanceUUID, err)
	}
	rd := &moveRead{}
	ikv, mkv := resp.Responses[0].GetResponseRange().Kvs, resp.Responses[1].GetResponseRange().Kvs
	if len(ikv) == 0 {
		rd.instGone = true
		return rd, nil
	}
	if err := etcdschema.Decode(ikey, ikv[0].Value, &rd.inst); err != nil {
		return nil, err
	}
	rd.instRev = ikv[0].ModRevision
	if len(mkv) == 1 {
		if err := etcdschema.Decode(mkey, mkv[0].Value, &rd.mig); err != nil {
			return nil, err
		}
		rd.mgRev = mkv[0].ModRevision
	}
	return rd, nil
}

// handOffMove records the destination and its alternates on the
// migration and casts the prep step to the destination, if we still hold
// the request and neither record changed.
func (s *Superconductor) handOffMove(ctx context.Context, it workqueue.Item, rd *moveRead, sels []etcdschema.Selection) error {
	k := s.cfg.Keys
	chosen := sels[0]
	now := time.Now().UTC()
	mig := rd.mig
	mig.SetDestination(chosen)
	mig.MaxAttempts = s.cfg.MaxAttempts
	if mig.RequestedHost == "" {
		mig.Remaining = sels[1:]
	}
	mig.Attempts = append(mig.Attempts, etcdschema.Attempt{Host: chosen.ServiceHost, At: now})
	mig.Done(etcdschema.EventScheduleMove, "", mig.CreatedAt, now, nil)
	mig.UpdatedAt = now
	cast := records.MoveCast(&rd.inst, &mig, etcdschema.MovePrep, mig.RequestID, now)
	ok, err := s.commitMove(ctx, it, rd, []clientv3.Op{
		clientv3.OpPut(k.Migration(mig.Cell, mig.UUID), etcdschema.MustEncode(&mig)),
		clientv3.OpPut(k.Build(chosen.ServiceHost, mig.InstanceUUID), etcdschema.MustEncode(cast)),
	})
	if err != nil {
		return err
	}
	if !ok {
		// Changed under us (deleted, most likely): the next try reads
		// again, frees what is stale and drops or redoes the move.
		return fmt.Errorf("move %s: instance or migration changed during the hand-off", mig.InstanceUUID)
	}
	s.log.Info("move handed off", "instance", mig.InstanceUUID, "migration", mig.UUID, "source", mig.SourceHost,
		"destination", chosen.ServiceHost, "alternates", len(mig.Remaining))
	return nil
}

// failMove ends a move that could not be scheduled: the source's
// allocation back to the instance, the migration in error, the server
// ACTIVE on its source with no task (Nova's _cold_migrate on
// NoValidHost).
func (s *Superconductor) failMove(ctx context.Context, it workqueue.Item, rd *moveRead, reason string) error {
	if _, err := s.cfg.Placement.(MoveAllocator).MoveAllocations(ctx, rd.mig.UUID, rd.inst.UUID); err != nil {
		return err
	}
	now := time.Now().UTC()
	mig := rd.mig
	mig.Done(etcdschema.EventScheduleMove, "", mig.CreatedAt, now, errors.New(reason))
	ops := records.FailedMove(s.cfg.Keys, rd.inst, mig, reason, now)
	ok, err := s.commitMove(ctx, it, rd, ops)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("move %s: instance or migration changed while ending it in error", rd.inst.UUID)
	}
	return nil
}

func (s *Superconductor) commitMove(ctx context.Context, it workqueue.Item, rd *moveRead, ops []clientv3.Op) (bool, error) {
	k := s.cfg.Keys
	held, err := s.moves.StillHeld(ctx, it)
	if err != nil {
		return false, err
	}
	resp, err := s.cfg.Client.Txn(ctx).If(held,
		clientv3.Compare(clientv3.ModRevision(k.CellInstance(rd.inst.Cell, rd.inst.UUID)), "=", rd.instRev),
		clientv3.Compare(clientv3.ModRevision(k.Migration(rd.mig.Cell, rd.mig.UUID)), "=", rd.mgRev),
	).Then(append(ops, workqueue.FinishOps(it)...)...).Commit()
	if err != nil {
		return false, fmt.Errorf("commit move of %s: %w", rd.inst.UUID, err)
	}
	return resp.Succeeded, nil
}

func (s *Superconductor) finishMove(ctx context.Context, it workqueue.Item, ops []clientv3.Op) error {
	held, err := s.moves.StillHeld(ctx, it)
	if err != nil {
		return err
	}
	if _, err := s.cfg.Client.Txn(ctx).If(held).Then(append(ops, workqueue.FinishOps(it)...)...).Commit(); err != nil {
		return fmt.Errorf("finish move request %s: %w", it.ID, err)
	}
	return nil
}

// freeMoveClaims frees what a deleted server's move may still hold.
func (s *Superconductor) freeMoveClaims(ctx context.Context, consumers ...string) {
	for _, c := range consumers {
		if err := s.cfg.Placement.DeleteAllocations(ctx, c); err != nil && !errors.Is(err, placement.ErrNotFound) {
			s.log.Warn("could not free a deleted server's move claim", "consumer", c, "error", err)
		}
	}
}

// groupExists reports whether server group uuid still exists.
func (s *Superconductor) groupExists(ctx context.Context, uuid string) (bool, error) {
	resp, err := s.cfg.Client.Get(ctx, s.cfg.Keys.ServerGroup(uuid), clientv3.WithCountOnly())
	if err != nil {
		return false, fmt.Errorf("read server group %s: %w", uuid, err)
	}
	return resp.Count > 0, nil
}
