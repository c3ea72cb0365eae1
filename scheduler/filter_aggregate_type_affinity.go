package scheduler

import (
	"fmt"
	"strings"
)

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

func (AggregateTypeAffinityFilter) Filter(h *HostState, c *Cycle) Status {
	vals := aggregateValues(h, "instance_type")
	for _, v := range vals {
		for _, name := range strings.Split(v, ",") {
			if strings.TrimSpace(name) == c.Spec.Flavor.Name {
				return pass
			}
		}
	}
	if len(vals) == 0 {
		return pass
	}
	return rejectWith(explainAggregateTypeAffinity)
}

func explainAggregateTypeAffinity(h *HostState, c *Cycle) string {
	return fmt.Sprintf("aggregate instance_type %q does not name flavor %s",
		strings.Join(aggregateValues(h, "instance_type"), "; "), c.Spec.Flavor.Name)
}
