package scheduler

// DifferentHostFilter passes hosts that hold none of the instances named
// in the different_host hint; with no hint every host passes.
type DifferentHostFilter struct{}

var _ Filter = DifferentHostFilter{}

func init() { registerFilter("DifferentHostFilter", func() Filter { return DifferentHostFilter{} }) }

func (DifferentHostFilter) Name() string            { return "DifferentHostFilter" }
func (DifferentHostFilter) RunOncePerRequest() bool { return true }

func (DifferentHostFilter) Filter(h *HostState, c *Cycle) Status {
	for _, u := range c.Spec.Hints.DifferentHost {
		if _, ok := h.Instances[u]; ok {
			return reject("holds instance " + u + " named in different_host")
		}
	}
	return pass
}
