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
// done, this host's instance info hold it and the source's not (the
// source is down and cannot follow; seed isolate-scheduler-db). The
// source's allocation (the migration's consumer) goes once that is
// recorded. A failed spawn frees this host's claim and files a retry the
// cell conductor works on the next alternate (conductor/evacuate.go); a
// failure no other host can help ends the evacuation failed with the
// server ERROR on its source. The source's stale copy is destroyed when
// its agent comes back (evacuate_reconcile.go).

func init() {
	registerMoveStep(etcdschema.MoveEvacuateRebuild, moveStep{status: etcdschema.MigrationPreMigrating, onDest: true,
		run: (*Agent).evacuateRebuild})
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
		inst.Host, inst.Node = a.cfg.Host, mig.DestNode
		inst.Status, inst.TaskState, inst.MigrationUUID, inst.Fault, inst.UpdatedAt =
			etcdschema.StatusActive, "", "", nil, now
		ops := append(a.instanceInfoOp(b.InstanceUUID, inst.Flavor, now),
			clientv3.OpPut(a.keys.CellInstance(inst.Cell, inst.UUID), etcdschema.MustEncode(&inst)),
			clientv3.OpPut(a.keys.Migration(mig.Cell, mig.UUID), etcdschema.MustEncode(&mig)),
			clientv3.OpDelete(a.keys.MigrationMapping(mig.UUID)))
		if mig.SourceHost != a.cfg.Host {
			ops = append(ops, clientv3.OpDelete(a.keys.HostInstance(mig.SourceHost, b.InstanceUUID)))
		}
		ok, err := a.commitMove(ctx, ev, rd, ops, nil, "")
		if err != nil {
			return err
		}
		if !ok {
			// Deleted meanwhile: the guest started here is nobody's.
			return a.dropGuest(ctx, b.InstanceUUID)
		}
		// The source's part of the allocation goes with the evacuation
		// done. Its mapping went above, so a free that fails here is an
		// orphan the leader's sweep frees.
		if err := a.freeClaim(ctx, mig.UUID); err != nil {
			log.Warn("evacuation done; could not free the source's allocation (the orphan sweep will)", "error", err)
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
