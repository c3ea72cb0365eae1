package scheduler

import (
	"context"
	"errors"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/placement"
)

// The claim of one instance (stage 6 of selectOnce) and the rollback of a
// request's claims when it cannot be placed whole (Cycle.abort).

// maxGroupReloads bounds how often one pick re-reads a server group whose
// guard another scheduler took first.
const maxGroupReloads = 3

// claimFirst walks the sorted hosts and claims the first that takes the
// current instance: Nova's claim loop, with the server-group guard in the
// same etcd transaction as the claim. guardLost says a host was passed
// over because the group changed under us. rev is the claim's etcd
// revision.
func (s *Scheduler) claimFirst(ctx context.Context, sorted *ranking, c *Cycle) (p pick, rev int64, guardLost bool, err error) {
	uuid := c.Instance
	for k := 0; k < sorted.len(); k++ {
		h := sorted.at(k).host
		if len(h.Candidates) == 0 {
			continue
		}
		ar := h.Candidates[0]
		write := placement.AllocationWrite{Allocations: ar.AllocationRequest().Allocations, ProjectID: c.Spec.ProjectID, UserID: c.Spec.UserID}
		var opts placement.ClaimOptions
		committed := func(int64) {}
		if c.Group != nil {
			opts.Guards, opts.GuardOps, committed = groupGuard(s.hosts.keys, c.Group, h.Host, uuid)
		}
		writes := c.joinScratch().claimWrites(uuid, write)
		rev, err = s.placement.PutAllocationsWithOptions(ctx, writes, opts)
		for c.fallback.on && s.waitForProvider(ctx, c, h, err) {
			rev, err = s.placement.PutAllocationsWithOptions(ctx, writes, opts)
		}
		clear(writes)
		switch {
		case err == nil:
			committed(rev)
			return pick{host: h, req: ar}, rev, guardLost, nil
		case errors.Is(err, placement.ErrGuardFailed):
			s.log.Debug("server group place taken by another scheduler", "instance", uuid, "host", h.Host,
				"group", c.Group.Group.UUID)
			guardLost = true
			s.guardLosses.Add(1)
		case isClaimRace(err):
			s.log.Debug("claim lost, trying the next host", "instance", uuid, "host", h.Host, "error", err)
		default:
			return pick{}, 0, false, fmt.Errorf("claim %s on %s: %w", uuid, h.Host, err)
		}
	}
	return pick{}, 0, guardLost, nil
}

func isClaimRace(err error) bool {
	return errors.Is(err, placement.ErrInsufficientCapacity) ||
		errors.Is(err, placement.ErrConcurrentUpdate) ||
		errors.Is(err, placement.ErrProviderNotFound)
}

// rollback frees the claims of a request that cannot be placed whole.
// Each is freed only if the consumer is still the record this claim wrote
// (guarded by its revision): when a caller gave up on this scheduler (a
// timeout) it frees the claims and asks another scheduler, whose claims
// for the same instances a late rollback here must not touch.
func (s *Scheduler) rollback(ctx context.Context, claims []claim) {
	for _, cl := range claims {
		own := clientv3.Compare(clientv3.ModRevision(s.hosts.keys.Consumer(cl.instance)), "=", cl.rev)
		err := s.placement.DeleteAllocationsGuarded(context.WithoutCancel(ctx), cl.instance, own)
		switch {
		case err == nil:
		case errors.Is(err, placement.ErrGuardFailed), errors.Is(err, placement.ErrNotFound):
			s.log.Info("claim already freed or replaced by another scheduler; leaving it", "instance", cl.instance)
		default:
			s.log.Error("could not free claim of unplaceable request", "instance", cl.instance, "error", err)
		}
	}
}
