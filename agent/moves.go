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
	"github.com/berth-project/berth/internal/testhook"
	"github.com/berth-project/berth/placement"
)

// A cold move (resize, migrate) is worked by the agents of its source and
// destination as a chain of casts, each step one host's driver call and
// one transaction that records the outcome, casts the next step and ends
// this one, guarded by the cast, the instance and the migration being
// unchanged (so a step is done once, and a delete in between stops the
// chain):
//
//	prep (dest) → out (source) → finish (dest): VERIFY_RESIZE
//	confirm (source): ACTIVE on the destination
//	revert (dest) → revert_finish (source): ACTIVE on the source
//
// Placement during the move: the migration's consumer holds the source's
// allocation (the superconductor moved it there), the instance's the
// destination's claim. confirm frees the migration's; revert_finish
// moves it back to the instance, overwriting the destination's claim.

// moveAllocator is the part of placement a revert needs (Service has it).
type moveAllocator interface {
	MoveAllocations(ctx context.Context, from, to string) (bool, error)
}

// moveRead is a move step's view of its records.
type moveRead struct {
	inst           *etcdschema.Instance
	mig            *etcdschema.Migration
	instRev, mgRev int64
}

// moveStep is one step of a move: the migration status it runs in,
// whether it runs on the destination (else the source), and, for the
// steps of the other moves (live migration, evacuation, shelve, each in
// its own file, added by registerMoveStep), the work itself. The cold
// moves' steps are worked by move's switch below.
type moveStep struct {
	status string
	onDest bool
	// run works the step once move has checked that the cast is
	// current (the instance and migration exist and agree, the status
	// is status, this host is the one the step runs on).
	run func(a *Agent, ctx context.Context, ev informer.Event, b *etcdschema.Build, rd *moveRead) error
	// noMigration: the step has no migration record (shelving); run is
	// called at once, rd nil, and checks the instance itself.
	noMigration bool
	// settled marks a step that runs after its move has ended (the
	// instance no longer names the migration, or is gone): only the
	// migration's status and host are checked.
	settled bool
}

// registerMoveStep adds a step of another move kind (from an init in
// that kind's file); a step named twice is a programming error.
func registerMoveStep(step string, s moveStep) {
	if _, dup := stepWants[step]; dup {
		panic("agent: move step " + step + " registered twice")
	}
	stepWants[step] = s
}

// stepWants is every step this agent works, by name.
var stepWants = map[string]moveStep{
	etcdschema.MovePrep:         {status: etcdschema.MigrationPreMigrating, onDest: true},
	etcdschema.MoveOut:          {status: etcdschema.MigrationMigrating, onDest: false},
	etcdschema.MoveFinish:       {status: etcdschema.MigrationPostMigrating, onDest: true},
	etcdschema.MoveConfirm:      {status: etcdschema.MigrationConfirming, onDest: false},
	etcdschema.MoveRevert:       {status: etcdschema.MigrationReverting, onDest: true},
	etcdschema.MoveRevertFinish: {status: etcdschema.MigrationReverting, onDest: false},
}

