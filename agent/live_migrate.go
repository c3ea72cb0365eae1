package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/etcdschema/records"
	"github.com/berth-project/berth/internal/informer"
)

// A live migration's steps on the agents (the superconductor chose the
// destination and cast the first; conductor/live_migrate.go), each one
// driver call and one transaction as the cold moves' (moves.go):
//
//	live_check (dest, preparing): the driver's pre-check. A failure
//	  frees the destination's claim and re-files the MoveRequest, the
//	  reason on the migration's last attempt and the migration accepted
//	  again: the superconductor tries the next host.
//	live_start (dest, running): the guest starts here, the source's
//	  still running.
//	live_out (source, running): the source's guest stops, and in one
//	  transaction the move is done: the source's allocation (the
//	  migration's consumer) freed, the server on the destination with
//	  the schedulers' instance info moved (seed isolate-scheduler-db:
//	  updated at the end of a live migration), the migration completed.
//	live_rollback (dest, running): the source could not hand over; the
//	  destination's guest is destroyed and the server stays on its
//	  source.
//
// A failed start, or a rollback, ends the migration failed: the source's
// allocation back to the instance over the destination's claim, the
// server ACTIVE on its source, as Nova's _rollback_live_migration.
//
// An abort (servers.Store.AbortLiveMigration) is recorded on the
// migration; each step reads it first and rolls back instead, ending the
// migration cancelled. An abort written while a step's driver call ran
// makes the step's transaction lose: the step reads again and, seeing
// only the abort changed, rolls back (or, on the source once its guest
// stopped, completes: too late to abort) under the same cast.

func init() {
	registerMoveStep(etcdschema.LiveCheck, moveStep{status: etcdschema.MigrationPreparing, onDest: true, run: (*Agent).liveCheck})
	registerMoveStep(etcdschema.LiveStart, moveStep{status: etcdschema.MigrationRunning, onDest: true, run: (*Agent).liveStart})
	registerMoveStep(etcdschema.LiveOut, moveStep{status: etcdschema.MigrationRunning, onDest: false, run: (*Agent).liveOut})
	registerMoveStep(etcdschema.LiveRollback, moveStep{status: etcdschema.MigrationRunning, onDest: true, run: (*Agent).liveRollback})
}

// liveMoverOf is the agent's driver as a LiveMover; a driver without it
// fails every step (its service record told the API so).
func (a *Agent) liveMoverOf() (LiveMover, error) {
	if m, ok := a.driver.(LiveMover); ok {
		return m, nil
	}
	return nil, &BuildError{Reschedulable: true, Reason: fmt.Sprintf("the driver of %s cannot live migrate", a.cfg.Host)}
}

func (a *Agent) liveCheck(ctx context.Context, ev informer.Event, b *etcdschema.Build, rd *moveRead) error {
	if rd.mig.AbortRequestID != "" {
		return a.liveRolledBack(ctx, ev, b, rd, "")
	}
	m, err := a.liveMoverOf()
	if err == nil {
		err = m.CheckLiveMigration(context.WithoutCancel(ctx), b)
	}
	if err == nil {
		fresh, cerr := a.liveOn(ctx, ev, b, rd, etcdschema.LiveStart, a.cfg.Host, nil)
		if fresh != nil {
			return a.liveRolledBack(ctx, ev, b, fresh, "")
		}
		return cerr
	}
	// Back to the superconductor: the claim here freed, the reason on
	// the attempt, the request filed again.
	reason := asBuildError(err).Reason
	if ferr := a.freeClaim(ctx, b.InstanceUUID); ferr != nil {
		return ferr
	}
	now := time.Now().UTC()
	mig := *rd.mig
	mig.Done(b.Move.Step, a.cfg.Host, b.CastAt, now, errors.New(reason))
	if n := len(mig.Attempts); n > 0 && mig.Attempts[n-1].Host == a.cfg.Host {
		mig.Attempts[n-1].Reason = reason
	} else {
		mig.Attempts = append(mig.Attempts, etcdschema.Attempt{Host: a.cfg.Host, Reason: reason, At: now})
	}
	mig.Status, mig.DestHost, mig.DestNode, mig.UpdatedAt = etcdschema.MigrationAccepted, "", "", now
	req := &etcdschema.MoveRequest{InstanceUUID: b.InstanceUUID, Cell: b.Cell, MigrationUUID: mig.UUID,
		RequestID: mig.RequestID, CreatedAt: now, Kind: etcdschema.MigrationTypeLiveMigration}
	ops := []clientv3.Op{
		clientv3.OpPut(a.keys.Migration(mig.Cell, mig.UUID), etcdschema.MustEncode(&mig)),
		clientv3.OpPut(a.keys.MoveRequest(b.InstanceUUID), etcdschema.MustEncode(req)),
	}
	fresh, err := a.liveCommit(ctx, ev, b, rd, ops, nil, "")
	if fresh != nil {
		return a.liveRolledBack(ctx, ev, b, fresh, "")
	}
	if err == nil {
		a.log.Info("live migration pre-check failed; back to the superconductor", "instance", b.InstanceUUID,
			"migration", mig.UUID, "reason", reason)
	}
	return err
}

