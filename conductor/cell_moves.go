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
	"github.com/berth-project/berth/internal/metrics"
	"github.com/berth-project/berth/internal/testhook"
	"github.com/berth-project/berth/internal/workqueue"
	"github.com/berth-project/berth/placement"
)

// A move whose destination failed its prep (seed return-alternate-hosts:
// "resize operations ... retries within the cell") is retried here on the
// migration's stored alternates, each claimed first, exactly as a build
// is, without asking the scheduler again. The source still runs the
// server and the migration's consumer still holds its allocation. With
// nothing left the source's allocation goes back to the instance, the
// migration ends in error with every attempt's reason, and the server is
// ACTIVE on its source (Nova's MaxRetriesExceeded in _cold_migrate).

// moveRetryHandler works a failed step's retry of one move kind.
type moveRetryHandler func(c *CellConductor, ctx context.Context, it workqueue.Item, retry *etcdschema.Retry) error

// moveRetryKinds are the retry handlers of the move kinds other than the
// cold moves (MoveStep.Kind), each added by an init in that kind's file.
var moveRetryKinds = map[string]moveRetryHandler{}

// registerMoveRetry adds the retry handler of a move kind.
func registerMoveRetry(kind string, h moveRetryHandler) {
	if _, dup := moveRetryKinds[kind]; dup || kind == "" {
		panic("conductor: move retry kind " + kind + " registered twice or empty")
	}
	moveRetryKinds[kind] = h
}

func (c *CellConductor) processMoveRetry(ctx context.Context, it workqueue.Item, retry *etcdschema.Retry) error {
	r, err := c.readMigrationRetry(ctx, retry, "move")
	if err != nil {
		return err
	}
	if !r.current() {
		r.log.Info("move retry no longer current (server deleted or move settled), dropping it")
		return c.finish(ctx, it, nil)
	}
	tx, handled, err := c.retryOnAlternate(ctx, it, retry, r, etcdschema.MovePrep, etcdschema.MovePrep,
		"cellconductor.before-move-commit")
	if handled || err != nil {
		return err
	}
	k, uuid, migUUID, inst, mig, log := c.cfg.Keys, r.uuid, r.migUUID, r.inst, r.mig, r.log

	// Nothing left: the source's allocation back to the instance, then
	// the migration in error and the server ACTIVE on its source.
	mover, ok := c.cfg.Placement.(MoveAllocator)
	if !ok {
		return fmt.Errorf("move retry %s: placement cannot move allocations", uuid)
	}
	if _, err := mover.MoveAllocations(ctx, migUUID, uuid); err != nil {
		return err
	}
	reasons, reason := exhausted("move", uuid, mig.Attempts)
	// FailedMove puts its group place back on the source alone.
	ok, err = tx.commit(ctx, records.FailedMove(k, inst, mig, reason, time.Now().UTC()))
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("move retry %s: instance or migration changed while ending the move", uuid)
	}
	c.cfg.Metrics.Reschedule(metrics.RescheduleExhausted)
	log.Warn("move failed on every host; server stays on its source", "attempts", len(mig.Attempts), "reasons", reasons)
	return nil
}

// noteRetryFailure records on mig the failed first step a retry
// reports (event, its host and reason), on the attempt the hand-off
// opened for that host or, when there is none, on a new one.
func noteRetryFailure(mig *etcdschema.Migration, event string, retry *etcdschema.Retry) {
	mig.Done(event, retry.FailedHost, retry.Build.CastAt, retry.FiledAt, errors.New(retry.Reason))
	if n := len(mig.Attempts); n > 0 && mig.Attempts[n-1].Host == retry.FailedHost && mig.Attempts[n-1].Reason == "" {
		mig.Attempts[n-1].Reason = retry.Reason
	} else {
		mig.Attempts = append(mig.Attempts, etcdschema.Attempt{Host: retry.FailedHost, Reason: retry.Reason, At: retry.FiledAt})
	}
}

