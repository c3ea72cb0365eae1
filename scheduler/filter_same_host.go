package scheduler

// SameHostFilter passes hosts that hold any of the instances named in the
// same_host hint; with no hint every host passes.
type SameHostFilter struct{}

var _ Filter = SameHostFilter{}

func init() { registerFilter("SameHostFilter", func() Filter { return SameHostFilter{} }) }

func (SameHostFilter) Name() string            { return "SameHostFilter" }
func (SameHostFilter) RunOncePerRequest() bool { return true }

func (SameHostFilter) HostPasses(h *HostState, spec *RequestSpec, _ int) bool {
	if len(spec.Hints.SameHost) == 0 {
		return true
	}
	for _, u := range spec.Hints.SameHost {
		if _, ok := h.Instances[u]; ok {
			return true
		}
	}
	return false
}