func (a *Agent) liveStart(ctx context.Context, ev informer.Event, b *etcdschema.Build, rd *moveRead) error {
	if rd.mig.AbortRequestID != "" {
		return a.liveRolledBack(ctx, ev, b, rd, "")
	}
	m, err := a.liveMoverOf()
	if err == nil {
		force, stop := a.watchLiveRequests(ctx, rd)
		err = m.LiveMigrateIn(context.WithoutCancel(ctx), b, force)
		stop()
	}
	if err != nil {
		a.log.Warn("live migration failed to start the guest here; rolling back", "instance", b.InstanceUUID, "error", err)
		return a.liveRolledBack(ctx, ev, b, rd, asBuildError(err).Reason)
	}
	for try := 0; ; try++ {
		fresh, err := a.liveOn(ctx, ev, b, rd, etcdschema.LiveOut, rd.mig.SourceHost, nil)
		switch {
		case fresh == nil:
			return err
		case fresh.mig.AbortRequestID != "":
			return a.liveRolledBack(ctx, ev, b, fresh, "")
		case try >= 2:
			return fmt.Errorf("live migration step of %s: the migration kept changing", b.InstanceUUID)
		}
		rd = fresh // force_complete asked meanwhile: recorded, go on
	}
}

// watchLiveRequests closes force when the migration is asked to complete
// now or to abort (either way the driver should stop waiting for the
// guest to converge), watching it from the revision rd read; stop ends
// the watch.
func (a *Agent) watchLiveRequests(ctx context.Context, rd *moveRead) (force <-chan struct{}, stop func()) {
	ch := make(chan struct{})
	if rd.mig.ForceCompleteRequestID != "" || rd.mig.AbortRequestID != "" {
		close(ch)
		return ch, func() {}
	}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	key := a.keys.Migration(rd.mig.Cell, rd.mig.UUID)
	go func() {
		defer close(done)
		for resp := range a.cli.Watch(wctx, key, clientv3.WithRev(rd.mgRev+1)) {
			for _, e := range resp.Events {
				var m etcdschema.Migration
				if e.Type == clientv3.EventTypePut && etcdschema.Decode(key, e.Kv.Value, &m) == nil &&
					(m.ForceCompleteRequestID != "" || m.AbortRequestID != "") {
					close(ch)
					return
				}
			}
		}
	}()
	return ch, func() { cancel(); <-done }
}

// liveOn records a step done and casts the next one to host (the
// migration stays running, the server migrating).
func (a *Agent) liveOn(ctx context.Context, ev informer.Event, b *etcdschema.Build, rd *moveRead, next, host string,
	stepErr error) (*moveRead, error) {
	now := time.Now().UTC()
	mig, inst := *rd.mig, *rd.inst
	mig.Done(b.Move.Step, a.cfg.Host, b.CastAt, now, stepErr)
	mig.Status, mig.UpdatedAt = etcdschema.MigrationRunning, now
	if stepErr != nil {
		mig.Error = stepErr.Error()
	}
	cast := records.MoveCast(&inst, &mig, next, mig.RequestID, now)
	return a.liveCommit(ctx, ev, b, rd, []clientv3.Op{
		clientv3.OpPut(a.keys.Migration(mig.Cell, mig.UUID), etcdschema.MustEncode(&mig))}, cast, host)
}