func (a *Agent) move(ctx context.Context, ev informer.Event, b *etcdschema.Build) error {
	if b.Move == nil {
		a.log.Error("move cast without a move step, ending it", "instance", b.InstanceUUID)
		return a.endCast(ctx, ev, nil)
	}
	log := a.log.With("instance", b.InstanceUUID, "migration", b.Move.MigrationUUID, "step", b.Move.Step)
	if want, ok := stepWants[b.Move.Step]; ok && want.noMigration {
		return want.run(a, ctx, ev, b, nil)
	}
	rd, err := a.readMove(ctx, b)
	if err != nil {
		return err
	}
	want, known := stepWants[b.Move.Step]
	host := ""
	if rd.mig != nil {
		host = rd.mig.SourceHost
		if want.onDest {
			host = rd.mig.DestHost
		}
	}
	if !known || rd.mig == nil || (!want.settled && (rd.inst == nil || rd.inst.MigrationUUID != rd.mig.UUID)) ||
		rd.mig.Status != want.status || host != a.cfg.Host {
		// Deleted, or the move went on without this cast (a step done
		// before a restart, a delete): nothing to do here.
		log.Info("move cast is stale, ending it")
		return a.endCast(ctx, ev, nil)
	}
	if want.run != nil {
		return want.run(a, ctx, ev, b, rd)
	}
	m := moverOf(a.driver)
	testhook.Pause(ctx, "agent.before-move-"+b.Move.Step, b.InstanceUUID)
	// Driver calls run without the caller's cancellation, as builds do:
	// a step that started is finished and recorded.
	dctx := context.WithoutCancel(ctx)
	switch b.Move.Step {
	case etcdschema.MovePrep:
		return a.movePrep(ctx, ev, b, rd, m.PrepareMove(dctx, b))
	case etcdschema.MoveOut:
		if err := m.StopForMove(dctx, b.InstanceUUID); err != nil {
			return fmt.Errorf("stop %s for its move: %w", b.InstanceUUID, err)
		}
		return a.moveOn(ctx, ev, b, rd, etcdschema.MigrationPostMigrating, etcdschema.TaskResizeMigrated,
			etcdschema.MoveFinish, rd.mig.DestHost, nil)
	case etcdschema.MoveFinish:
		return a.moveFinish(ctx, ev, b, rd, m.FinishMove(dctx, b))
	case etcdschema.MoveConfirm:
		return a.moveConfirm(ctx, ev, b, rd, m)
	case etcdschema.MoveRevert:
		if err := a.driver.Destroy(dctx, b.InstanceUUID); err != nil {
			return fmt.Errorf("destroy %s on its destination for a revert: %w", b.InstanceUUID, err)
		}
		var ops []clientv3.Op
		if rd.mig.DestHost != rd.mig.SourceHost {
			ops = append(ops, clientv3.OpDelete(a.keys.HostInstance(a.cfg.Host, b.InstanceUUID)))
		}
		return a.moveOn(ctx, ev, b, rd, etcdschema.MigrationReverting, etcdschema.TaskResizeReverting,
			etcdschema.MoveRevertFinish, rd.mig.SourceHost, ops)
	default: // MoveRevertFinish
		return a.moveRevertFinish(ctx, ev, b, rd, m)
	}
}

func (a *Agent) readMove(ctx context.Context, b *etcdschema.Build) (*moveRead, error) {
	k := a.keys
	ikey, mkey := k.CellInstance(b.Cell, b.InstanceUUID), k.Migration(b.Cell, b.Move.MigrationUUID)
	resp, err := a.cli.Txn(ctx).Then(clientv3.OpGet(ikey), clientv3.OpGet(mkey)).Commit()
	if err != nil {
		return nil, fmt.Errorf("read move of %s: %w", b.InstanceUUID, err)
	}
	rd := &moveRead{}
	if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) == 1 {
		rd.inst = &etcdschema.Instance{}
		if err := etcdschema.Decode(ikey, kvs[0].Value, rd.inst); err != nil {
			return nil, err
		}
		rd.instRev = kvs[0].ModRevision
	}
	if kvs := resp.Responses[1].GetResponseRange().Kvs; len(kvs) == 1 {
		rd.mig = &etcdschema.Migration{}
		if err := etcdschema.Decode(mkey, kvs[0].Value, rd.mig); err != nil {
			return nil, err
		}
		rd.mgRev = kvs[0].ModRevision
	}
	return rd, nil
}

