package scheduler

// DifferentHostFilter passes hosts that hold none of the instances named
// in the different_host hint; with no hint every host passes.
type DifferentHostFilter struct{}

var _ Filter = DifferentHostFilter{}

func init() { registerFilter("DifferentHostFilter", func() Filter { return DifferentHostFilter{} }) }

func (DifferentHostFilter) Name() string            { return "DifferentHostFilter" }
func (DifferentHostFilter) RunOncePerRequest() bool { return true }

func (DifferentHostFilter) HostPasses(h *HostState, spec *RequestSpec, _ int) bool {
	for _, u := range spec.Hints.DifferentHost {
		if _, ok := h.Instances[u]; ok {
			return false
		}
	}
	return true
}
