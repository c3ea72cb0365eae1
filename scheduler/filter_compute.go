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

func (ComputeFilter) Filter(h *HostState, _ *Cycle) Status {
	switch {
	case h.Service == nil:
		return reject("no compute service record")
	case !h.Up:
		return reject("compute service is down")
	case h.Service.Disabled:
		if h.Service.DisabledReason != "" {
			return reject("compute service is disabled (" + h.Service.DisabledReason + ")")
		}
		return reject("compute service is disabled")
	}
	return pass
}