// exhausted is every attempt's "host: reason" and Nova's words for a
// what ("move", "evacuation") that failed on every host.
func exhausted(what, uuid string, attempts []etcdschema.Attempt) (reasons []string, reason string) {
	for _, a := range attempts {
		reasons = append(reasons, fmt.Sprintf("%s: %s", a.Host, a.Reason))
	}
	return reasons, fmt.Sprintf("Exceeded maximum number of retries. Exhausted all hosts available for retrying %s failures for instance %s. Attempts: %s",
		what, uuid, strings.Join(reasons, "; "))
}

// migrationRetryRead is what the retry of a migration-backed move (a
// cold move's prep, an evacuation's rebuild) reads first: the instance
// and the migration, each with its revision (0 when absent).
type migrationRetryRead struct {
	what, uuid, migUUID string
	ikey, mkey          string
	inst                etcdschema.Instance
	mig                 etcdschema.Migration
	instRev, migRev     int64
	log                 hclog.Logger
}

// readMigrationRetry reads a retry's instance and migration in one
// request; what names the move in errors ("move", "evacuation").
func (c *CellConductor) readMigrationRetry(ctx context.Context, retry *etcdschema.Retry, what string) (*migrationRetryRead, error) {
	k := c.cfg.Keys
	r := &migrationRetryRead{what: what, uuid: retry.InstanceUUID, migUUID: retry.Build.Move.MigrationUUID}
	r.log = c.log.With("instance", r.uuid, "migration", r.migUUID)
	r.ikey, r.mkey = k.CellInstance(c.cfg.Cell, r.uuid), k.Migration(c.cfg.Cell, r.migUUID)
	resp, err := c.cfg.Client.Txn(ctx).Then(clientv3.OpGet(r.ikey), clientv3.OpGet(r.mkey)).Commit()
	if err != nil {
		return nil, fmt.Errorf("read %s of %s: %w", what, r.uuid, err)
	}
	ikv, mkv := resp.Responses[0].GetResponseRange().Kvs, resp.Responses[1].GetResponseRange().Kvs
	if len(ikv) == 1 {
		if err := etcdschema.Decode(r.ikey, ikv[0].Value, &r.inst); err != nil {
			return nil, err
		}
		r.instRev = ikv[0].ModRevision
	}
	if len(mkv) == 1 {
		if err := etcdschema.Decode(r.mkey, mkv[0].Value, &r.mig); err != nil {
			return nil, err
		}
		r.migRev = mkv[0].ModRevision
	}
	return r, nil
}

// current is whether the retry still belongs to a move in prep: the
// server and its migration exist, the server still points at it, and it
// has not settled.
func (r *migrationRetryRead) current() bool {
	return r.instRev != 0 && r.migRev != 0 && r.inst.MigrationUUID == r.migUUID &&
		r.mig.Status == etcdschema.MigrationPreMigrating
}

// retryOnAlternate records the failed step (event) on the migration and
// casts step to the next stored alternate, claimed first, exactly as a
// build's retry (an alternate passed the group's filter when the move
// was scheduled, but members may have moved since); handled is false
// when none is left, and tx is then the guarded transaction that ends
// the move. pause names the test pause point before the cast ("" none).
func (c *CellConductor) retryOnAlternate(ctx context.Context, it workqueue.Item, retry *etcdschema.Retry,
	r *migrationRetryRead, event, step, pause string) (tx migrationRetryTxn, handled bool, err error) {
	// The agent freed its claim before filing the retry: a claim the
	// instance holds now is a dead conductor's, and we hold the retry.
	if err := c.cfg.Placement.DeleteAllocations(ctx, r.uuid); err != nil && !errors.Is(err, placement.ErrNotFound) {
		return tx, false, fmt.Errorf("free stale claim of %s: %w", r.uuid, err)
	}
	noteRetryFailure(&r.mig, event, retry)
	tx = migrationRetryTxn{c: c, it: it, uuid: r.uuid, ikey: r.ikey, mkey: r.mkey, instRev: r.instRev, migRev: r.migRev, what: r.what}
	sel, rest, claimed, err := c.claimAlternate(ctx, r.log, r.uuid, r.inst.Group, r.inst.ProjectID, r.inst.UserID,
		r.mig.Remaining, len(r.mig.Attempts), r.mig.MaxAttempts)
	r.mig.Remaining = rest
	if err != nil {
		return tx, false, fmt.Errorf("the %s of %s: %w", r.what, r.uuid, err)
	}
	if !claimed {
		return tx, false, nil
	}
	if pause != "" {
		testhook.Pause(ctx, pause, r.uuid)
	}
	return tx, true, tx.castToAlternate(ctx, r.log, &r.inst, &r.mig, sel, step, retry)
}

