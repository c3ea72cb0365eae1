package scheduler

import "strings"

// AggregateTypeAffinityFilter passes a host whose aggregates' instance_type
// metadata (a comma list of flavor names) names the requested flavor; a
// host with no such metadata passes.
type AggregateTypeAffinityFilter struct{}

var _ Filter = AggregateTypeAffinityFilter{}

func init() {
	registerFilter("AggregateTypeAffinityFilter", func() Filter { return AggregateTypeAffinityFilter{} })
}

func (AggregateTypeAffinityFilter) Name() string            { return "AggregateTypeAffinityFilter" }
func (AggregateTypeAffinityFilter) RunOncePerRequest() bool { return true }

func (AggregateTypeAffinityFilter) HostPasses(h *HostState, spec *RequestSpec, _ int) bool {
	vals := aggregateValues(h, "instance_type")
	for _, v := range vals {
		for _, name := range strings.Split(v, ",") {
			if strings.TrimSpace(name) == spec.Flavor.Name {
				return true
			}
		}
	}
	return len(vals) == 0
}