func (a *Agent) liveOut(ctx context.Context, ev informer.Event, b *etcdschema.Build, rd *moveRead) error {
	if rd.mig.AbortRequestID != "" {
		return a.liveRetried(b, rd, func(rd *moveRead) (*moveRead, error) {
			return a.liveOn(ctx, ev, b, rd, etcdschema.LiveRollback, rd.mig.DestHost,
				errors.New("aborted by request "+rd.mig.AbortRequestID))
		})
	}
	m, err := a.liveMoverOf()
	if err == nil {
		err = m.LiveMigrateOut(context.WithoutCancel(ctx), b.InstanceUUID)
	}
	if err != nil {
		// The source keeps the guest: the destination destroys its own.
		reason := asBuildError(err).Reason
		a.log.Warn("live migration could not hand over; rolling back", "instance", b.InstanceUUID, "reason", reason)
		return a.liveRetried(b, rd, func(rd *moveRead) (*moveRead, error) {
			return a.liveOn(ctx, ev, b, rd, etcdschema.LiveRollback, rd.mig.DestHost, errors.New(reason))
		})
	}
	if err := a.freeClaim(ctx, rd.mig.UUID); err != nil {
		return err
	}
	// An abort asked while the guest stopped here comes too late: the
	// move is done.
	return a.liveRetried(b, rd, func(rd *moveRead) (*moveRead, error) { return a.liveCompleted(ctx, ev, b, rd) })
}

// liveRetried runs write, again over the fresh read while it loses to an
// abort or a force_complete (each asked at most once, so a few tries
// settle it).
func (a *Agent) liveRetried(b *etcdschema.Build, rd *moveRead, write func(rd *moveRead) (*moveRead, error)) error {
	for try := 0; try < 4; try++ {
		fresh, err := write(rd)
		if fresh == nil {
			return err
		}
		rd = fresh
	}
	return fmt.Errorf("live migration step of %s: the migration kept changing", b.InstanceUUID)
}

// liveCompleted records the move done: the server on the destination
// with its instance info, the migration completed.
func (a *Agent) liveCompleted(ctx context.Context, ev informer.Event, b *etcdschema.Build, rd *moveRead) (*moveRead, error) {
	now := time.Now().UTC()
	mig, inst := *rd.mig, *rd.inst
	mig.Done(b.Move.Step, a.cfg.Host, b.CastAt, now, nil)
	mig.Status, mig.Remaining, mig.UpdatedAt = etcdschema.MigrationCompleted, nil, now
	mig.LandOnDest(&inst)
	inst.TaskState, inst.MigrationUUID, inst.UpdatedAt = "", "", now
	ops := []clientv3.Op{
		clientv3.OpPut(a.keys.CellInstance(inst.Cell, inst.UUID), etcdschema.MustEncode(&inst)),
		clientv3.OpPut(a.keys.Migration(mig.Cell, mig.UUID), etcdschema.MustEncode(&mig)),
		clientv3.OpDelete(a.keys.MigrationMapping(mig.UUID)),
		clientv3.OpDelete(a.keys.HostInstance(a.cfg.Host, inst.UUID)),
	}
	if a.cfg.TrackInstanceChanges {
		info := &etcdschema.InstanceInfo{UUID: inst.UUID, Host: mig.DestHost, FlavorID: inst.Flavor.ID,
			Flavor: inst.Flavor.Name, State: "active", UpdatedAt: now}
		ops = append(ops, clientv3.OpPut(a.keys.HostInstance(mig.DestHost, inst.UUID), etcdschema.MustEncode(info)))
	}
	fresh, err := a.liveCommit(ctx, ev, b, rd, ops, nil, "")
	if fresh == nil && err == nil {
		a.log.Info("live migration completed", "instance", inst.UUID, "migration", mig.UUID,
			"source", mig.SourceHost, "destination", mig.DestHost)
	}
	return fresh, err
}

func (a *Agent) liveRollback(ctx context.Context, ev informer.Event, b *etcdschema.Build, rd *moveRead) error {
	return a.liveRolledBack(ctx, ev, b, rd, rd.mig.Error)
}