// movePrep records the destination's answer: on to the source, or a
// failure (the destination's claim freed first) retried by the cell
// conductor on an alternate, or, not reschedulable, the move in error
// with the server back on its source.
func (a *Agent) movePrep(ctx context.Context, ev informer.Event, b *etcdschema.Build, rd *moveRead, prepErr error) error {
	if prepErr == nil {
		return a.moveOn(ctx, ev, b, rd, etcdschema.MigrationMigrating, etcdschema.TaskResizeMigrating,
			etcdschema.MoveOut, rd.mig.SourceHost, nil)
	}
	be := asBuildError(prepErr)
	if err := a.freeClaim(ctx, b.InstanceUUID); err != nil {
		return err
	}
	now := time.Now().UTC()
	var ops []clientv3.Op
	if be.Reschedulable {
		retry := &etcdschema.Retry{InstanceUUID: b.InstanceUUID, Cell: b.Cell, FailedHost: a.cfg.Host,
			Reason: be.Reason, Build: *b, FiledAt: now}
		ops = []clientv3.Op{clientv3.OpPut(a.keys.Retry(b.Cell, b.InstanceUUID), etcdschema.MustEncode(retry))}
	} else {
		if err := a.moveBack(ctx, rd.mig.UUID, b.InstanceUUID); err != nil {
			return err
		}
		mig := *rd.mig
		mig.Done(b.Move.Step, a.cfg.Host, b.CastAt, now, prepErr)
		ops = records.FailedMove(a.keys, *rd.inst, mig, be.Reason, now)
	}
	ok, err := a.commitMove(ctx, ev, rd, ops, nil, "")
	if err == nil && ok {
		a.log.Info("move failed on its destination", "instance", b.InstanceUUID, "reason", be.Reason,
			"rescheduled", be.Reschedulable)
	}
	return err
}

// moveOn records a step done and casts the next one to host.
func (a *Agent) moveOn(ctx context.Context, ev informer.Event, b *etcdschema.Build, rd *moveRead, status, task, next, host string, ops []clientv3.Op) error {
	now := time.Now().UTC()
	mig, inst := *rd.mig, *rd.inst
	mig.Done(b.Move.Step, a.cfg.Host, b.CastAt, now, nil)
	mig.Status, mig.UpdatedAt = status, now
	inst.TaskState, inst.UpdatedAt = task, now
	ops = append(ops,
		clientv3.OpPut(a.keys.CellInstance(inst.Cell, inst.UUID), etcdschema.MustEncode(&inst)),
		clientv3.OpPut(a.keys.Migration(mig.Cell, mig.UUID), etcdschema.MustEncode(&mig)))
	cast := records.MoveCast(&inst, &mig, next, mig.RequestID, now)
	if next == etcdschema.MoveRevertFinish {
		cast.RequestID = mig.RevertRequestID
	}
	_, err := a.commitMove(ctx, ev, rd, ops, cast, host)
	return err
}

// moveFinish records the guest started on the destination: the server
// is VERIFY_RESIZE there with its new flavor, and the schedulers see it
// on this host. A failed start puts the server in ERROR (Nova's
// finish_resize), its allocations left for a delete to free.
func (a *Agent) moveFinish(ctx context.Context, ev informer.Event, b *etcdschema.Build, rd *moveRead, startErr error) error {
	now := time.Now().UTC()
	mig, inst := *rd.mig, *rd.inst
	mig.LandOnDest(&inst)
	inst.UpdatedAt, inst.TaskState = now, ""
	mig.Done(b.Move.Step, a.cfg.Host, b.CastAt, now, startErr)
	var ops []clientv3.Op
	if startErr != nil {
		mig.Status, mig.Error = etcdschema.MigrationError, startErr.Error()
		inst.Status = etcdschema.StatusError
		inst.Fault = &etcdschema.Fault{Code: 500, Message: startErr.Error(), Created: now}
	} else {
		mig.Status = etcdschema.MigrationFinished
		inst.Status, inst.Flavor, inst.Fault = etcdschema.StatusVerifyResize, mig.NewFlavor, nil
		ops = append(ops, a.instanceInfoOp(b.InstanceUUID, mig.NewFlavor, now)...)
	}
	mig.UpdatedAt = now
	ops = append(ops,
		clientv3.OpPut(a.keys.CellInstance(inst.Cell, inst.UUID), etcdschema.MustEncode(&inst)),
		clientv3.OpPut(a.keys.Migration(mig.Cell, mig.UUID), etcdschema.MustEncode(&mig)))
	ok, err := a.commitMove(ctx, ev, rd, ops, nil, "")
	if err != nil {
		return err
	}
	if !ok {
		// The server changed while the guest started (a delete, cast to
		// the source it still named): the guest here is nobody's.
		return a.dropGuest(ctx, b.InstanceUUID)
	}
	if startErr != nil {
		a.log.Warn("moved guest failed to start; server in ERROR", "instance", b.InstanceUUID, "error", startErr)
		return nil
	}
	a.log.Info("server moved, waiting for confirm or revert", "instance", b.InstanceUUID, "source", mig.SourceHost)
	return nil
}

