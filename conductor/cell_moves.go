package conductor

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

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
	mig.Done(etcdschema.MovePrep, retry.FailedHost, retry.Build.CastAt, retry.FiledAt, errors.New(retry.Reason))
	if n := len(mig.Attempts); n > 0 && mig.Attempts[n-1].Host == retry.FailedHost && mig.Attempts[n-1].Reason == "" {
		mig.Attempts[n-1].Reason = retry.Reason
	} else {
		mig.Attempts = append(mig.Attempts, etcdschema.Attempt{Host: retry.FailedHost, Reason: retry.Reason, At: retry.FiledAt})
	}
	commit := func(ops []clientv3.Op) (bool, error) {
		held, err := c.queue.StillHeld(ctx, it)
		if err != nil {
			return false, err
		}
		resp, err := c.cfg.Client.Txn(ctx).If(held,
			clientv3.Compare(clientv3.ModRevision(ikey), "=", instRev),
			clientv3.Compare(clientv3.ModRevision(mkey), "=", migRev),
		).Then(append(ops, workqueue.FinishOps(it)...)...).Commit()
		if err != nil {
			return false, fmt.Errorf("move retry %s: commit: %w", uuid, err)
		}
		return resp.Succeeded, nil
	}
	// As a build's retry: an alternate passed the group's filter when the
	// move was scheduled, but members may have moved since.
	sel, rest, claimed, err := c.claimAlternate(ctx, log, uuid, inst.Group, inst.ProjectID, inst.UserID,
		mig.Remaining, len(mig.Attempts), mig.MaxAttempts)
	mig.Remaining = rest
	if err != nil {
		return fmt.Errorf("the move of %s: %w", uuid, err)
	}
	if claimed {
		now := time.Now().UTC()
		mig.DestHost, mig.DestNode, mig.UpdatedAt = sel.ServiceHost, sel.Nodename, now
		if mig.DestNode == "" {
			mig.DestNode = sel.ServiceHost
		}
		mig.Attempts = append(mig.Attempts, etcdschema.Attempt{Host: sel.ServiceHost, At: now})
		cast := records.MoveCast(&inst, &mig, etcdschema.MovePrep, mig.RequestID, now)
		testhook.Pause(ctx, "cellconductor.before-move-commit", uuid)
		ok, err := commit([]clientv3.Op{
			clientv3.OpPut(mkey, etcdschema.MustEncode(&mig)),
			clientv3.OpPut(k.Build(sel.ServiceHost, uuid), etcdschema.MustEncode(cast)),
		})
		if err != nil {
			return err // applied or not, the next holder frees a stale claim
		}
		if !ok {
			if derr := c.cfg.Placement.DeleteAllocations(context.WithoutCancel(ctx), uuid); derr != nil &&
				!errors.Is(derr, placement.ErrNotFound) {
				log.Error("could not free claim after a failed move retry hand-off", "error", derr)
			}
			return fmt.Errorf("move retry %s: instance or migration changed during the hand-off", uuid)
		}
		c.cfg.Metrics.Reschedule(metrics.RescheduleCast)
		log.Info("move rescheduled on alternate", "host", sel.ServiceHost, "attempt", len(mig.Attempts),
			"failed_host", retry.FailedHost, "reason", retry.Reason)
		return nil
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
	var reasons []string
	for _, a := range mig.Attempts {
		reasons = append(reasons, fmt.Sprintf("%s: %s", a.Host, a.Reason))
	}
	reason := fmt.Sprintf("Exceeded maximum number of retries. Exhausted all hosts available for retrying move failures for instance %s. Attempts: %s",
		uuid, strings.Join(reasons, "; "))
	// FailedMove puts its group place back on the source alone.
	ok, err = commit(records.FailedMove(k, inst, mig, reason, time.Now().UTC()))
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