// liveRolledBack destroys the guest this destination started (if any),
// gives the instance its source allocation back over this host's claim
// and ends the migration failed (cancelled if aborted), the server
// ACTIVE on its source.
func (a *Agent) liveRolledBack(ctx context.Context, ev informer.Event, b *etcdschema.Build, rd *moveRead, reason string) error {
	if err := a.driver.Destroy(context.WithoutCancel(ctx), b.InstanceUUID); err != nil {
		return fmt.Errorf("destroy %s on its destination for a rollback: %w", b.InstanceUUID, err)
	}
	if err := a.moveBack(ctx, rd.mig.UUID, b.InstanceUUID); err != nil {
		return err
	}
	return a.liveRetried(b, rd, func(rd *moveRead) (*moveRead, error) {
		now := time.Now().UTC()
		mig, inst := *rd.mig, *rd.inst
		status := etcdschema.MigrationFailed
		if mig.AbortRequestID != "" {
			status = etcdschema.MigrationCancelled
			if reason == "" {
				reason = "aborted by request " + mig.AbortRequestID
			}
		}
		if reason == "" {
			reason = "the source could not hand over"
		}
		mig.Done(b.Move.Step, a.cfg.Host, b.CastAt, now, errors.New(reason))
		mig.Status, mig.Error, mig.Remaining, mig.UpdatedAt = status, reason, nil, now
		inst.TaskState, inst.MigrationUUID, inst.UpdatedAt = "", "", now
		ops := []clientv3.Op{
			clientv3.OpPut(a.keys.CellInstance(inst.Cell, inst.UUID), etcdschema.MustEncode(&inst)),
			clientv3.OpPut(a.keys.Migration(mig.Cell, mig.UUID), etcdschema.MustEncode(&mig)),
			clientv3.OpDelete(a.keys.MigrationMapping(mig.UUID)),
		}
		if inst.Group != "" {
			ops = append(ops, records.GroupMemberOn(a.keys, inst.Group, inst.UUID, mig.SourceHost))
		}
		// Aborted during the rollback: the next try ends it cancelled.
		fresh, err := a.liveCommit(ctx, ev, b, rd, ops, nil, "")
		if err == nil && fresh == nil {
			a.log.Warn("live migration rolled back; server stays on its source", "instance", inst.UUID,
				"migration", mig.UUID, "source", mig.SourceHost, "status", status, "reason", reason)
		}
		return fresh, err
	})
}

// liveCommit is commitMove for the live steps, but a transaction that
// lost only to an abort or a force_complete (the instance unchanged, the
// migration in the same status now carrying the request) keeps the cast
// and returns the fresh read, for the step to act on it (roll back an
// abort, redo its write over a force_complete).
func (a *Agent) liveCommit(ctx context.Context, ev informer.Event, b *etcdschema.Build, rd *moveRead, ops []clientv3.Op,
	next *etcdschema.Build, host string) (*moveRead, error) {
	k := a.keys
	cmps := []clientv3.Cmp{
		clientv3.Compare(clientv3.ModRevision(ev.Key), "=", ev.Revision),
		clientv3.Compare(clientv3.ModRevision(k.CellInstance(rd.inst.Cell, rd.inst.UUID)), "=", rd.instRev),
		clientv3.Compare(clientv3.ModRevision(k.Migration(rd.mig.Cell, rd.mig.UUID)), "=", rd.mgRev),
	}
	end := true
	if next != nil {
		nkey := k.Build(host, next.InstanceUUID)
		ops = append(ops, clientv3.OpPut(nkey, etcdschema.MustEncode(next)))
		end = nkey != ev.Key
	}
	if end {
		ops = append(ops, clientv3.OpDelete(ev.Key))
	}
	resp, err := a.cli.Txn(context.WithoutCancel(ctx)).If(cmps...).Then(ops...).Commit()
	if err != nil {
		return nil, fmt.Errorf("record live migration step of %s: %w", ev.Key, err)
	}
	if resp.Succeeded {
		return nil, nil
	}
	fresh, err := a.readMove(ctx, b)
	if err != nil {
		return nil, err
	}
	if fresh.inst != nil && fresh.mig != nil && fresh.instRev == rd.instRev && fresh.mig.Status == rd.mig.Status &&
		(fresh.mig.AbortRequestID != "" && rd.mig.AbortRequestID == "" ||
			fresh.mig.ForceCompleteRequestID != "" && rd.mig.ForceCompleteRequestID == "") {
		return fresh, nil
	}
	// Deleted, or the move went on without this cast: it stops here.
	return nil, a.endCast(ctx, ev, nil)
}
