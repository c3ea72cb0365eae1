package conductor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/metrics"
	"github.com/berth-project/berth/internal/testhook"
	"github.com/berth-project/berth/internal/workqueue"
	"github.com/berth-project/berth/placement"
	"github.com/berth-project/berth/scheduler"
)

// CellConductorConfig configures a cell conductor.
type CellConductorConfig struct {
	Client    *clientv3.Client
	Keys      etcdschema.Keys
	Cell      string
	Placement Allocations
	Holder    string
	Workers   int
	LeaseTTL  time.Duration
	// RankGrace and HolderIdleAfter tune how retries are spread over the
	// cell's conductors (workqueue.Config.Grace and IdleAfter; zero:
	// the defaults).
	RankGrace       time.Duration
	HolderIdleAfter time.Duration
	StealAfter      time.Duration // workqueue.Config.StealAfter; 0: never
	Log             hclog.Logger
	Metrics         *metrics.Metrics // nil: reschedules are not counted
}

// CellConductor retries failed builds inside its cell on the stored
// alternates, never calling back to the scheduler or superconductor.
type CellConductor struct {
	cfg   CellConductorConfig
	queue *workqueue.Queue
	log   hclog.Logger
}

// NewCellConductor builds one; Run starts it.
func NewCellConductor(cfg CellConductorConfig) *CellConductor {
	c := &CellConductor{cfg: cfg, log: cfg.Log.With("cell", cfg.Cell)}
	k := cfg.Keys
	c.queue = workqueue.New(workqueue.Config{
		Client: cfg.Client, ItemPrefix: k.Retries(cfg.Cell), LeasePrefix: k.RetryLeases(cfg.Cell),
		LeaseKey: func(id string) string { return k.RetryLease(cfg.Cell, id) }, Holder: cfg.Holder,
		LeaseTTL: cfg.LeaseTTL, Workers: cfg.Workers, Process: c.process, Log: c.log,
		HolderPrefix: k.RetryHolders(cfg.Cell), HolderKey: func(id string) string { return k.RetryHolder(cfg.Cell, id) },
		Grace: cfg.RankGrace, IdleAfter: cfg.HolderIdleAfter, StealAfter: cfg.StealAfter,
		Name: metrics.QueueRetries, Metrics: cfg.Metrics,
	})
	return c
}

// EnsureCell records the cell this conductor serves, so agents of the cell
// can map their hosts to it. It never overwrites an existing record.
func EnsureCell(ctx context.Context, cli *clientv3.Client, keys etcdschema.Keys, cell, uuid string) error {
	rec := &etcdschema.Cell{Name: cell, UUID: uuid, CreatedAt: time.Now().UTC()}
	_, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(keys.Cell(cell)), "=", 0)).
		Then(clientv3.OpPut(keys.Cell(cell), etcdschema.MustEncode(rec))).Commit()
	if err != nil {
		return fmt.Errorf("ensure cell %s: %w", cell, err)
	}
	return nil
}

// Run works the cell's retries until ctx ends.
func (c *CellConductor) Run(ctx context.Context) error { return c.queue.Run(ctx) }

// WaitSynced blocks until the queue has loaded.
func (c *CellConductor) WaitSynced(ctx context.Context) error { return c.queue.WaitSynced(ctx) }

