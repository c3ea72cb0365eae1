package scheduler

import (
	"context"
	"errors"
	"time"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/metrics"
)

// SetMetrics makes the scheduler observe its SelectDestinations latency in
// m (nil: none). Call it before the scheduler serves.
func (s *Scheduler) SetMetrics(m *metrics.Metrics) { s.metrics = m }

// SelectDestinations places every instance of spec: it claims resources
// for each, all or nothing, and returns per instance the chosen Selection
// (claimed) followed by up to max_attempts-1 alternates from the same cell
// (unclaimed, each with the allocation request a conductor can claim).
// Its latency, claims included, is observed by outcome.
func (s *Scheduler) SelectDestinations(ctx context.Context, spec *RequestSpec) ([][]etcdschema.Selection, error) {
	start := time.Now()
	out, err := s.selectDestinations(ctx, spec)
	outcome := metrics.SelectSelected
	var nvh *NoValidHostError
	switch {
	case errors.As(err, &nvh):
		outcome = metrics.SelectNoValidHost
	case err != nil:
		outcome = metrics.SelectError
	}
	s.metrics.ObserveSelect(outcome, start)
	return out, err
}

// HostCounts counts the hosts with a service record by state, for
// berth_scheduler_hosts: up as the ComputeFilter sees it (alive key
// present, not forced down), down otherwise, and disabled whatever their
// liveness.
func (hm *HostManager) HostCounts() metrics.HostCounts {
	hm.mu.RLock()
	defer hm.mu.RUnlock()
	var n metrics.HostCounts
	for _, r := range hm.hosts {
		if r.service == nil {
			continue
		}
		if r.alive && !r.service.ForcedDown {
			n.Up++
		} else {
			n.Down++
		}
		if r.service.Disabled {
			n.Disabled++
		}
	}
	return n
}
