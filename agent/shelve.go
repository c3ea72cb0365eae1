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

// Shelving on a host (nova/compute/manager.py _shelve_instance,
// _shelve_offload_instance, start_instance, _unshelve_instance), each
// step one driver call and one transaction guarded by the cast and the
// instance record (so a step is done once, and a delete that replaced
// the cast stops it):
//
//	shelve_stop:    stop the guest (the driver keeps nothing: Berth has
//	                no snapshots, the server's image is what an unshelve
//	                spawns); SHELVED, still on this host with its
//	                allocation, or on to shelve_offload at once
//	                (shelved_offload_time 0)
//	shelve_offload: free the allocation and the host's instance info
//	                (seed isolate-scheduler-db), no host: SHELVED_OFFLOADED
//	shelve_start:   unshelve of a SHELVED server: spawn it again here
//	shelve_spawn:   unshelve of an offloaded server on the host the
//	                superconductor (or the cell conductor) claimed; a
//	                reschedulable failure frees the claim and files a
//	                retry on the next alternate (conductor/unshelve.go)

func init() {
	for _, s := range []struct {
		step string
		run  func(a *Agent, ctx context.Context, ev informer.Event, b *etcdschema.Build, in *etcdschema.Instance, rev int64) error
		// the instance's status and tasks in which the step is current
		status string
		tasks  []string
	}{
		{etcdschema.StepShelve, (*Agent).shelveStop, etcdschema.StatusActive, []string{etcdschema.TaskShelving}},
		{etcdschema.StepShelveOffload, (*Agent).shelveOffload, etcdschema.StatusShelved, []string{etcdschema.TaskShelvingOffloading}},
		{etcdschema.StepUnshelveStart, (*Agent).unshelveStart, etcdschema.StatusShelved, []string{etcdschema.TaskUnshelving}},
		{etcdschema.StepUnshelveSpawn, (*Agent).unshelveSpawn, etcdschema.StatusShelvedOffloaded,
			[]string{etcdschema.TaskUnshelving, etcdschema.TaskSpawning}},
	} {
		registerMoveStep(s.step, moveStep{noMigration: true,
			run: func(a *Agent, ctx context.Context, ev informer.Event, b *etcdschema.Build, _ *moveRead) error {
				key := a.keys.CellInstance(b.Cell, b.InstanceUUID)
				in, rev, err := a.readInstance(ctx, key)
				if err != nil {
					return err
				}
				if in == nil || in.Host != a.cfg.Host || in.Status != s.status || !oneOf(in.TaskState, s.tasks) {
					// Deleted, or the server went on without this cast.
					a.log.Info("shelve cast is stale, ending it", "instance", b.InstanceUUID, "step", s.step)
					return a.endCast(ctx, ev, nil)
				}
				return s.run(a, ctx, ev, b, in, rev)
			}})
	}
}

func oneOf(s string, list []string) bool {
	for _, x := range list {
		if s == x {
			return true
		}
	}
	return false
}

// shelveStop stops the guest: SHELVED on this host, then the offload at
// once (OffloadNow), by the leader after OffloadAfter, or never.
func (a *Agent) shelveStop(ctx context.Context, ev informer.Event, b *etcdschema.Build, in *etcdschema.Instance, rev int64) error {
	if err := a.driver.Destroy(context.WithoutCancel(ctx), b.InstanceUUID); err != nil {
		return fmt.Errorf("stop %s to shelve it: %w", b.InstanceUUID, err)
	}
	now := time.Now().UTC()
	st := etcdschema.ShelveState{}
	if in.Shelve != nil {
		st = *in.Shelve
	}
	st.ShelvedAt, st.ShelvedHost = &now, a.cfg.Host
	in.Shelve, in.Status, in.TaskState, in.UpdatedAt = &st, etcdschema.StatusShelved, "", now
	in.ActionEvent(etcdschema.ActionShelve, b.RequestID, etcdschema.EventShelve, a.cfg.Host, b.CastAt, now, nil)
	var ops []clientv3.Op
	var next *etcdschema.Build
	switch {
	case st.OffloadNow:
		in.TaskState = etcdschema.TaskShelvingOffloading
		next = records.ShelveCast(in, etcdschema.StepShelveOffload, b.RequestID, now)
	case st.OffloadAfter > 0:
		ops = append(ops, clientv3.OpPut(a.keys.ShelvedOffload(in.UUID), etcdschema.MustEncode(&etcdschema.ShelvedOffload{
			InstanceUUID: in.UUID, Cell: in.Cell, Host: a.cfg.Host, Due: now.Add(st.OffloadAfter)})))
	}
	ok, err := a.commitShelve(ctx, ev, in, rev, ops, next)
	if err == nil && ok {
		a.log.Info("server shelved", "instance", in.UUID, "offload_now", st.OffloadNow, "offload_after", st.OffloadAfter)
	}
	return err
}

