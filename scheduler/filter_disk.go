package scheduler

import "github.com/berth-project/berth/placement"

// DiskFilter is Nova's legacy DiskFilter: a host passes when the requested disk
// fit in its free disk (capacity with the allocation ratio, less usage).
// Nova dropped it when placement took over the check (Stein); it is kept
// for the seeds, off by default, and says so in the log once.
type DiskFilter struct{}

var (
	_ Filter       = DiskFilter{}
	_ legacyFilter = DiskFilter{}
)

func init() { registerFilter("DiskFilter", func() Filter { return DiskFilter{} }) }

func (DiskFilter) Name() string { return "DiskFilter" }

// RunOncePerRequest is false: every pick consumes from the host.
func (DiskFilter) RunOncePerRequest() bool { return false }
func (DiskFilter) LegacyNotice() string    { return legacyNotice }

func (DiskFilter) Filter(h *HostState, c *Cycle) Status {
	return legacyFits(h, c, placement.DiskGB, "disk_gb")
}
