package scheduler

// TypeAffinityFilter passes a host that is empty or whose every instance
// has the requested flavor, so each host runs one flavor only.
//
// Nova removed it in Queens (ed3c69cb45): it needs every instance of every
// host in the scheduler, and flavor packing is better done with
// AggregateTypeAffinityFilter and aggregates. Berth has the per-host
// instance view anyway (seed isolate-scheduler-db), so the filter is cheap
// here; it is kept for the seeds that name it, and is off by default.
type TypeAffinityFilter struct{}

var _ Filter = TypeAffinityFilter{}

func init() { registerFilter("TypeAffinityFilter", func() Filter { return TypeAffinityFilter{} }) }

func (TypeAffinityFilter) Name() string { return "TypeAffinityFilter" }

// RunOncePerRequest is false: an earlier pick of this request puts the
// flavor on the host, which the next pick must see.
func (TypeAffinityFilter) RunOncePerRequest() bool { return false }

func (TypeAffinityFilter) HostPasses(h *HostState, spec *RequestSpec, _ int) bool {
	for _, in := range h.Instances {
		if in.FlavorID != spec.Flavor.ID {
			return false
		}
	}
	return true
}
