package scheduler

import "github.com/berth-project/berth/placement"

// RAMWeigher prefers hosts with more free RAM (spreading); a negative
// multiplier stacks instead.
type RAMWeigher struct{}

// CPUWeigher prefers hosts with more free vCPUs.
type CPUWeigher struct{}

// DiskWeigher prefers hosts with more free disk.
type DiskWeigher struct{}

var (
	_ Weigher = RAMWeigher{}
	_ Weigher = CPUWeigher{}
	_ Weigher = DiskWeigher{}
)

func init() {
	registerWeigher("ram", func() Weigher { return RAMWeigher{} })
	registerWeigher("cpu", func() Weigher { return CPUWeigher{} })
	registerWeigher("disk", func() Weigher { return DiskWeigher{} })
}

func (RAMWeigher) Name() string { return "RAMWeigher" }
func (RAMWeigher) Weigh(h *HostState, _ *Cycle) float64 {
	return float64(h.Free(placement.MemoryMB))
}
func (CPUWeigher) Name() string                         { return "CPUWeigher" }
func (CPUWeigher) Weigh(h *HostState, _ *Cycle) float64 { return float64(h.Free(placement.VCPU)) }
func (DiskWeigher) Name() string                        { return "DiskWeigher" }
func (DiskWeigher) Weigh(h *HostState, _ *Cycle) float64 {
	return float64(h.Free(placement.DiskGB))
}