func (c *CellConductor) process(ctx context.Context, it workqueue.Item) error {
	k := c.cfg.Keys
	var retry etcdschema.Retry
	if err := etcdschema.Decode(it.Key, it.Value, &retry); err != nil {
		c.log.Error("dropping unreadable retry", "key", it.Key, "error", err)
		return c.finish(ctx, it, nil)
	}
	if retry.Build.Op == etcdschema.OpMove && retry.Build.Move != nil {
		if kind := retry.Build.Move.Kind; kind != "" {
			h, ok := moveRetryKinds[kind]
			if !ok {
				return fmt.Errorf("retry %s: unknown move kind %q (written by a newer Berth?)", it.Key, kind)
			}
			return h(c, ctx, it, &retry)
		}
		return c.processMoveRetry(ctx, it, &retry)
	}
	uuid := retry.InstanceUUID
	// The create's request id (the Build carries it from the
	// BuildRequest), so a reschedule's lines join the API's audit line.
	log := c.log.With("instance", uuid, "request_id", retry.Build.RequestID)
	resp, err := c.cfg.Client.Txn(ctx).Then(
		clientv3.OpGet(k.CellInstance(c.cfg.Cell, uuid)), clientv3.OpGet(k.Alternates(uuid))).Commit()
	if err != nil {
		return fmt.Errorf("read instance %s: %w", uuid, err)
	}
	instKVs := resp.Responses[0].GetResponseRange().Kvs
	altKVs := resp.Responses[1].GetResponseRange().Kvs
	if len(instKVs) == 0 {
		log.Info("instance deleted before its retry, dropping the retry")
		return c.finish(ctx, it, nil)
	}
	var inst etcdschema.Instance
	if err := etcdschema.Decode(string(instKVs[0].Key), instKVs[0].Value, &inst); err != nil {
		return fmt.Errorf("retry %s: %w", uuid, err)
	}
	instRev := instKVs[0].ModRevision
	alts, altRev, err := retryAlternates(&retry, altKVs)
	if err != nil {
		return fmt.Errorf("retry %s: %w", uuid, err)
	}
	// The agent freed its claim before filing the retry, so any allocation
	// this consumer holds now was made by a conductor that died between its
	// claim and its commit: we hold the retry, so that claim is stale.
	if err := c.cfg.Placement.DeleteAllocations(ctx, uuid); err != nil && !errors.Is(err, placement.ErrNotFound) {
		return fmt.Errorf("free stale claim of %s: %w", uuid, err)
	}
	// Record the failed attempt's reason.
	if n := len(alts.Attempts); n > 0 && alts.Attempts[n-1].Host == retry.FailedHost && alts.Attempts[n-1].Reason == "" {
		alts.Attempts[n-1].Reason = retry.Reason
	} else {
		alts.Attempts = append(alts.Attempts, etcdschema.Attempt{Host: retry.FailedHost, Reason: retry.Reason, At: retry.FiledAt})
	}

	sel, rest, claimed, err := c.claimAlternate(ctx, log, uuid, alts.Group, inst.ProjectID, inst.UserID,
		alts.Remaining, len(alts.Attempts), alts.MaxAttempts)
	alts.Remaining = rest
	if err != nil {
		return err
	}
	if claimed {
		now := time.Now().UTC()
		alts.Attempts = append(alts.Attempts, etcdschema.Attempt{Host: sel.ServiceHost, At: now})
		inst.Host, inst.Node = sel.ServiceHost, sel.Nodename
		inst.Status, inst.TaskState = etcdschema.StatusBuild, etcdschema.TaskSpawning
		inst.Attempts = len(alts.Attempts)
		inst.FailedAttempts = append([]etcdschema.Attempt(nil), alts.Attempts[:len(alts.Attempts)-1]...)
		inst.UpdatedAt = now
		instJSON := etcdschema.MustEncode(&inst)
		build := retry.Build
		build.Op = etcdschema.OpBuild
		build.Attempt = inst.Attempts
		build.CastAt = now
		// The next attempt's cast carries the instance as written here and
		// what is left of the alternates, as the hand-off's did.
		build.Instance, build.Alternates = json.RawMessage(instJSON), json.RawMessage(etcdschema.MustEncode(&alts))
		testhook.Pause(ctx, "cellconductor.before-commit", uuid)
		ok, err := c.commit(ctx, it, instRev, altRev, dropAlternatesKey(k, uuid, altRev,
			clientv3.OpPut(k.CellInstance(c.cfg.Cell, uuid), instJSON),
			clientv3.OpPut(k.Build(sel.ServiceHost, uuid), etcdschema.MustEncode(&build)),
		))
		if err != nil {
			// The commit may or may not have applied (a timeout): keep the
			// claim. If it applied, the retry is finished and the claim is the
			// build's; if not, the next holder frees it as stale.
			return err
		}
		if !ok {
			// The instance or its alternates changed under us (deleted, most
			// likely): our claim must not outlive this attempt.
			if derr := c.cfg.Placement.DeleteAllocations(context.WithoutCancel(ctx), uuid); derr != nil &&
				!errors.Is(derr, placement.ErrNotFound) {
				log.Error("could not free claim after a failed retry hand-off", "error", derr)
			}
			return fmt.Errorf("retry %s: instance or alternates changed during the hand-off", uuid)
		}
		c.cfg.Metrics.Reschedule(metrics.RescheduleCast)
		log.Info("rescheduled on alternate", "host", sel.ServiceHost, "attempt", inst.Attempts,
			"failed_host", retry.FailedHost, "reason", retry.Reason)
		return nil
	}

	// Nothing left to try: ERROR with every attempt's reason.
	now := time.Now().UTC()
	var reasons []string
	for _, a := range alts.Attempts {
		reasons = append(reasons, fmt.Sprintf("%s: %s", a.Host, a.Reason))
	}
	msg := fmt.Sprintf("Exceeded maximum number of retries. Exhausted all hosts available for retrying build failures for instance %s.", uuid)
	inst.Status, inst.TaskState, inst.Host, inst.Node = etcdschema.StatusError, "", "", ""
	// The attempts stay on the instance; the alternates end with the
	// retry (an older Berth's key for them too).
	inst.FailedAttempts = append([]etcdschema.Attempt(nil), alts.Attempts...)
	inst.Fault = &etcdschema.Fault{Code: 500, Message: msg, Details: strings.Join(reasons, "; "), Created: now}
	inst.UpdatedAt = now
	ok, err := c.commit(ctx, it, instRev, altRev, dropAlternatesKey(k, uuid, altRev,
		clientv3.OpPut(k.CellInstance(c.cfg.Cell, uuid), etcdschema.MustEncode(&inst))))
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("retry %s: instance changed while marking it ERROR", uuid)
	}
	c.cfg.Metrics.Reschedule(metrics.RescheduleExhausted)
	log.Warn("build failed on every host", "attempts", len(alts.Attempts), "reasons", inst.Fault.Details)
	return nil
}

