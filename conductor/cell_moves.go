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
	k := c.cfg.Keys
	uuid := retry.InstanceUUID
	migUUID := retry.Build.Move.MigrationUUID
	log := c.log.With("instance", uuid, "migration", migUUID)
	ikey, mkey := k.CellInstance(c.cfg.Cell, uuid), k.Migration(c.cfg.Cell, migUUID)
	resp, err := c.cfg.Client.Txn(ctx).Then(clientv3.OpGet(ikey), clientv3.OpGet(mkey)).Commit()
	if err != nil {
		return fmt.Errorf("read move of %s: %w", uuid, err)
	}
	ikv, mkv := resp.Responses[0].GetResponseRange().Kvs, resp.Responses[1].GetResponseRange().Kvs
	var inst etcdschema.Instance
	var mig etcdschema.Migration
	if len(ikv) == 1 {
		if err := etcdschema.Decode(ikey, ikv[0].Value, &inst); err != nil {
			return err
		}
	}
	if len(mkv) == 1 {
		if err := etcdschema.Decode(mkey, mkv[0].Value, &mig); err != nil {
			return err
		}
	}
	if len(ikv) == 0 || len(mkv) == 0 || inst.MigrationUUID != migUUID || mig.Status != etcdschema.MigrationPreMigrating {
		log.Info("move retry no longer current (server deleted or move settled), dropping it")
		return c.finish(ctx, it, nil)
	}
	instRev, migRev := ikv[0].ModRevision, mkv[0].ModRevision
	// The agent freed its claim before filing the retry: a claim the
	// instance holds now is a dead conductor's, and we hold the retry.
	if err := c.cfg.Placement.DeleteAllocations(ctx, uuid); err != nil && !errors.Is(err, placement.ErrNotFound) {
		return fmt.Errorf("free stale claim of %s: %w", uuid, err)
	}
	noteRetryFailure(&mig, etcdschema.MovePrep, retry)
	tx := migrationRetryTxn{c: c, it: it, uuid: uuid, ikey: ikey, mkey: mkey, instRev: instRev, migRev: migRev, what: "move"}
	// As a build's retry: an alternate passed the group's filter when the
	// move was scheduled, but members may have moved since.
	sel, rest, claimed, err := c.claimAlternate(ctx, log, uuid, inst.Group, inst.ProjectID, inst.UserID,
		mig.Remaining, len(mig.Attempts), mig.MaxAttempts)
	mig.Remaining = rest
	if err != nil {
		return fmt.Errorf("the move of %s: %w", uuid, err)
	}
	if claimed {
		testhook.Pause(ctx, "cellconductor.before-move-commit", uuid)
		return tx.castToAlternate(ctx, log, &inst, &mig, sel, etcdschema.MovePrep, retry)
	}

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
