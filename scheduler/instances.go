package scheduler

import (
	"context"
)

// InstanceReader is implemented by the filters and weighers that read a
// HostState's Instances or NumInstances. For hosts whose instance cache is
// not trusted (the agent never sent its uuid list, its last list differed
// from the cache, or track_instance_changes is off) those are read from
// the cell records, once per request and only when some enabled filter or
// weigher says it needs them for this request.
type InstanceReader interface {
	NeedsInstances(c *Cycle) bool
}

// NeedsInstances: only with a same_host hint.
func (SameHostFilter) NeedsInstances(c *Cycle) bool { return len(c.Spec.Hints.SameHost) > 0 }

// NeedsInstances: only with a different_host hint.
func (DifferentHostFilter) NeedsInstances(c *Cycle) bool {
	return len(c.Spec.Hints.DifferentHost) > 0
}

// NeedsInstances: always; it weighs the instance count.
func (NumInstancesWeigher) NeedsInstances(*Cycle) bool { return true }

// needsInstances reports whether any enabled filter or weigher reads
// instances for c's request over hosts. A weigher whose multiplier is 0
// for every one of hosts (the configured 0, no aggregate overriding it)
// is skipped by weighRanking, so it reads nothing: the default config
// lists num_instances at 0, and counting it read every instance of a
// cell from etcd for each request that met an untrusted host (one whose
// agent's sync had not caught up with a build yet, common during a boot).
func (s *Scheduler) needsInstances(c *Cycle, hosts []*HostState) bool {
	for _, f := range s.filters {
		if r, ok := f.(InstanceReader); ok && r.NeedsInstances(c) {
			return true
		}
	}
	for _, w := range s.weighers {
		if r, ok := w.Weigher.(InstanceReader); ok && r.NeedsInstances(c) && w.weighsAny(hosts) {
			return true
		}
	}
	return false
}

// weighsAny says whether w's multiplier is non-zero for some of hosts.
func (w weigherWithMultiplier) weighsAny(hosts []*HostState) bool {
	if w.multiplier != 0 {
		return true
	}
	for _, h := range hosts {
		if w.multiplierFor(h) != 0 {
			return true
		}
	}
	return false
}

// fillUntrustedInstances gives the hosts whose cache is not trusted their
// instances from the cells (seed isolate-scheduler-db: "query the DB for
// hosts that have not reported").
func (s *Scheduler) fillUntrustedInstances(ctx context.Context, c *Cycle, hosts []*HostState) error {
	if len(hosts) == 0 || !s.needsInstances(c, hosts) {
		return nil
	}
	byCell := map[string]map[string]bool{}
	var untrusted []*HostState
	for _, h := range hosts {
		if h.viewed {
			if h.trusted {
				continue
			}
		} else if v, ok := s.hosts.view(h.Host); !ok || v.Updated {
			continue
		}
		if byCell[h.Cell] == nil {
			byCell[h.Cell] = map[string]bool{}
		}
		byCell[h.Cell][h.Host] = true
		untrusted = append(untrusted, h)
	}
	if len(untrusted) == 0 {
		return nil
	}
	got, err := s.hosts.instancesFromCells(ctx, byCell)
	if err != nil {
		return err
	}
	for _, h := range untrusted {
		h.Instances = got[h.Host]
		h.NumInstances = len(h.Instances)
	}
	s.log.Debug("read instances of untrusted hosts from their cells", "hosts", len(untrusted), "cells", len(byCell))
	return nil
}
