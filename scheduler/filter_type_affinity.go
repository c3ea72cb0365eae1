package scheduler

import "github.com/berth-project/berth/etcdschema"

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

func (TypeAffinityFilter) Filter(h *HostState, c *Cycle) Status {
	if otherFlavor(h, c.Spec.Flavor.ID) != nil {
		return rejectWith(explainTypeAffinity)
	}
	return pass
}

// otherFlavor is an instance on h of a flavor other than flavorID, nil
// when there is none.
func otherFlavor(h *HostState, flavorID string) *etcdschema.InstanceInfo {
	for _, in := range h.Instances {
		if in.FlavorID != flavorID {
			return in
		}
	}
	return nil
}

func explainTypeAffinity(h *HostState, c *Cycle) string {
	want := c.Spec.Flavor.ID
	for _, u := range sortedKeys(h.Instances) {
		if in := h.Instances[u]; in.FlavorID != want {
			return "runs flavor " + in.FlavorID + " (instance " + in.UUID + "), not flavor " + want
		}
	}
	return "runs only flavor " + want // not reached: the filter refused it
}
