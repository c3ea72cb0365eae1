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
	Service      etcdschema.Service
	Up           bool
	// Instances on the host, as reported by its agent.
	Instances map[string]*etcdschema.InstanceInfo
	// Resources is capacity and usage per class of the root provider.
	Resources map[string]placement.ResourceSummary
	// Candidates are the allocation requests placement offered, in its order.
	Candidates []placement.AllocationRequest
	// NumInstances counts instances including those picked in this request.
	NumInstances int
	// FailedBuilds is the agent's consecutive failed build count.
	FailedBuilds int
}

// Free returns capacity minus usage of one resource class.
func (h *HostState) Free(rc string) int64 {
	r := h.Resources[rc]
	return r.Capacity - r.Used
}

// Total returns the capacity of one resource class.
func (h *HostState) Total(rc string) int64 { return h.Resources[rc].Capacity }

// consume takes a claimed allocation request away from the host's free
// resources so the next pick in the same request sees it.
func (h *HostState) consume(ar placement.AllocationRequest) {
	if alloc, ok := ar.Allocations[h.ProviderUUID]; ok {
		next := make(map[string]placement.ResourceSummary, len(h.Resources))
		for rc, r := range h.Resources {
			next[rc] = r
		}
		for rc, amount := range alloc.Resources {
			r := next[rc]
			r.Used += amount
			next[rc] = r
		}
		h.Resources = next
	}
	h.NumInstances++
}
