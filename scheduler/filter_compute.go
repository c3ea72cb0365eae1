package scheduler

// ComputeFilter passes hosts whose service is up and enabled. The disabled
// trait already keeps disabled hosts out of placement's answer; this catches
// the moment between an operator's disable and the trait, and hosts that are
// down, which placement knows nothing of.
type ComputeFilter struct{}

var _ Filter = ComputeFilter{}

func init() { registerFilter("ComputeFilter", func() Filter { return ComputeFilter{} }) }

func (ComputeFilter) Name() string            { return "ComputeFilter" }
func (ComputeFilter) RunOncePerRequest() bool { return true }

func (ComputeFilter) HostPasses(h *HostState, _ *RequestSpec, _ int) bool {
	return h.Up && h.Service != nil && !h.Service.Disabled
}
