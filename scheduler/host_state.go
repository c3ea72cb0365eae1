package scheduler

import (
	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/placement"
)

// HostState is one candidate host as filters and weighers see it during a
// request: the host manager's view joined with placement's provider summary
// and the allocation requests placement offered for it. It is built fresh
// for each request and consumed from between the picks of a multi-instance
// request, as Nova's HostState.consume_from_request does.
type HostState struct {
	Host         string
	Cell         string
	ProviderUUID string
	// Service is the host's service record, shared with the host manager:
	// read-only.
	Service *etcdschema.Service
	Up      bool
	// Instances on the host, as reported by its agent.
	Instances map[string]*etcdschema.InstanceInfo
	// Resources is capacity and usage per class of the root provider;
	// read it through resourceMap (a joined state leaves it nil and keeps
	// placement's summary instead, until consume replaces it).
	Resources map[string]placement.ResourceSummary
	// Candidates are the allocation requests placement offered, in its
	// order, in placement's compact in-process form.
	Candidates []placement.Candidate
	// NumInstances counts instances including those picked in this request.
	NumInstances int
	// FailedBuilds is the agent's consecutive failed build count.
	FailedBuilds int
	// NumIOOps counts builds in flight on the host, including those picked
	// in this request (Nova's num_io_ops).
	NumIOOps int
	// Aggregates are the host aggregates the host is in (shared, read-only).
	Aggregates []*etcdschema.Aggregate
	// AvailabilityZone is the AZ of the host's aggregates, else the default.
	AvailabilityZone string
	// Limits are Nova's SchedulerLimits the filters set (the legacy
	// Core/Ram/DiskFilter), copied into the host's Selections; nil when no
	// filter set one.
	Limits map[string]int64

	// std is the root's VCPU, MEMORY_MB and DISK_GB when stdOK: set at
	// the join from placement's search (CompactBuffers.RootStandard, else
	// ProviderSummary.Standard), so the resource weighers read the host
	// state, not a map per class per host. A state whose Resources came
	// from elsewhere has none.
	std   [3]placement.ResourceSummary
	stdOK bool
	// summary is placement's summary of the root, whose Resources stand
	// for Resources while that is nil: rendered only when read
	// (resourceMap), since std is all most requests read.
	summary placement.LazySummary

	// nameHash is hostNameHash(Host), from the host record (0: not
	// known, worked out when needed).
	nameHash uint64

	// trusted is the host manager's "instance cache is current" for the
	// host, taken with the rest of the view when hostStates built this
	// state (viewed says it was), so fillUntrustedInstances need not look
	// every host up again under the lock.
	viewed, trusted bool
}

func (h *HostState) setLimit(key string, v int64) {
	if h.Limits == nil {
		h.Limits = map[string]int64{}
	}
	h.Limits[key] = v
}

// Free returns capacity minus usage of one resource class.
func (h *HostState) Free(rc string) int64 {
	r := h.resource(rc)
	return r.Capacity - r.Used
}

// Total returns the capacity of one resource class.
func (h *HostState) Total(rc string) int64 { return h.resource(rc).Capacity }

// resource is Resources[rc], from std for the standard classes.
func (h *HostState) resource(rc string) placement.ResourceSummary {
	if h.stdOK {
		switch rc {
		case placement.VCPU:
			return h.std[0]
		case placement.MemoryMB:
			return h.std[1]
		case placement.DiskGB:
			return h.std[2]
		}
	}
	return h.resourceMap()[rc]
}

// resourceMap is Resources, rendered from the summary when a join left
// it nil (the rendering is this state's own, so it is kept as Resources).
func (h *HostState) resourceMap() map[string]placement.ResourceSummary {
	if h.Resources == nil {
		if ps := h.summary.Get(); ps != nil {
			h.Resources = ps.Resources
		}
		h.summary = placement.LazySummary{}
	}
	return h.Resources
}

// consume takes a claimed allocation request away from the host's free
// resources so the next pick in the same request sees it.
func (h *HostState) consume(c placement.Candidate) {
	if amounts := c.Amounts(h.ProviderUUID); amounts != nil {
		cur := h.resourceMap()
		next := make(map[string]placement.ResourceSummary, len(cur))
		for rc, r := range cur {
			next[rc] = r
		}
		for rc, amount := range amounts {
			r := next[rc]
			r.Used += amount
			next[rc] = r
		}
		h.Resources = next
		if h.stdOK {
			h.std = [3]placement.ResourceSummary{next[placement.VCPU], next[placement.MemoryMB], next[placement.DiskGB]}
		}
	}
	h.NumInstances++
	h.NumIOOps++
}

// addInstance records an instance picked for this host earlier in the same
// request, as Nova's _consume_selected_host adds a stub instance, so that
// the instance-based filters and weighers see it at the next pick. The
// map is shared with the host manager's view and is copied, not written.
func (h *HostState) addInstance(uuid string, f etcdschema.Flavor) {
	next := make(map[string]*etcdschema.InstanceInfo, len(h.Instances)+1)
	for k, v := range h.Instances {
		next[k] = v
	}
	next[uuid] = &etcdschema.InstanceInfo{UUID: uuid, Host: h.Host, FlavorID: f.ID, Flavor: f.Name,
		State: etcdschema.StatusBuild}
	h.Instances = next
}
