package scheduler

import "github.com/berth-project/berth/placement"

// RamFilter is Nova's legacy RamFilter: a host passes when the requested RAM
// fit in its free RAM (capacity with the allocation ratio, less usage).
// Nova dropped it when placement took over the check (Stein); it is kept
// for the seeds, off by default, and says so in the log once.
type RamFilter struct{}

var (
	_ Filter       = RamFilter{}
	_ legacyFilter = RamFilter{}
)

func init() { registerFilter("RamFilter", func() Filter { return RamFilter{} }) }

func (RamFilter) Name() string { return "RamFilter" }

// RunOncePerRequest is false: every pick consumes from the host.
func (RamFilter) RunOncePerRequest() bool { return false }
func (RamFilter) LegacyNotice() string    { return legacyNotice }

func (RamFilter) Filter(h *HostState, c *Cycle) Status {
	return legacyFits(h, c, placement.MemoryMB, "memory_mb")
}