// retryAlternates is what a build's retry has left to try: the
// alternates key if an older Berth wrote one (its hand-off stored them
// there, beside a cast without them: an upgrade mid-build), else those
// the failed cast carried into the retry, else none (MaxAttempts 1: a
// cast from before alternates existed). altRev is the key's mod
// revision, 0 when absent; the commit compares it either way, so a
// writer of the key racing the retry loses nothing.
func retryAlternates(retry *etcdschema.Retry, altKVs []*mvccpb.KeyValue) (alts etcdschema.Alternates, altRev int64, err error) {
	alts = etcdschema.Alternates{InstanceUUID: retry.InstanceUUID, Cell: retry.Cell, MaxAttempts: 1}
	if len(altKVs) == 1 {
		err = etcdschema.Decode(string(altKVs[0].Key), altKVs[0].Value, &alts)
		return alts, altKVs[0].ModRevision, err
	}
	carried, ok, err := retry.Build.CarriedAlternates("alternates of " + retry.InstanceUUID)
	if err != nil || !ok {
		return alts, 0, err
	}
	return *carried, 0, nil
}

// dropAlternatesKey adds to ops the delete of an older Berth's
// alternates key, when there was one (altRev > 0): its content now
// travels in the cast or ends here.
func dropAlternatesKey(k etcdschema.Keys, uuid string, altRev int64, ops ...clientv3.Op) []clientv3.Op {
	if altRev > 0 {
		ops = append(ops, clientv3.OpDelete(k.Alternates(uuid)))
	}
	return ops
}

// groupClaimer is what a retry into a server group needs of placement: a
// claim that carries the group's guard in its own transaction.
type groupClaimer interface {
	PutAllocationsWithOptions(ctx context.Context, writes map[string]placement.AllocationWrite, opts placement.ClaimOptions) (int64, error)
}

// claimInGroup claims an alternate for a member of a server group only if
// the group's hard policy still allows the host, moving the member's place
// there in the same transaction (scheduler.GroupRetryGuard).
func (c alternateClaimer) claimInGroup(ctx context.Context, group, host, uuid string, w placement.AllocationWrite) error {
	p, ok := c.pl.(groupClaimer)
	if !ok {
		return fmt.Errorf("claim alternate %s for %s: placement cannot guard a server group claim", host, uuid)
	}
	guards, ops, err := scheduler.GroupRetryGuard(ctx, c.cli, c.keys, c.log, group, host, uuid)
	if err != nil {
		return err
	}
	_, err = p.PutAllocationsWithOptions(ctx, map[string]placement.AllocationWrite{uuid: w},
		placement.ClaimOptions{Guards: guards, GuardOps: ops})
	return err
}

// commit applies ops and finishes the item, if we still hold it and neither
// the instance nor its alternates changed since we read them.
func (c *CellConductor) commit(ctx context.Context, it workqueue.Item, instRev, altRev int64, ops []clientv3.Op) (bool, error) {
	k := c.cfg.Keys
	held, err := c.queue.StillHeld(ctx, it)
	if err != nil {
		return false, err
	}
	uuid := it.ID
	resp, err := c.cfg.Client.Txn(ctx).If(held,
		clientv3.Compare(clientv3.ModRevision(k.CellInstance(c.cfg.Cell, uuid)), "=", instRev),
		clientv3.Compare(clientv3.ModRevision(k.Alternates(uuid)), "=", altRev),
	).Then(append(ops, workqueue.FinishOps(it)...)...).Commit()
	if err != nil {
		return false, fmt.Errorf("retry %s: commit: %w", uuid, err)
	}
	return resp.Succeeded, nil
}

func (c *CellConductor) finish(ctx context.Context, it workqueue.Item, ops []clientv3.Op) error {
	held, err := c.queue.StillHeld(ctx, it)
	if err != nil {
		return err
	}
	_, err = c.cfg.Client.Txn(ctx).If(held).Then(append(ops, workqueue.FinishOps(it)...)...).Commit()
	if err != nil {
		return fmt.Errorf("finish retry %s: %w", it.ID, err)
	}
	return nil
}