// moveConfirm drops the stopped guest and frees the source's allocation
// (the migration's consumer): the server is ACTIVE on its destination.
func (a *Agent) moveConfirm(ctx context.Context, ev informer.Event, b *etcdschema.Build, rd *moveRead, m Mover) error {
	if err := m.ConfirmMove(context.WithoutCancel(ctx), b.InstanceUUID); err != nil {
		return fmt.Errorf("confirm move of %s: %w", b.InstanceUUID, err)
	}
	if err := a.freeClaim(ctx, rd.mig.UUID); err != nil {
		return err
	}
	now := time.Now().UTC()
	mig, inst := *rd.mig, *rd.inst
	mig.Done(b.Move.Step, a.cfg.Host, b.CastAt, now, nil)
	mig.Status, mig.UpdatedAt = etcdschema.MigrationConfirmed, now
	inst.Status, inst.TaskState, inst.MigrationUUID, inst.UpdatedAt = etcdschema.StatusActive, "", "", now
	ops := []clientv3.Op{
		clientv3.OpPut(a.keys.CellInstance(inst.Cell, inst.UUID), etcdschema.MustEncode(&inst)),
		clientv3.OpPut(a.keys.Migration(mig.Cell, mig.UUID), etcdschema.MustEncode(&mig))}
	if mig.SourceHost != mig.DestHost {
		ops = append(ops, clientv3.OpDelete(a.keys.HostInstance(a.cfg.Host, b.InstanceUUID)))
	}
	if inst.Group != "" {
		// The source's group place, kept while a revert could come back
		// to it, goes with its allocation.
		ops = append(ops, records.GroupMemberOn(a.keys, inst.Group, inst.UUID, mig.DestHost))
	}
	ops = append(ops, clientv3.OpDelete(a.keys.MigrationMapping(mig.UUID)))
	ok, err := a.commitMove(ctx, ev, rd, ops, nil, "")
	if err == nil && ok {
		a.log.Info("move confirmed", "instance", b.InstanceUUID, "host", inst.Host)
	}
	return err
}

// moveRevertFinish gives the instance its source allocation back (the
// destination's claim overwritten), starts the guest again with the old
// flavor and makes the server ACTIVE here.
func (a *Agent) moveRevertFinish(ctx context.Context, ev informer.Event, b *etcdschema.Build, rd *moveRead, m Mover) error {
	if err := a.moveBack(ctx, rd.mig.UUID, b.InstanceUUID); err != nil {
		return err
	}
	startErr := m.RevertMove(context.WithoutCancel(ctx), b)
	now := time.Now().UTC()
	mig, inst := *rd.mig, *rd.inst
	mig.LandOnSource(&inst)
	inst.Flavor, inst.TaskState, inst.MigrationUUID, inst.UpdatedAt = mig.OldFlavor, "", "", now
	mig.Done(b.Move.Step, a.cfg.Host, b.CastAt, now, startErr)
	mig.Status, mig.UpdatedAt = etcdschema.MigrationReverted, now
	var ops []clientv3.Op
	if startErr != nil {
		inst.Status = etcdschema.StatusError
		inst.Fault = &etcdschema.Fault{Code: 500, Message: startErr.Error(), Created: now}
	} else {
		inst.Status, inst.Fault = etcdschema.StatusActive, nil
		ops = a.instanceInfoOp(b.InstanceUUID, mig.OldFlavor, now)
	}
	ops = append(ops,
		clientv3.OpPut(a.keys.CellInstance(inst.Cell, inst.UUID), etcdschema.MustEncode(&inst)),
		clientv3.OpPut(a.keys.Migration(mig.Cell, mig.UUID), etcdschema.MustEncode(&mig)),
		clientv3.OpDelete(a.keys.MigrationMapping(mig.UUID)))
	ok, err := a.commitMove(ctx, ev, rd, ops, nil, "")
	if err != nil {
		return err
	}
	if !ok {
		return a.dropGuest(ctx, b.InstanceUUID)
	}
	a.log.Info("move reverted", "instance", b.InstanceUUID, "host", inst.Host, "error", startErr)
	return nil
}

