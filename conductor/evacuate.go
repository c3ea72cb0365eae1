package conductor

import (
	"context"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/etcdschema/records"
	"github.com/berth-project/berth/internal/metrics"
	"github.com/berth-project/berth/internal/workqueue"
	"github.com/berth-project/berth/placement"
	"github.com/berth-project/berth/scheduler"
)

// The conductors' part of an evacuation (Nova's conductor
// rebuild_instance with recreate=True). The superconductor schedules it:
// the source's allocation goes to the migration's consumer (kept, as
// Nova keeps it, until the rebuild is done: the source host is down, not
// gone), the scheduler claims a destination for the instance in its
// cell, never the source (ignore_hosts), pinned to a requested host or,
// when forced, to that host with the filters skipped; and one
// transaction records the destination and its alternates on the
// migration (pre-migrating) and casts the rebuild to the destination.
// Unlike Nova 26 (return_alternates=False) the Selections keep their
// alternates: a rebuild that fails is retried by the cell conductor on
// the next one, claimed first, as a build is. With no host at all, or
// none left, the source's allocation goes back to the instance, the
// migration ends error (not scheduled) or failed (every rebuild failed)
// with every reason, and the server is ERROR on its source.

func init() {
	registerMoveKind(etcdschema.MigrationTypeEvacuation, (*Superconductor).scheduleEvacuation)
	registerMoveRetry(etcdschema.MigrationTypeEvacuation, (*CellConductor).retryEvacuation)
}

func (s *Superconductor) scheduleEvacuation(ctx context.Context, it workqueue.Item, req *etcdschema.MoveRequest) error {
	log := s.log.With("instance", req.InstanceUUID, "migration", req.MigrationUUID, "request_id", req.RequestID)
	pl, ok := s.cfg.Placement.(liveAllocator)
	if !ok {
		return fmt.Errorf("evacuation of %s: placement cannot move allocations", req.InstanceUUID)
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
		log.Info("evacuation request no longer current, dropping it")
		return s.finishMove(ctx, it, nil)
	}
	// The source's allocation to the migration; an instance claim left
	// by an earlier holder that died after moving it is stale.
	if err := s.holdSource(ctx, pl, rd); err != nil {
		return err
	}
	mig := &rd.mig
	spec := &scheduler.RequestSpec{InstanceUUIDs: []string{req.InstanceUUID}, Flavor: rd.inst.Flavor,
		ProjectID: rd.inst.ProjectID, UserID: rd.inst.UserID, RequestID: mig.RequestID, MinRevision: it.ModRev,
		RequestedDestination: &scheduler.Destination{Cell: rd.inst.Cell}, IgnoreHosts: []string{mig.SourceHost}}
	switch {
	case mig.RequestedHost != "" && mig.ForceHost:
		// Nova's forced evacuate bypasses the scheduler; Berth asks it
		// with the host forced, so the filters are skipped as for a
		// forced build and placement still checks the room.
		spec.ForceHosts = []string{mig.RequestedHost}
	case mig.RequestedHost != "":
		spec.RequestedDestination.Host = mig.RequestedHost
	}
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
		log.Info("no valid host for the evacuation", "reason", nvh.Error())
		return s.failEvacuation(ctx, it, rd, nvh.Error())
	}
	if err != nil {
		return fmt.Errorf("select destinations for the evacuation of %s: %w", req.InstanceUUID, err)
	}
	return s.handOffEvacuation(ctx, it, rd, sels[0])
}

// handOffEvacuation records the claimed destination and its alternates
// and casts the rebuild there.
func (s *Superconductor) handOffEvacuation(ctx context.Context, it workqueue.Item, rd *moveRead, sels []etcdschema.Selection) error {
	chosen := sels[0]
	now := time.Now().UTC()
	mig := rd.mig
	mig.Status = etcdschema.MigrationPreMigrating
	mig.SetDestination(chosen)
	mig.MaxAttempts = s.cfg.MaxAttempts
	if mig.RequestedHost == "" {
		mig.Remaining = sels[1:]
	}
	mig.Attempts = append(mig.Attempts, etcdschema.Attempt{Host: chosen.ServiceHost, At: now})
	mig.Done(etcdschema.EventEvacuateSchedule, "", mig.CreatedAt, now, nil)
	mig.UpdatedAt = now
	cast := records.MoveCast(&rd.inst, &mig, etcdschema.MoveEvacuateRebuild, mig.RequestID, now)
	ok, err := s.commitMove(ctx, it, rd, []clientv3.Op{
		clientv3.OpPut(s.cfg.Keys.Migration(mig.Cell, mig.UUID), etcdschema.MustEncode(&mig)),
		clientv3.OpPut(s.cfg.Keys.Build(chosen.ServiceHost, mig.InstanceUUID), etcdschema.MustEncode(cast)),
	})
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("evacuation of %s: instance or migration changed during the hand-off", mig.InstanceUUID)
	}
	s.log.Info("evacuation handed off", "instance", mig.InstanceUUID, "migration", mig.UUID, "source", mig.SourceHost,
		"destination", chosen.ServiceHost, "alternates", len(mig.Remaining), "forced", mig.ForceHost)
	return nil
}