// shelveOffload destroys the guest and frees what the server held here:
// its allocation (before the status changes, as Nova frees it before
// SHELVED_OFFLOADED so a client polling for it can use the room), the
// host's instance info and its server group place; no host, no node.
func (a *Agent) shelveOffload(ctx context.Context, ev informer.Event, b *etcdschema.Build, in *etcdschema.Instance, rev int64) error {
	if err := a.driver.Destroy(context.WithoutCancel(ctx), b.InstanceUUID); err != nil {
		return fmt.Errorf("destroy %s to offload it: %w", b.InstanceUUID, err)
	}
	if err := a.freeClaim(ctx, b.InstanceUUID); err != nil {
		return err
	}
	now := time.Now().UTC()
	st := etcdschema.ShelveState{}
	if in.Shelve != nil {
		st = *in.Shelve
	}
	if !st.OffloadNow {
		// Nova's shelve action has one event even when it offloads in
		// the same call; an offload of its own is shelveOffload's.
		in.ActionEvent(etcdschema.ActionShelveOffload, b.RequestID, etcdschema.EventShelveOffload, a.cfg.Host, b.CastAt, now, nil)
	}
	st.OffloadNow = false
	in.Shelve = &st
	in.Status, in.TaskState, in.Host, in.Node, in.UpdatedAt = etcdschema.StatusShelvedOffloaded, "", "", "", now
	ops := []clientv3.Op{clientv3.OpDelete(a.keys.HostInstance(a.cfg.Host, in.UUID)),
		clientv3.OpDelete(a.keys.ShelvedOffload(in.UUID))}
	if in.Group != "" {
		ops = append(ops, records.GroupMemberOn(a.keys, in.Group, in.UUID, ""))
	}
	ok, err := a.commitShelve(ctx, ev, in, rev, ops, nil)
	if err == nil && ok {
		a.log.Info("shelved server offloaded", "instance", in.UUID)
	}
	return err
}

// unshelveStart spawns a SHELVED server again on its host: ACTIVE, or
// SHELVED with the failure as its fault (Nova's start_instance reverts
// the task on an error).
func (a *Agent) unshelveStart(ctx context.Context, ev informer.Event, b *etcdschema.Build, in *etcdschema.Instance, rev int64) error {
	spawnErr := a.driver.Spawn(context.WithoutCancel(ctx), b)
	now := time.Now().UTC()
	in.ActionEvent(etcdschema.ActionUnshelve, b.RequestID, etcdschema.EventStartInstance, a.cfg.Host, b.CastAt, now, spawnErr)
	in.TaskState, in.UpdatedAt = "", now
	var ops []clientv3.Op
	if spawnErr != nil {
		_ = a.driver.Destroy(context.WithoutCancel(ctx), b.InstanceUUID)
		in.Fault = &etcdschema.Fault{Code: 500, Message: asBuildError(spawnErr).Reason, Created: now}
	} else {
		in.Status, in.Shelve, in.Fault = etcdschema.StatusActive, nil, nil
		ops = a.instanceInfoOp(in.UUID, in.Flavor, now)
	}
	ok, err := a.commitShelve(ctx, ev, in, rev, ops, nil)
	if err != nil {
		return err
	}
	if !ok {
		return a.dropGuest(ctx, b.InstanceUUID)
	}
	a.log.Info("shelved server started", "instance", in.UUID, "error", spawnErr)
	return nil
}

