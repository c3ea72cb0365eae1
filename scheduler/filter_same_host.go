package scheduler

import "strings"

// SameHostFilter passes hosts that hold any of the instances named in the
// same_host hint; with no hint every host passes.
type SameHostFilter struct{}

var _ Filter = SameHostFilter{}

func init() { registerFilter("SameHostFilter", func() Filter { return SameHostFilter{} }) }

func (SameHostFilter) Name() string            { return "SameHostFilter" }
func (SameHostFilter) RunOncePerRequest() bool { return true }

func (SameHostFilter) Filter(h *HostState, c *Cycle) Status {
	same := c.Spec.Hints.SameHost
	if len(same) == 0 {
		return pass
	}
	for _, u := range same {
		if _, ok := h.Instances[u]; ok {
			return pass
		}
	}
	return rejectWith(explainSameHost)
}

func explainSameHost(_ *HostState, c *Cycle) string {
	return "holds none of the same_host instances " + strings.Join(c.Spec.Hints.SameHost, ", ")
}
