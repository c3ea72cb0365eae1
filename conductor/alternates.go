package conductor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/placement"
	"github.com/berth-project/berth/scheduler"
)

// claimAlternate claims the first of remaining that still takes the
// instance uuid, for a build's retry and a move's alike: in the server
// group's guard when group is set (an alternate passed the group's
// filter when it was chosen, but members may have moved since), else a
// plain allocation write. Alternates whose claim would now break the
// group's policy, no longer fit, or carry no usable allocation request
// are discarded with a log line. It stops once attempts reach
// maxAttempts. It returns the alternate claimed (claimed false: none
// left) and the alternates after it; an error is a claim that failed for
// another reason, the alternate already taken off the list.
func (c *CellConductor) claimAlternate(ctx context.Context, log hclog.Logger, uuid, group, project, user string,
	remaining []etcdschema.Selection, attempts, maxAttempts int) (sel etcdschema.Selection, rest []etcdschema.Selection, claimed bool, err error) {
	cl := alternateClaimer{pl: c.cfg.Placement, cli: c.cfg.Client, keys: c.cfg.Keys, log: c.log}
	return cl.claim(ctx, log, uuid, group, project, user, remaining, attempts, maxAttempts)
}

// alternateClaimer is what claiming an alternate needs, so the cell
// conductor (builds, cold moves) and the superconductor (a live
// migration's next host) claim alike.
type alternateClaimer struct {
	pl   Allocations
	cli  *clientv3.Client
	keys etcdschema.Keys
	log  hclog.Logger
}

func (c alternateClaimer) claim(ctx context.Context, log hclog.Logger, uuid, group, project, user string,
	remaining []etcdschema.Selection, attempts, maxAttempts int) (sel etcdschema.Selection, rest []etcdschema.Selection, claimed bool, err error) {
	for len(remaining) > 0 && attempts < max(maxAttempts, 1) {
		sel, remaining = remaining[0], remaining[1:]
		var ar placement.AllocationRequest
		if err := json.Unmarshal([]byte(sel.AllocationRequest), &ar); err != nil || len(ar.Allocations) == 0 {
			log.Warn("alternate has no usable allocation request, discarding it", "host", sel.ServiceHost)
			continue
		}
		write := placement.AllocationWrite{Allocations: ar.Allocations, ProjectID: project, UserID: user}
		if group != "" {
			err = c.claimInGroup(ctx, group, sel.ServiceHost, uuid, write)
		} else {
			err = c.pl.PutAllocations(ctx, uuid, write)
		}
		switch {
		case err == nil:
			return sel, remaining, true, nil
		case errors.Is(err, scheduler.ErrGroupPolicy) || errors.Is(err, placement.ErrGuardFailed):
			log.Info("alternate would break the server group's policy, discarding it", "host", sel.ServiceHost,
				"group", group, "error", err)
		case errors.Is(err, placement.ErrInsufficientCapacity) || errors.Is(err, placement.ErrConcurrentUpdate) ||
			errors.Is(err, placement.ErrProviderNotFound):
			log.Info("alternate no longer fits, discarding it", "host", sel.ServiceHost, "error", err)
		default:
			return sel, remaining, false, fmt.Errorf("claim alternate %s for %s: %w", sel.ServiceHost, uuid, err)
		}
	}
	return etcdschema.Selection{}, remaining, false, nil
}
