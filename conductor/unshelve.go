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
	"github.com/berth-project/berth/internal/workqueue"
	"github.com/berth-project/berth/placement"
	"github.com/berth-project/berth/scheduler"
)

// The unshelve of a shelved-offloaded server (Nova's conductor
// unshelve_instance): the superconductor asks the scheduler for a host
// with the server's flavor, group, requested zone and host, in its cell;
// the scheduler claims the first; one transaction records the host and
// the alternates on the instance (an unshelve has no migration record)
// and casts the spawn to that host. Nova asks without alternates and
// leaves a failed spawn offloaded; Berth keeps the alternates (seed
// return-alternate-hosts: "unshelve ... consume Selections too") and the
// cell conductor retries a failed spawn on them, claiming each first, as
// a build's retry. With none left, or no valid host at all, the server
// stays SHELVED_OFFLOADED with no task (Nova's NoValidHost handling);
// after failed spawns its fault names each attempt's host and reason.

func init() {
	registerMoveKind(etcdschema.MoveKindUnshelve, (*Superconductor).processUnshelve)
	registerMoveRetry(etcdschema.MoveKindUnshelve, (*CellConductor).processUnshelveRetry)
}

// readUnshelving reads the instance of an unshelve; nil when deleted.
func readUnshelving(ctx context.Context, cli *clientv3.Client, key string) (*etcdschema.Instance, int64, error) {
	resp, err := cli.Get(ctx, key)
	if err != nil {
		return nil, 0, fmt.Errorf("read %s: %w", key, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, 0, nil
	}
	var in etcdschema.Instance
	if err := etcdschema.Decode(key, resp.Kvs[0].Value, &in); err != nil {
		return nil, 0, err
	}
	return &in, resp.Kvs[0].ModRevision, nil
}

// awaitingHost says whether in is an offloaded server whose unshelve has
// no host yet (not handed off, or back from a failed spawn).
func awaitingHost(in *etcdschema.Instance) bool {
	return in.Status == etcdschema.StatusShelvedOffloaded && in.TaskState == etcdschema.TaskUnshelving && in.Host == ""
}

func (s *Superconductor) processUnshelve(ctx context.Context, it workqueue.Item, req *etcdschema.MoveRequest) error {
	k := s.cfg.Keys
	log := s.log.With("instance", req.InstanceUUID, "request_id", req.RequestID, "kind", req.Kind)
	ikey := k.CellInstance(req.Cell, req.InstanceUUID)
	in, rev, err := readUnshelving(ctx, s.cfg.Client, ikey)
	if err != nil {
		return err
	}
	if in == nil || !awaitingHost(in) {
		if in == nil {
			s.freeMoveClaims(ctx, req.InstanceUUID) // a claim of ours the delete raced
		}
		log.Info("unshelve request no longer current, dropping it")
		return s.finishMove(ctx, it, nil)
	}
	// An offloaded server holds nothing: a claim under its uuid now is
	// an earlier holder's that died before its hand-off.
	if err := s.cfg.Placement.DeleteAllocations(ctx, in.UUID); err != nil && !errors.Is(err, placement.ErrNotFound) {
		return fmt.Errorf("free stale unshelve claim of %s: %w", in.UUID, err)
	}
	st := etcdschema.ShelveState{}
	if in.Shelve != nil {
		st = *in.Shelve
	}
	spec := &scheduler.RequestSpec{InstanceUUIDs: []string{in.UUID}, Flavor: in.Flavor, ProjectID: in.ProjectID,
		UserID: in.UserID, AvailabilityZone: in.RequestedAZ, RequestID: req.RequestID, MinRevision: it.ModRev,
		RequestedDestination: &scheduler.Destination{Cell: in.Cell, Host: st.RequestedHost}}
	if g := in.Group; g != "" {
		if ok, err := s.groupExists(ctx, g); err != nil {
			return err
		} else if ok {
			spec.Hints.Group = g
		}
	}
	start := req.CreatedAt
	sels, err := s.selectDestinations(ctx, spec)
	var nvh *scheduler.NoValidHostError
	now := time.Now().UTC()
	if errors.As(err, &nvh) {
		log.Info("no valid host for the unshelve; the server stays offloaded", "reason", nvh.Error())
		in.TaskState, in.UpdatedAt = "", now
		in.ActionEvent(etcdschema.ActionUnshelve, req.RequestID, etcdschema.EventScheduleUnshelve, "", start, now, nvh)
		return s.commitUnshelve(ctx, it, ikey, rev, []clientv3.Op{clientv3.OpPut(ikey, etcdschema.MustEncode(in))})
	}
	if err != nil {
		return fmt.Errorf("select destinations for the unshelve of %s: %w", in.UUID, err)
	}
	chosen := sels[0][0]
	st.MaxAttempts = s.cfg.MaxAttempts
	st.Remaining = nil
	if st.RequestedHost == "" {
		st.Remaining = sels[0][1:]
	}
	st.Attempts = append(st.Attempts, etcdschema.Attempt{Host: chosen.ServiceHost, At: now})
	in.Shelve = &st
	placeOn(in, chosen)
	in.UpdatedAt = now
	in.ActionEvent(etcdschema.ActionUnshelve, req.RequestID, etcdschema.EventScheduleUnshelve, "", start, now, nil)
	cast := records.ShelveCast(in, etcdschema.StepUnshelveSpawn, req.RequestID, now)
	cast.Attempt = len(st.Attempts)
	if err := s.commitUnshelve(ctx, it, ikey, rev, []clientv3.Op{clientv3.OpPut(ikey, etcdschema.MustEncode(in)),
		clientv3.OpPut(k.Build(chosen.ServiceHost, in.UUID), etcdschema.MustEncode(cast))}); err != nil {
		return err // the next try frees our claim (deleted) or drops the request (handed off)
	}
	log.Info("unshelve handed off", "host", chosen.ServiceHost, "alternates", len(st.Remaining))
	return nil
}

// placeOn names sel's host and node on in, and its zone (Nova sets the
// instance's zone to its new host's).
func placeOn(in *etcdschema.Instance, sel etcdschema.Selection) {
	in.Host, in.Node = sel.ServiceHost, sel.Nodename
	if in.Node == "" {
		in.Node = sel.ServiceHost
	}
	if sel.AvailabilityZone != "" {
		in.AvailabilityZone = sel.AvailabilityZone
	}
}

// commitUnshelve applies ops and ends the request, if we still hold it
// and the instance is unchanged.
func (s *Superconductor) commitUnshelve(ctx context.Context, it workqueue.Item, ikey string, rev int64, ops []clientv3.Op) error {
	held, err := s.moves.StillHeld(ctx, it)
	if err != nil {
		return err
	}
	resp, err := s.cfg.Client.Txn(ctx).If(held, clientv3.Compare(clientv3.ModRevision(ikey), "=", rev)).
		Then(append(ops, workqueue.FinishOps(it)...)...).Commit()
	if err != nil {
		return fmt.Errorf("commit unshelve of %s: %w", ikey, err)
	}
	if !resp.Succeeded {
		return fmt.Errorf("unshelve of %s: the instance changed (or the request moved) meanwhile", ikey)
	}
	return nil
}

// processUnshelveRetry works a failed unshelve spawn: the next stored
// alternate, claimed first, or the server back to offloaded with every
// attempt's reason as its fault.
func (c *CellConductor) processUnshelveRetry(ctx context.Context, it workqueue.Item, retry *etcdschema.Retry) error {
	k := c.cfg.Keys
	uuid := retry.InstanceUUID
	log := c.log.With("instance", uuid, "kind", etcdschema.MoveKindUnshelve)
	ikey := k.CellInstance(c.cfg.Cell, uuid)
	in, rev, err := readUnshelving(ctx, c.cfg.Client, ikey)
	if err != nil {
		return err
	}
	// The leader files the retry of a spawn cast to a down host with the
	// instance still naming that host (its cast is gone, it will not run).
	fromDownHost := in != nil && in.Status == etcdschema.StatusShelvedOffloaded && in.Host == retry.FailedHost &&
		(in.TaskState == etcdschema.TaskUnshelving || in.TaskState == etcdschema.TaskSpawning)
	if in == nil || !(awaitingHost(in) || fromDownHost) {
		log.Info("unshelve retry no longer current (server deleted or settled), dropping it")
		return c.finish(ctx, it, nil)
	}
	// The agent freed its claim before filing the retry: a claim the
	// instance holds now is a dead conductor's, and we hold the retry.
	if err := c.cfg.Placement.DeleteAllocations(ctx, uuid); err != nil && !errors.Is(err, placement.ErrNotFound) {
		return fmt.Errorf("free stale claim of %s: %w", uuid, err)
	}
	st := etcdschema.ShelveState{}
	if in.Shelve != nil {
		st = *in.Shelve
	}
	if n := len(st.Attempts); n > 0 && st.Attempts[n-1].Host == retry.FailedHost && st.Attempts[n-1].Reason == "" {
		st.Attempts[n-1].Reason = retry.Reason
	} else {
		st.Attempts = append(st.Attempts, etcdschema.Attempt{Host: retry.FailedHost, Reason: retry.Reason, At: retry.FiledAt})
	}
	sel, rest, claimed, err := c.claimAlternate(ctx, log, uuid, in.Group, in.ProjectID, in.UserID,
		st.Remaining, len(st.Attempts), st.MaxAttempts)
	st.Remaining = rest
	if err != nil {
		return fmt.Errorf("the unshelve of %s: %w", uuid, err)
	}
	now := time.Now().UTC()
	in.UpdatedAt = now
	commit := func(ops []clientv3.Op) (bool, error) {
		held, err := c.queue.StillHeld(ctx, it)
		if err != nil {
			return false, err
		}
		resp, err := c.cfg.Client.Txn(ctx).If(held, clientv3.Compare(clientv3.ModRevision(ikey), "=", rev)).
			Then(append(ops, workqueue.FinishOps(it)...)...).Commit()
		if err != nil {
			return false, fmt.Errorf("unshelve retry %s: commit: %w", uuid, err)
		}
		return resp.Succeeded, nil
	}
	in.Host, in.Node = "", ""
	if claimed {
		st.Attempts = append(st.Attempts, etcdschema.Attempt{Host: sel.ServiceHost, At: now})
		in.Shelve = &st
		placeOn(in, sel)
		cast := records.ShelveCast(in, etcdschema.StepUnshelveSpawn, retry.Build.RequestID, now)
		cast.Attempt = len(st.Attempts)
		ok, err := commit([]clientv3.Op{clientv3.OpPut(ikey, etcdschema.MustEncode(in)),
			clientv3.OpPut(k.Build(sel.ServiceHost, uuid), etcdschema.MustEncode(cast))})
		if err != nil {
			return err // applied or not, the next holder frees a stale claim
		}
		if !ok {
			if derr := c.cfg.Placement.DeleteAllocations(context.WithoutCancel(ctx), uuid); derr != nil &&
				!errors.Is(derr, placement.ErrNotFound) {
				log.Error("could not free claim after a failed unshelve retry hand-off", "error", derr)
			}
			return fmt.Errorf("unshelve retry %s: the instance changed during the hand-off", uuid)
		}
		c.cfg.Metrics.Reschedule(metrics.RescheduleCast)
		log.Info("unshelve rescheduled on alternate", "host", sel.ServiceHost, "attempt", len(st.Attempts),
			"failed_host", retry.FailedHost, "reason", retry.Reason)
		return nil
	}
	var reasons []string
	for _, a := range st.Attempts {
		reasons = append(reasons, fmt.Sprintf("%s: %s", a.Host, a.Reason))
	}
	reason := fmt.Sprintf("Exceeded maximum number of retries. Exhausted all hosts available for retrying unshelve failures for instance %s. Attempts: %s",
		uuid, strings.Join(reasons, "; "))
	in.Shelve = &st
	in.TaskState = ""
	in.Fault = &etcdschema.Fault{Code: 500, Message: reason, Created: now}
	ok, err := commit([]clientv3.Op{clientv3.OpPut(ikey, etcdschema.MustEncode(in))})
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("unshelve retry %s: the instance changed while ending the unshelve", uuid)
	}
	c.cfg.Metrics.Reschedule(metrics.RescheduleExhausted)
	log.Warn("unshelve failed on every host; the server stays offloaded", "attempts", len(st.Attempts), "reasons", reasons)
	return nil
}