// failEvacuation ends an evacuation no host could take: the source's
// allocation back to the instance, the migration in error, the server
// ERROR on its source (Nova's rebuild_instance on NoValidHost).
func (s *Superconductor) failEvacuation(ctx context.Context, it workqueue.Item, rd *moveRead, reason string) error {
	if _, err := s.cfg.Placement.(MoveAllocator).MoveAllocations(ctx, rd.mig.UUID, rd.inst.UUID); err != nil {
		return err
	}
	now := time.Now().UTC()
	mig := rd.mig
	mig.Done(etcdschema.EventEvacuateSchedule, "", mig.CreatedAt, now, errors.New(reason))
	ok, err := s.commitMove(ctx, it, rd, records.FailedEvacuation(s.cfg.Keys, rd.inst, mig, etcdschema.MigrationError, reason, now))
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("evacuation of %s: instance or migration changed while ending it in error", rd.inst.UUID)
	}
	return nil
}

// retryEvacuation works a failed rebuild's retry: the next alternate,
// claimed first, gets the rebuild; with none left the evacuation fails.
func (c *CellConductor) retryEvacuation(ctx context.Context, it workqueue.Item, retry *etcdschema.Retry) error {
	r, err := c.readMigrationRetry(ctx, retry, "evacuation")
	if err != nil {
		return err
	}
	if retry.Build.Move.Step == etcdschema.MoveEvacuateFreeSource {
		return c.freeEvacuatedSource(ctx, it, &r.mig, r.migRev != 0, retry.Build.RequestID)
	}
	if !r.current() {
		r.log.Info("evacuation retry no longer current (server deleted or evacuation settled), dropping it")
		return c.finish(ctx, it, nil)
	}
	tx, handled, err := c.retryOnAlternate(ctx, it, retry, r, etcdschema.EventEvacuateRebuild,
		etcdschema.MoveEvacuateRebuild, "")
	if handled || err != nil {
		return err
	}
	k, uuid, migUUID, inst, mig, log := c.cfg.Keys, r.uuid, r.migUUID, r.inst, r.mig, r.log

	// Nothing left: the source's allocation back to the instance, then
	// the migration failed and the server ERROR with every reason.
	mover, ok := c.cfg.Placement.(MoveAllocator)
	if !ok {
		return fmt.Errorf("evacuation retry %s: placement cannot move allocations", uuid)
	}
	if _, err := mover.MoveAllocations(ctx, migUUID, uuid); err != nil {
		return err
	}
	reasons, reason := exhausted("evacuation", uuid, mig.Attempts)
	ops := records.FailedEvacuation(k, inst, mig, etcdschema.MigrationFailed, reason, time.Now().UTC())
	if inst.Group != "" {
		ops = append(ops, records.GroupMemberOn(k, inst.Group, uuid, mig.SourceHost))
	}
	ok, err = tx.commit(ctx, ops)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("evacuation retry %s: instance or migration changed while ending it", uuid)
	}
	c.cfg.Metrics.Reschedule(metrics.RescheduleExhausted)
	log.Warn("evacuation failed on every host; server ERROR on its source", "attempts", len(mig.Attempts), "reasons", reasons)
	return nil
}

// freeEvacuatedSource frees a done evacuation's source allocation (the
// migration's consumer), ends its mapping, which kept the leader's
// orphan sweep off that consumer while the evacuation ran, and casts
// the source the clean-up of its stale copy (worked at once by an agent
// still running there, else when it starts; a cast already waiting
// there is left in place). A migration not done (a stale request) is
// left alone.
func (c *CellConductor) freeEvacuatedSource(ctx context.Context, it workqueue.Item, mig *etcdschema.Migration, found bool, requestID string) error {
	if !found {
		return c.finish(ctx, it, nil)
	}
	if mig.Status != etcdschema.MigrationDone {
		c.log.Warn("source free asked for an evacuation not done, dropping it", "migration", mig.UUID, "status", mig.Status)
		return c.finish(ctx, it, nil)
	}
	if err := c.cfg.Placement.DeleteAllocations(ctx, mig.UUID); err != nil && !errors.Is(err, placement.ErrNotFound) {
		return fmt.Errorf("free the source allocation of evacuation %s: %w", mig.UUID, err)
	}
	k := c.cfg.Keys
	cleanup := &etcdschema.Build{Op: etcdschema.OpMove, InstanceUUID: mig.InstanceUUID, Cell: mig.Cell,
		ProjectID: mig.ProjectID, UserID: mig.UserID, Flavor: mig.OldFlavor, RequestID: requestID, CastAt: time.Now().UTC(),
		Move: &etcdschema.MoveStep{MigrationUUID: mig.UUID, Step: etcdschema.MoveEvacuateCleanup, Kind: etcdschema.MigrationTypeEvacuation}}
	cast := k.Build(mig.SourceHost, mig.InstanceUUID)
	c.log.Info("evacuation done: source allocation freed, clean-up cast to the source", "instance", mig.InstanceUUID,
		"migration", mig.UUID, "source", mig.SourceHost)
	return c.finish(ctx, it, []clientv3.Op{clientv3.OpDelete(k.MigrationMapping(mig.UUID)),
		clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(cast), "=", 0)},
			[]clientv3.Op{clientv3.OpPut(cast, etcdschema.MustEncode(cleanup))}, nil)})
}