// unshelveSpawn spawns an offloaded server on the host claimed for it.
// Success: ACTIVE here. A reschedulable failure frees the claim and
// files a retry the cell conductor works on the next alternate; any
// other leaves the server SHELVED_OFFLOADED with the failure as its
// fault (Nova's _unshelve_instance frees the claim and clears the host).
func (a *Agent) unshelveSpawn(ctx context.Context, ev informer.Event, b *etcdschema.Build, in *etcdschema.Instance, rev int64) error {
	k := a.keys
	key := k.CellInstance(in.Cell, in.UUID)
	if in.TaskState != etcdschema.TaskSpawning {
		in.TaskState, in.UpdatedAt = etcdschema.TaskSpawning, time.Now().UTC()
		resp, err := a.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(ev.Key), "=", ev.Revision),
			clientv3.Compare(clientv3.ModRevision(key), "=", rev)).
			Then(clientv3.OpPut(key, etcdschema.MustEncode(in))).Commit()
		if err != nil {
			return fmt.Errorf("record spawning of %s: %w", in.UUID, err)
		}
		if !resp.Succeeded {
			return a.endCast(ctx, ev, nil) // replaced or changed: the next read decides
		}
		rev = resp.Header.Revision
	}
	spawnErr := a.driver.Spawn(context.WithoutCancel(ctx), b)
	now := time.Now().UTC()
	in.ActionEvent(etcdschema.ActionUnshelve, b.RequestID, etcdschema.EventUnshelve, a.cfg.Host, b.CastAt, now, spawnErr)
	in.UpdatedAt = now
	if spawnErr == nil {
		in.Status, in.TaskState, in.Shelve, in.Fault = etcdschema.StatusActive, "", nil, nil
		ops := a.instanceInfoOp(in.UUID, in.Flavor, now)
		if in.Group != "" {
			ops = append(ops, records.GroupMemberOn(k, in.Group, in.UUID, a.cfg.Host))
		}
		ok, err := a.commitShelve(ctx, ev, in, rev, ops, nil)
		if err != nil {
			return err
		}
		if !ok {
			return a.dropGuest(ctx, b.InstanceUUID)
		}
		a.log.Info("server unshelved", "instance", in.UUID, "attempt", b.Attempt)
		return nil
	}
	be := asBuildError(spawnErr)
	_ = a.driver.Destroy(context.WithoutCancel(ctx), b.InstanceUUID)
	if err := a.freeClaim(ctx, b.InstanceUUID); err != nil {
		return err
	}
	in.Host, in.Node = "", ""
	var ops []clientv3.Op
	if be.Reschedulable {
		in.TaskState = etcdschema.TaskUnshelving
		retry := &etcdschema.Retry{InstanceUUID: in.UUID, Cell: in.Cell, FailedHost: a.cfg.Host, Reason: be.Reason,
			Build: *b, FiledAt: now}
		ops = append(ops, clientv3.OpPut(k.Retry(in.Cell, in.UUID), etcdschema.MustEncode(retry)))
	} else {
		in.TaskState = ""
		in.Fault = &etcdschema.Fault{Code: 500, Message: be.Reason, Created: now}
		if in.Shelve != nil {
			in.Shelve.Attempts = append(in.Shelve.Attempts, etcdschema.Attempt{Host: a.cfg.Host, Reason: be.Reason, At: now})
			in.Shelve.Remaining = nil
		}
	}
	ok, err := a.commitShelve(ctx, ev, in, rev, ops, nil)
	if err == nil && ok {
		a.log.Info("unshelve failed on this host", "instance", in.UUID, "reason", be.Reason, "rescheduled", be.Reschedulable)
	}
	return err
}

// commitShelve writes in (read at rev) with ops, casts next to this
// host (nil: none) and ends this cast, if neither the cast nor the
// instance changed. A next cast replaces this one at its key.
func (a *Agent) commitShelve(ctx context.Context, ev informer.Event, in *etcdschema.Instance, rev int64,
	ops []clientv3.Op, next *etcdschema.Build) (bool, error) {
	key := a.keys.CellInstance(in.Cell, in.UUID)
	ops = append(ops, clientv3.OpPut(key, etcdschema.MustEncode(in)))
	if next != nil {
		ops = append(ops, clientv3.OpPut(ev.Key, etcdschema.MustEncode(next)))
	} else {
		ops = append(ops, clientv3.OpDelete(ev.Key))
	}
	resp, err := a.cli.Txn(context.WithoutCancel(ctx)).If(
		clientv3.Compare(clientv3.ModRevision(ev.Key), "=", ev.Revision),
		clientv3.Compare(clientv3.ModRevision(key), "=", rev)).Then(ops...).Commit()
	if err != nil {
		return false, fmt.Errorf("record shelve step of %s: %w", ev.Key, err)
	}
	if !resp.Succeeded {
		// Replaced (a delete) or changed: the chain stops here.
		return false, a.endCast(ctx, ev, nil)
	}
	return true, nil
}
