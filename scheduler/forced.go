package scheduler

import (
	"strings"

	"github.com/hashicorp/go-hclog"
)

// Forced hosts: Nova's force_hosts and force_nodes, which an admin's
// availability_zone "zone:host", "zone:host:node" or "zone::node" sets.
// Nova's HostManager.get_filtered_hosts keeps the hosts (matched case-
// insensitively) and nodes (exactly) named, and returns them without
// running any filter: an admin who forces a host overrides the filters,
// a disabled host's or a full server group's refusal included. Placement
// still decides whether the host has room: resources_from_request_spec
// turns the first forced host or node into in_tree, as it does for
// microversion 2.74's host / hypervisor_hostname (requested_destination),
// which, unlike a forced host, does go through the filters.

// forced says whether the request names forced hosts or nodes.
func (spec *RequestSpec) forced() bool { return len(spec.ForceHosts) > 0 || len(spec.ForceNodes) > 0 }

// target is the destination placement's in_tree narrows to: the
// requested destination, else the first forced host and node (Nova's
// "target_host or spec_obj.force_hosts[0]").
func (spec *RequestSpec) target() *Destination {
	if spec.RequestedDestination != nil || !spec.forced() {
		return spec.RequestedDestination
	}
	d := &Destination{}
	if len(spec.ForceHosts) > 0 {
		d.Host = spec.ForceHosts[0]
	}
	if len(spec.ForceNodes) > 0 {
		d.Node = spec.ForceNodes[0]
	}
	return d
}

// forcedHosts is get_filtered_hosts for a forced request: the hosts
// named by ForceHosts (any case) and by ForceNodes (Berth has one node
// per host, named as the host), each logged as passed because forced;
// the filters do not run.
func forcedHosts(hosts []*HostState, spec *RequestSpec, log hclog.Logger) []*HostState {
	var out []*HostState
	for _, h := range hosts {
		if len(spec.ForceHosts) > 0 && !containsFold(spec.ForceHosts, h.Host) {
			continue
		}
		if len(spec.ForceNodes) > 0 && !contains(spec.ForceNodes, h.Host) {
			continue
		}
		log.Debug("host passed the filters: forced (availability_zone zone:host), filters skipped",
			"host", h.Host, "force_hosts", spec.ForceHosts, "force_nodes", spec.ForceNodes)
		out = append(out, h)
	}
	if len(out) == 0 {
		log.Info("no host matched the forced hosts or nodes", "force_hosts", spec.ForceHosts, "force_nodes", spec.ForceNodes)
	}
	return out
}

func containsFold(list []string, s string) bool {
	for _, x := range list {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}

// filter runs the filters on hosts for c's current instance (filterFirst's
// cap for the first), or, for a forced request, only keeps the forced
// hosts.
func (s *Scheduler) filter(hosts []*HostState, c *Cycle, log hclog.Logger) []*HostState {
	if c.fallback.on {
		// Placement checked no room: the legacy filters do (fallback.go).
		hosts = runFilters(fallbackFilters, hosts, c)
	}
	switch {
	case c.Spec.forced():
		return forcedHosts(hosts, c.Spec, log)
	case c.Index == 0:
		return s.filterFirst(hosts, c)
	default:
		return runFilters(s.filters, hosts, c)
	}
}