// moveBack hands the migration's allocation (the source's) back to the
// instance; a move already made back is no error.
func (a *Agent) moveBack(ctx context.Context, migration, instance string) error {
	p, ok := a.placement.(moveAllocator)
	if !ok {
		return fmt.Errorf("move allocations of %s back to %s: placement cannot move allocations", migration, instance)
	}
	if _, err := p.MoveAllocations(ctx, migration, instance); err != nil && !errors.Is(err, placement.ErrNotFound) {
		return err
	}
	return nil
}

// instanceInfoOp is the schedulers' view of the instance on this host
// (seed isolate-scheduler-db: updated when a resize finishes).
func (a *Agent) instanceInfoOp(uuid string, f etcdschema.Flavor, now time.Time) []clientv3.Op {
	if !a.cfg.TrackInstanceChanges {
		return nil
	}
	info := &etcdschema.InstanceInfo{UUID: uuid, Host: a.cfg.Host, FlavorID: f.ID, Flavor: f.Name,
		State: "active", UpdatedAt: now}
	return []clientv3.Op{clientv3.OpPut(a.keys.HostInstance(a.cfg.Host, uuid), etcdschema.MustEncode(info))}
}

// dropGuest destroys a guest this host started for a move the server
// left meanwhile.
func (a *Agent) dropGuest(ctx context.Context, uuid string) error {
	if err := a.driver.Destroy(context.WithoutCancel(ctx), uuid); err != nil {
		return fmt.Errorf("destroy %s, whose move was superseded: %w", uuid, err)
	}
	a.log.Warn("move superseded (the server changed meanwhile); local guest destroyed", "instance", uuid)
	return nil
}

// commitMove applies ops, casts next to host (nil: none) and ends this
// cast, if the cast, the instance and the migration are unchanged. A next
// cast to this same host replaces this one at its key.
func (a *Agent) commitMove(ctx context.Context, ev informer.Event, rd *moveRead, ops []clientv3.Op, next *etcdschema.Build, host string) (bool, error) {
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
		return false, fmt.Errorf("record move step of %s: %w", ev.Key, err)
	}
	if !resp.Succeeded {
		// The server or its migration changed (a delete): the chain
		// stops here, and so does this cast.
		return false, a.endCast(ctx, ev, nil)
	}
	return true, nil
}

// dropMove frees what a deleted server's move in flight holds: the
// migration's consumer (the source's allocation) and the source's
// instance info, returned as ops for the delete's transaction.
func (a *Agent) dropMove(ctx context.Context, b *etcdschema.Build) ([]clientv3.Op, error) {
	if err := a.freeClaim(ctx, b.Move.MigrationUUID); err != nil {
		return nil, err
	}
	rd, err := a.readMove(ctx, b)
	if err != nil {
		return nil, err
	}
	ops := []clientv3.Op{clientv3.OpDelete(a.keys.MigrationMapping(b.Move.MigrationUUID))}
	if rd.mig == nil || rd.mig.SourceHost == a.cfg.Host {
		return ops, nil
	}
	return append(ops, clientv3.OpDelete(a.keys.HostInstance(rd.mig.SourceHost, b.InstanceUUID))), nil
}
