package agent

import (
	"context"

	"github.com/berth-project/berth/internal/informer"
)

// followHandler feeds the agent's follow of its own service record and
// instance info (host_follow.go). When the API flips the service's
// disabled flag the agent syncs its provider at once, which sets or
// clears COMPUTE_STATUS_DISABLED: Nova's set_host_enabled, with the
// record change in etcd in place of the RPC. The periodic provider sync
// stays the backstop for a change made while the agent was down (the
// follow lists at start).
type followHandler struct{ a *Agent }

func (h followHandler) Reset(kvs []informer.Event, _ int64) {
	h.a.follow.reset()
	h.Apply(kvs)
	h.a.follow.setSynced()
}

func (h followHandler) Apply(evs []informer.Event) {
	for _, ev := range evs {
		h.a.noteFollowed(ev)
	}
}

// mappingFollowHandler feeds the follow's host mapping (hostFollow):
// whether the host is mapped, which the provider tick otherwise compares
// in etcd every period.
type mappingFollowHandler struct{ a *Agent }

func (h mappingFollowHandler) Reset(kvs []informer.Event, _ int64) {
	h.a.follow.resetMapping()
	h.Apply(kvs)
	h.a.follow.setMappingSynced()
}

func (h mappingFollowHandler) Apply(evs []informer.Event) {
	for _, ev := range evs {
		_, _ = h.a.follow.apply(h.a.own, ev) // a mapping's presence: nothing to decode
	}
}

// noteFollowed applies one change of the followed keys and, when the
// disabled flag changed, asks for a provider sync. Only a change of the
// flag needs one; the agent's own writes (failed_builds) must not cost a
// provider read each.
func (a *Agent) noteFollowed(ev informer.Event) {
	changed, err := a.follow.apply(a.own, ev)
	if err != nil {
		a.log.Warn("unreadable service record", "error", err)
	}
	if !changed {
		return
	}
	select {
	case a.syncNow <- struct{}{}:
	default:
	}
}

// runServiceWatch follows the host's service record, instance info and
// mapping, and syncs the provider whenever the service's disabled flag
// changes, until ctx ends. A deleted service record syncs nothing.
func (a *Agent) runServiceWatch(ctx context.Context) {
	go a.followInf.Run(ctx)
	go a.mappingInf.Run(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.syncNow:
			if err := a.syncProvider(ctx); err != nil && ctx.Err() == nil {
				a.log.Warn("provider sync after a service change failed; the periodic sync retries", "error", err)
				continue
			}
			a.log.Info("provider synced after a service change")
		}
	}
}
