package agent

import (
	"context"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/informer"
)

// serviceHandler follows the host's own service record. When the API flips
// its disabled flag the agent syncs its provider at once, which sets or
// clears COMPUTE_STATUS_DISABLED: Nova's set_host_enabled, with the record
// change in etcd in place of the RPC. The periodic provider sync stays the
// backstop for a change made while the agent was down.
type serviceHandler struct {
	a       *Agent
	known   bool
	disable bool
}

func (h *serviceHandler) Reset(kvs []informer.Event, _ int64) {
	for _, kv := range kvs {
		h.note(kv)
	}
}

func (h *serviceHandler) Apply(evs []informer.Event) {
	for _, ev := range evs {
		h.note(ev)
	}
}

func (h *serviceHandler) note(ev informer.Event) {
	if ev.Key != h.a.keys.Service(h.a.cfg.Host) || ev.Deleted {
		return
	}
	var s etcdschema.Service
	if err := etcdschema.Decode(ev.Key, ev.Value, &s); err != nil {
		h.a.log.Warn("unreadable service record", "error", err)
		return
	}
	// Only a change of the disabled flag needs a sync; the agent's own
	// writes (failed_builds) must not cost a provider read each.
	if h.known && s.Disabled == h.disable {
		return
	}
	h.known, h.disable = true, s.Disabled
	select {
	case h.a.syncNow <- struct{}{}:
	default:
	}
}

// runServiceWatch syncs the provider whenever the service's disabled flag
// changes, until ctx ends.
func (a *Agent) runServiceWatch(ctx context.Context) {
	// note reads puts only: a deleted service record syncs nothing.
	inf := informer.New(a.cli, a.own.service, &serviceHandler{a: a}, a.log, informer.PutsOnly())
	go inf.Run(ctx)
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
