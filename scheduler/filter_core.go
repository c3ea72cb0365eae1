package scheduler

import "github.com/berth-project/berth/placement"

// CoreFilter is Nova's legacy CoreFilter: a host passes when the requested vCPUs
// fit in its free vCPUs (capacity with the allocation ratio, less usage).
// Nova dropped it when placement took over the check (Stein); it is kept
// for the seeds, off by default, and says so in the log once.
type CoreFilter struct{}

var (
	_ Filter       = CoreFilter{}
	_ legacyFilter = CoreFilter{}
)

func init() { registerFilter("CoreFilter", func() Filter { return CoreFilter{} }) }

func (CoreFilter) Name() string { return "CoreFilter" }

// RunOncePerRequest is false: every pick consumes from the host.
func (CoreFilter) RunOncePerRequest() bool { return false }
func (CoreFilter) LegacyNotice() string    { return legacyNotice }

func (CoreFilter) Filter(h *HostState, c *Cycle) Status {
	return legacyFits(h, c, placement.VCPU, "vcpu")
}
