package agent

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/etcdschema/records"
	"github.com/berth-project/berth/internal/informer"
)

// The destination's part of an evacuation (Nova's rebuild_instance with
// recreate=True): spawn the server's guest here from its image and
// flavor, then, in one transaction guarded by the cast, the instance and
// the migration, make the server ACTIVE on this host, the migration
// done and this host's instance info hold it (seed isolate-scheduler-db).
// The source's instance info is the source's to drop (an agent writes
// only its own host's keys): it does when it comes back and destroys
// its copy, which until then may still run there; the schedulers do not
// place on a down host meanwhile. The source's allocation (the
// migration's consumer) goes once the evacuation is recorded done: the
// same transaction asks the cell conductor to free it, which ends the
// migration's mapping. A failed spawn frees this host's claim and files a retry the
// cell conductor works on the next alternate (conductor/evacuate.go); a
// failure no other host can help ends the evacuation failed with the
// server ERROR on its source. The source's stale copy is destroyed when
// its agent comes back (evacuate_reconcile.go).

func init() {
	registerMoveStep(etcdschema.MoveEvacuateRebuild, moveStep{status: etcdschema.MigrationPreMigrating, onDest: true,
		run: (*Agent).evacuateRebuild})
	registerMoveStep(etcdschema.MoveEvacuateCleanup, moveStep{status: etcdschema.MigrationDone, onDest: false,
		settled: true, run: (*Agent).evacuateCleanup})
}

func (a *Agent) evacuateRebuild(ctx context.Context, ev informer.Event, b *etcdschema.Build, rd *moveRead) error {
	log := a.log.With("instance", b.InstanceUUID, "migration", rd.mig.UUID, "request_id", b.RequestID)
	dctx := context.WithoutCancel(ctx)
	spawnErr := a.driver.Spawn(dctx, b)
	now := time.Now().UTC()
	mig, inst := *rd.mig, *rd.inst
	if spawnErr == nil {
		mig.Done(etcdschema.EventEvacuateRebuild, a.cfg.Host, b.CastAt, now, nil)
		mig.Status, mig.UpdatedAt = etcdschema.MigrationDone, now
		mig.LandOnDest(&inst) // its DestHost is this host (move checked it)
		inst.Status, inst.TaskState, inst.MigrationUUID, inst.Fault, inst.UpdatedAt =
			etcdschema.StatusActive, "", "", nil, now
		// The source's part of the allocation goes with the evacuation
		// done: the cell conductor frees it (the source's provider is
		// not this agent's to write).
		free := *b
		free.Move = &etcdschema.MoveStep{MigrationUUID: mig.UUID, Step: etcdschema.MoveEvacuateFreeSource,
			Kind: etcdschema.MigrationTypeEvacuation}
		freeSource := &etcdschema.Retry{InstanceUUID: b.InstanceUUID, Cell: b.Cell, FailedHost: mig.SourceHost,
			Reason: "evacuated", Build: free, FiledAt: now}
		ops := append(a.instanceInfoOp(b.InstanceUUID, inst.Flavor, now),
			clientv3.OpPut(a.keys.CellInstance(inst.Cell, inst.UUID), etcdschema.MustEncode(&inst)),
			clientv3.OpPut(a.keys.Migration(mig.Cell, mig.UUID), etcdschema.MustEncode(&mig)),
			clientv3.OpPut(a.keys.Retry(b.Cell, b.InstanceUUID), etcdschema.MustEncode(freeSource)))
		ok, err := a.commitMove(ctx, ev, rd, ops, nil, "")
		if err != nil {
			return err
		}
		if !ok {
			// Deleted meanwhile: the guest started here is nobody's.
			return a.dropGuest(ctx, b.InstanceUUID)
		}
		log.Info("server evacuated", "source", mig.SourceHost)
		return nil
	}

	be := asBuildError(spawnErr)
	_ = a.driver.Destroy(dctx, b.InstanceUUID)
	if err := a.freeClaim(ctx, b.InstanceUUID); err != nil {
		return err
	}
	var ops []clientv3.Op
	if be.Reschedulable {
		retry := &etcdschema.Retry{InstanceUUID: b.InstanceUUID, Cell: b.Cell, FailedHost: a.cfg.Host,
			Reason: be.Reason, Build: *b, FiledAt: now}
		ops = []clientv3.Op{clientv3.OpPut(a.keys.Retry(b.Cell, b.InstanceUUID), etcdschema.MustEncode(retry))}
	} else {
		if err := a.moveBack(ctx, mig.UUID, b.InstanceUUID); err != nil {
			return err
		}
		mig.Done(etcdschema.EventEvacuateRebuild, a.cfg.Host, b.CastAt, now, spawnErr)
		ops = records.FailedEvacuation(a.keys, inst, mig, etcdschema.MigrationFailed, be.Reason, now)
	}
	ok, err := a.commitMove(ctx, ev, rd, ops, nil, "")
	if err != nil {
		return fmt.Errorf("record the failed rebuild of %s: %w", b.InstanceUUID, err)
	}
	if ok {
		log.Warn("evacuation rebuild failed here", "reason", be.Reason, "rescheduled", be.Reschedulable)
	}
	return nil
}
