package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/go-hclog"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/etcdschema/records"
	"github.com/berth-project/berth/internal/informer"
	"github.com/berth-project/berth/internal/metrics"
	"github.com/berth-project/berth/internal/rawtxn"
	"github.com/berth-project/berth/placement"
)

// buildsHandler feeds casts under the host's builds prefix to the agent.
// A cast stays in etcd until the agent's final transaction for it deletes
// it, so a restarted agent finds its unfinished work on its first list.
type buildsHandler struct{ a *Agent }

func (h buildsHandler) Reset(kvs []informer.Event, _ int64) {
	for _, kv := range kvs {
		h.a.offer(kv)
	}
}

func (h buildsHandler) Apply(evs []informer.Event) {
	for _, ev := range evs {
		if !ev.Deleted {
			h.a.offer(ev)
		}
	}
}

// offer records the latest cast for an instance. Casts for one instance
// are worked one at a time, newest last: a delete cast overwrites a build
// cast at the same key, and the build's final transaction, which compares
// the cast's revision, then does nothing.
func (a *Agent) offer(ev informer.Event) {
	id, ok := etcdschema.LastSegment(ev.Key, a.own.builds)
	if !ok {
		return
	}
	a.mu.Lock()
	if cur, ok := a.pending[id]; ok && cur.Revision >= ev.Revision {
		a.mu.Unlock()
		return
	}
	a.pending[id] = ev
	a.mu.Unlock()
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// dispatch starts work for pending casts, at most max_concurrent_builds at
// once and one per instance.
func (a *Agent) dispatch(ctx context.Context) {
	for {
		a.mu.Lock()
		var next []informer.Event
		for id, ev := range a.pending {
			if !a.inFlight[id] {
				next = append(next, ev)
				delete(a.pending, id)
				a.inFlight[id] = true
			}
		}
		a.mu.Unlock()
		for _, ev := range next {
			select {
			case a.sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			a.wg.Add(1)
			go func(ev informer.Event) {
				defer a.wg.Done()
				defer func() { <-a.sem }()
				a.work1(ctx, ev)
				id, _ := etcdschema.LastSegment(ev.Key, a.own.builds)
				a.mu.Lock()
				delete(a.inFlight, id)
				a.mu.Unlock()
				select { // a newer cast may be waiting for this one
				case a.wake <- struct{}{}:
				default:
				}
			}(ev)
		}
		select {
		case <-ctx.Done():
			return
		case <-a.wake:
		}
	}
}

func (a *Agent) work1(ctx context.Context, ev informer.Event) {
	var b etcdschema.Build
	if err := etcdschema.Decode(ev.Key, ev.Value, &b); err != nil {
		a.log.Error("unreadable cast left in place for an operator", "key", ev.Key, "error", err)
		return
	}
	// The cast's logger is made only to log a failure: a build that works
	// (nearly all) logs once, in build, with its own keys.
	log := func() hclog.Logger {
		return a.log.With("instance", b.InstanceUUID, "op", b.Op, "request_id", b.RequestID)
	}
	var err error
	for try := 0; ; try++ {
		switch b.Op {
		case etcdschema.OpBuild:
			err = a.build(ctx, ev, &b)
		case etcdschema.OpDelete:
			err = a.destroy(ctx, ev, &b)
		case etcdschema.OpMove:
			err = a.move(ctx, ev, &b)
		default:
			log().Error("unknown cast op left in place for an operator")
			return
		}
		if err == nil || ctx.Err() != nil {
			break
		}
		// etcd hiccups: retry with back-off; the cast is still in etcd, so a
		// restart would pick it up too.
		log().Warn("cast failed, retrying", "error", err, "try", try)
		select {
		case <-time.After(min(time.Duration(1<<min(try, 6))*100*time.Millisecond, 5*time.Second)):
		case <-ctx.Done():
		}
	}
	if err != nil && ctx.Err() == nil {
		log().Error("cast failed", "error", err)
	}
}

// build spawns the instance and records the outcome in one transaction
// that also ends the cast.
func (a *Agent) build(ctx context.Context, ev informer.Event, b *etcdschema.Build) error {
	instKey := a.keys.CellInstance(b.Cell, b.InstanceUUID)
	inst, instRev, err := a.castInstance(ctx, ev, b, instKey)
	if err != nil {
		return err
	}
	if done, err := a.buildNotWanted(ctx, ev, b, inst); done {
		return err
	}
	// Spawning runs without the caller's cancellation: a build that started
	// finishes (or fails) even when the agent is asked to stop, so its
	// outcome is recorded rather than left half done.
	spawnErr := a.driver.Spawn(context.WithoutCancel(ctx), b)
	if spawnErr != nil {
		a.noteBuildResult(ctx, false)
		_ = a.driver.Destroy(context.WithoutCancel(ctx), b.InstanceUUID)
		// Free our claim first: a retry claims the alternate's resources, and a
		// final failure must leave nothing allocated. Freeing is idempotent, so
		// a crash before the transaction below just repeats it.
		if err := a.freeClaim(ctx, b.InstanceUUID); err != nil {
			return err
		}
	}
	for {
		out, err := a.recordBuild(ctx, ev, b, instKey, inst, instRev, spawnErr)
		if err != nil || out.ok {
			return err
		}
		if !out.castSame {
			if spawnErr != nil {
				return nil // a newer cast (a delete) or none: nothing of ours runs
			}
			return a.buildSuperseded(ctx, ev, b)
		}
		// Only the instance changed since it was written or read (a rename,
		// or the copy the cast carries was older than the record): decide
		// again on the record as it is now.
		inst, instRev = out.inst, out.instRev
		if done, err := a.buildNotWanted(ctx, ev, b, inst); done {
			if spawnErr == nil && !builtHere(inst, a.cfg.Host) {
				if derr := a.driver.Destroy(context.WithoutCancel(ctx), b.InstanceUUID); derr != nil {
					return fmt.Errorf("destroy %s, no longer ours to build: %w", b.InstanceUUID, derr)
				}
			}
			return err
		}
	}
}

// castInstance is the instance a build cast is for, with the mod
// revision the outcome transaction compares: the copy the cast carries
// (written in the cast's own transaction, so at the cast's revision:
// docs/flows.md, R4), else the record read from etcd (a cast an older
// Berth wrote, or one written without it).
func (a *Agent) castInstance(ctx context.Context, ev informer.Event, b *etcdschema.Build, instKey string) (*etcdschema.Instance, int64, error) {
	if !b.CarriesInstance() {
		return a.readInstance(ctx, instKey)
	}
	inst, err := b.CarriedInstance(instKey)
	if err != nil {
		return nil, 0, fmt.Errorf("instance carried in %s: %w", ev.Key, err)
	}
	return inst, ev.Revision, nil
}

// builtHere reports whether inst is ACTIVE on host: built before.
func builtHere(inst *etcdschema.Instance, host string) bool {
	return inst != nil && inst.Status == etcdschema.StatusActive && inst.Host == host
}

// buildNotWanted ends the cast without building when inst (nil: deleted)
// is not an instance to build here, reporting done true.
func (a *Agent) buildNotWanted(ctx context.Context, ev informer.Event, b *etcdschema.Build, inst *etcdschema.Instance) (done bool, err error) {
	switch {
	case inst == nil:
		// Deleted before we got to it: nothing to build, free any claim.
		if err := a.freeClaim(ctx, b.InstanceUUID); err != nil {
			return true, err
		}
		return true, a.endCast(ctx, ev, nil)
	case builtHere(inst, a.cfg.Host):
		return true, a.endCast(ctx, ev, nil) // built before a restart; only the cast was left
	case inst.Host != a.cfg.Host:
		// A cast is written in one transaction with the instance naming
		// its host; an instance naming another host (or none) has moved
		// on — its cast here was taken back or replaced while this event
		// waited. Building it would run a second copy and mark the
		// instance ACTIVE where it is not; the claim is the new host's.
		a.log.Info("cast is stale: the instance names another host; not building", "instance", b.InstanceUUID,
			"instance_host", inst.Host)
		return true, a.endCast(ctx, ev, nil)
	}
	return false, nil
}

// recordBuild writes a build's outcome (spawnErr nil: ACTIVE; else a
// reschedule or ERROR) over inst, ending the cast, if neither the cast
// nor the instance changed.
func (a *Agent) recordBuild(ctx context.Context, ev informer.Event, b *etcdschema.Build, instKey string,
	inst *etcdschema.Instance, instRev int64, spawnErr error) (castOutcome, error) {
	k := a.keys
	now := time.Now().UTC()
	if spawnErr == nil {
		inst.Status, inst.TaskState, inst.Fault, inst.UpdatedAt = etcdschema.StatusActive, "", nil, now
		ops := make([]*pb.RequestOp, 0, 4)
		ops = append(ops, rawtxn.PutBytes(instKey, etcdschema.MustEncodeBytes(inst)))
		if len(b.Alternates) == 0 {
			// A cast without its alternates: an older Berth stored them
			// in a key of their own, which served its purpose now.
			ops = append(ops, rawtxn.Delete(k.Alternates(b.InstanceUUID)))
		}
		if a.cfg.TrackInstanceChanges {
			info := &etcdschema.InstanceInfo{UUID: b.InstanceUUID, Host: a.cfg.Host, FlavorID: b.Flavor.ID,
				Flavor: b.Flavor.Name, State: "active", UpdatedAt: now}
			ops = append(ops, rawtxn.PutBytes(k.HostInstance(a.cfg.Host, b.InstanceUUID), etcdschema.MustEncodeBytes(info)))
		}
		out, err := a.endCastIf(ctx, ev, instKey, instRev, ops)
		if err == nil && out.ok {
			a.cfg.Metrics.Build(metrics.BuildActive)
			a.log.Info("instance active", "instance", b.InstanceUUID, "attempt", b.Attempt, "request_id", b.RequestID)
			a.noteBuildResult(ctx, true)
		}
		return out, err
	}
	be := asBuildError(spawnErr)
	if be.Reschedulable {
		// The retry carries the cast (its alternates with it) but not its
		// copy of the instance: the cell conductor reads the record.
		rb := *b
		rb.Instance = nil
		retry := &etcdschema.Retry{InstanceUUID: b.InstanceUUID, Cell: b.Cell, FailedHost: a.cfg.Host,
			Reason: be.Reason, Build: rb, FiledAt: now}
		inst.Status, inst.TaskState, inst.Host, inst.Node, inst.UpdatedAt =
			etcdschema.StatusBuild, etcdschema.TaskScheduling, "", "", now
		out, err := a.endCastIf(ctx, ev, instKey, instRev, []*pb.RequestOp{
			rawtxn.PutBytes(instKey, etcdschema.MustEncodeBytes(inst)),
			rawtxn.PutBytes(k.Retry(b.Cell, b.InstanceUUID), etcdschema.MustEncodeBytes(retry)),
		})
		if err == nil && out.ok {
			a.cfg.Metrics.Build(metrics.BuildRescheduled)
			a.log.Info("build failed, filed a reschedule", "instance", b.InstanceUUID, "reason", be.Reason, "request_id", b.RequestID)
		}
		return out, err
	}
	inst.Status, inst.TaskState, inst.UpdatedAt = etcdschema.StatusError, "", now
	inst.Fault = &etcdschema.Fault{Code: 500, Message: be.Reason, Created: now}
	out, err := a.endCastIf(ctx, ev, instKey, instRev, []*pb.RequestOp{rawtxn.PutBytes(instKey, etcdschema.MustEncodeBytes(inst))})
	if err == nil && out.ok {
		a.cfg.Metrics.Build(metrics.BuildFailed)
		a.log.Warn("build failed, not reschedulable", "instance", b.InstanceUUID, "reason", be.Reason, "request_id", b.RequestID)
	}
	return out, err
}

// buildSuperseded handles a build whose outcome transaction found its cast
// or instance changed. A newer cast (a delete) that replaced it is worked
// next and destroys what we made. A cast that is gone was taken back: the
// leader rescheduled the build after this host read down (a partition
// that outlived service_down_time and down_host_grace), so the instance
// is being built elsewhere and what runs here is an orphan, destroyed now
// rather than left to the next start-up reconciliation.
func (a *Agent) buildSuperseded(ctx context.Context, ev informer.Event, b *etcdschema.Build) error {
	resp, err := a.cli.Get(ctx, ev.Key, clientv3.WithKeysOnly())
	if err != nil {
		return fmt.Errorf("read cast %s: %w", ev.Key, err)
	}
	if len(resp.Kvs) > 0 {
		a.log.Info("build outcome superseded by a newer cast", "instance", b.InstanceUUID)
		return nil
	}
	if err := a.driver.Destroy(context.WithoutCancel(ctx), b.InstanceUUID); err != nil {
		return fmt.Errorf("destroy %s, whose cast was taken back: %w", b.InstanceUUID, err)
	}
	a.log.Warn("build outcome dropped: the cast was taken back while building (host read down); local instance destroyed",
		"instance", b.InstanceUUID)
	return nil
}

// destroy deletes the instance: driver, claim, then every record, in one
// transaction that ends the cast.
func (a *Agent) destroy(ctx context.Context, ev informer.Event, b *etcdschema.Build) error {
	k := a.keys
	if err := a.driver.Destroy(ctx, b.InstanceUUID); err != nil {
		return fmt.Errorf("destroy %s: %w", b.InstanceUUID, err)
	}
	if err := a.freeClaim(ctx, b.InstanceUUID); err != nil {
		return err
	}
	ops := records.DeleteInstance(k, b.Cell, a.cfg.Host, b.InstanceUUID, b.ProjectID)
	if b.Move != nil {
		// A move in flight: its consumer holds the source's allocation,
		// and the source may still report the instance.
		more, err := a.dropMove(ctx, b)
		if err != nil {
			return err
		}
		ops = append(ops, more...)
	}
	err := a.endCast(ctx, ev, ops)
	if err == nil {
		a.log.Info("instance deleted", "instance", b.InstanceUUID)
	}
	return err
}

func (a *Agent) freeClaim(ctx context.Context, uuid string) error {
	if err := a.placement.DeleteAllocations(ctx, uuid); err != nil && !errors.Is(err, placement.ErrNotFound) {
		return fmt.Errorf("free allocations of %s: %w", uuid, err)
	}
	return nil
}

func (a *Agent) readInstance(ctx context.Context, key string) (*etcdschema.Instance, int64, error) {
	resp, err := a.cli.Get(ctx, key)
	if err != nil {
		return nil, 0, fmt.Errorf("read %s: %w", key, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, 0, nil
	}
	var inst etcdschema.Instance
	if err := etcdschema.Decode(key, resp.Kvs[0].Value, &inst); err != nil {
		return nil, 0, err
	}
	return &inst, resp.Kvs[0].ModRevision, nil
}

// endCast applies ops and deletes the cast if the cast is the one worked:
// the rare ends (a stale cast, a delete, a move's step), on clientv3's
// builders; a build's outcome is endCastIf's.
func (a *Agent) endCast(ctx context.Context, ev informer.Event, ops []clientv3.Op) error {
	_, err := a.cli.Txn(context.WithoutCancel(ctx)).If(clientv3.Compare(clientv3.ModRevision(ev.Key), "=", ev.Revision)).
		Then(append(ops, clientv3.OpDelete(ev.Key))...).Commit()
	if err != nil {
		return fmt.Errorf("record outcome of %s: %w", ev.Key, err)
	}
	return nil
}

// castOutcome is what an outcome transaction found: ok, it applied; else
// castSame says the cast is still the one worked (so the instance
// changed), and inst and instRev are the instance as it is then (nil:
// deleted).
type castOutcome struct {
	ok       bool
	castSame bool
	inst     *etcdschema.Instance
	instRev  int64
}

// endCastIf applies ops and deletes the cast, if the cast is the one we
// worked (not replaced by a newer one) and the instance record (instKey)
// is unchanged since we read it (its mod revision is
// instRev). When it does not apply, a read that follows gets the cast's
// revision and the instance, so the caller can tell which changed.
//
// That read is a round trip of its own rather than the transaction's
// Else branch: nearly every outcome applies, and an Else carried its two
// reads in every build's request, to be encoded, sent and decoded for
// nothing. Reading after the failed compare sees the cast and the
// instance as they are then, possibly newer than at the compare, which
// the caller handles as it would a change made just before it: a cast
// replaced or gone is superseded, an instance changed is decided again
// at its newest revision.
//
// It is one per build (W5), so it is built as etcd's messages (package
// rawtxn), without clientv3's per-compare cloning.
//
// When the instance's revision is the cast's (the hand-off or retry wrote
// both in one transaction: every build cast carrying its instance), the
// instance's compare alone stands for both: every writer that replaces
// or deletes a build cast writes the instance in the same transaction
// (delete: TaskDeleting with the delete cast; the leader's take-back: the
// instance unplaced with the Retry; a retry taken: the instance on its
// new host with the next cast; a gone instance: its delete), the move,
// shelve and unshelve casts are written only for instances out of BUILD
// (which only this transaction ends), and decommission refuses a host
// with casts. So the cast is unchanged whenever the instance is, and
// etcd need not read and decode the whole cast (~1.5 kB) for a compare.
func (a *Agent) endCastIf(ctx context.Context, ev informer.Event, instKey string, instRev int64, ops []*pb.RequestOp) (castOutcome, error) {
	cmps := []*pb.Compare{rawtxn.ModRevisionIs(instKey, instRev)}
	if instRev != ev.Revision {
		cmps = append(cmps, rawtxn.ModRevisionIs(ev.Key, ev.Revision))
	}
	r := &pb.TxnRequest{Compare: cmps, Success: append(ops, rawtxn.Delete(ev.Key))}
	ctx = context.WithoutCancel(ctx)
	resp, err := rawtxn.Commit(ctx, a.cli.KV, r)
	if err != nil {
		return castOutcome{}, fmt.Errorf("record outcome of %s: %w", ev.Key, err)
	}
	if resp.Succeeded {
		return castOutcome{ok: true}, nil
	}
	now, err := rawtxn.Commit(ctx, a.cli.KV, &pb.TxnRequest{Success: []*pb.RequestOp{
		rawtxn.Range(&pb.RangeRequest{Key: []byte(ev.Key), KeysOnly: true}), rawtxn.Get(instKey)}})
	if err != nil {
		return castOutcome{}, fmt.Errorf("read %s and %s after their outcome did not apply: %w", ev.Key, instKey, err)
	}
	castKVs := now.Responses[0].GetResponseRange().Kvs
	out := castOutcome{castSame: len(castKVs) == 1 && castKVs[0].ModRevision == ev.Revision}
	if instKVs := now.Responses[1].GetResponseRange().Kvs; out.castSame && len(instKVs) == 1 {
		var inst etcdschema.Instance
		if err := etcdschema.Decode(instKey, instKVs[0].Value, &inst); err != nil {
			return castOutcome{}, err
		}
		out.inst, out.instRev = &inst, instKVs[0].ModRevision
	}
	return out, nil
}

// noteBuildResult keeps the failed_builds count the BuildFailure weigher
// reads: +1 per failure, back to 0 on success; written only on change,
// and read only when this agent does not already know it is 0.
func (a *Agent) noteBuildResult(ctx context.Context, ok bool) {
	a.failedMu.Lock()
	defer a.failedMu.Unlock()
	if ok && a.failedBuilds == 0 {
		return
	}
	wrote := -1
	err := a.updateService(context.WithoutCancel(ctx), func(s *etcdschema.Service) {
		if ok {
			s.FailedBuilds = 0
		} else {
			s.FailedBuilds++
		}
		wrote = s.FailedBuilds
	})
	if err != nil {
		wrote = -1 // unknown: read it next time
		a.log.Warn("could not record build result", "error", err)
	}
	a.failedBuilds = wrote
}