// migrationRetryTxn commits the outcome of a migration-backed move's
// retry (a cold move's prep, an evacuation's rebuild): ops and the
// retry's end, if the conductor still holds the retry and neither the
// instance nor the migration changed since it read them.
type migrationRetryTxn struct {
	c               *CellConductor
	it              workqueue.Item
	uuid            string
	ikey, mkey      string
	instRev, migRev int64
	what            string
}

func (t migrationRetryTxn) commit(ctx context.Context, ops []clientv3.Op) (bool, error) {
	held, err := t.c.queue.StillHeld(ctx, t.it)
	if err != nil {
		return false, err
	}
	resp, err := t.c.cfg.Client.Txn(ctx).If(held,
		clientv3.Compare(clientv3.ModRevision(t.ikey), "=", t.instRev),
		clientv3.Compare(clientv3.ModRevision(t.mkey), "=", t.migRev),
	).Then(append(ops, workqueue.FinishOps(t.it)...)...).Commit()
	if err != nil {
		return false, fmt.Errorf("%s retry %s: commit: %w", t.what, t.uuid, err)
	}
	return resp.Succeeded, nil
}

// castToAlternate hands the move to sel, an alternate already claimed
// for the instance: the migration names it as destination with a new
// attempt, and step is cast to it. A hand-off that lost to a change
// frees the claim it made.
func (t migrationRetryTxn) castToAlternate(ctx context.Context, log hclog.Logger, inst *etcdschema.Instance,
	mig *etcdschema.Migration, sel etcdschema.Selection, step string, retry *etcdschema.Retry) error {
	c, uuid := t.c, inst.UUID
	now := time.Now().UTC()
	mig.SetDestination(sel)
	mig.UpdatedAt = now
	mig.Attempts = append(mig.Attempts, etcdschema.Attempt{Host: sel.ServiceHost, At: now})
	cast := records.MoveCast(inst, mig, step, mig.RequestID, now)
	ok, err := t.commit(ctx, []clientv3.Op{
		clientv3.OpPut(t.mkey, etcdschema.MustEncode(mig)),
		clientv3.OpPut(c.cfg.Keys.Build(sel.ServiceHost, uuid), etcdschema.MustEncode(cast)),
	})
	if err != nil {
		return err // applied or not, the next holder frees a stale claim
	}
	if !ok {
		if derr := c.cfg.Placement.DeleteAllocations(context.WithoutCancel(ctx), uuid); derr != nil &&
			!errors.Is(derr, placement.ErrNotFound) {
			log.Error("could not free claim after a failed "+t.what+" retry hand-off", "error", derr)
		}
		return fmt.Errorf("%s retry %s: instance or migration changed during the hand-off", t.what, uuid)
	}
	c.cfg.Metrics.Reschedule(metrics.RescheduleCast)
	log.Info(t.what+" rescheduled on alternate", "host", sel.ServiceHost, "attempt", len(mig.Attempts),
		"failed_host", retry.FailedHost, "reason", retry.Reason)
	return nil
}
