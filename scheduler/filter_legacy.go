package scheduler

import (
	"fmt"

	"github.com/berth-project/berth/placement"
)

// legacyFilter is implemented by filters whose check placement already
// makes; the scheduler logs LegacyNotice once, when it is built with one.
type legacyFilter interface {
	LegacyNotice() string
}

// legacyFits is Nova's Core/Ram/DiskFilter check on placement's numbers:
// the request's amount of rc must fit in capacity (total less reserved,
// times the allocation ratio) minus usage. A host that reports no
// inventory of the class passes, as Nova's CoreFilter passed a host whose
// vcpus_total was unknown. A host that passes gets Nova's oversubscription
// limit under limitKey (vcpu, memory_mb, disk_gb), which its Selection
// carries as Nova's did; placement's capacity stands in for Nova's
// total times ratio, since it is what the claim is checked against.
func legacyFits(h *HostState, c *Cycle, rc, limitKey string) Status {
	want := c.requestedAmount(rc)
	// The standard classes' columns (resource) render no summary: a
	// class the host has no inventory of reads as zero capacity.
	r := h.resource(rc)
	if want == 0 || r.Capacity == 0 {
		return pass
	}
	if r.Capacity-r.Used < want {
		return rejectWith(legacyShort[rc])
	}
	h.setLimit(limitKey, r.Capacity)
	return pass
}

// legacyShort words, per class, how far short of the request a host is.
var legacyShort = map[string]func(h *HostState, c *Cycle) string{
	placement.VCPU: func(h *HostState, c *Cycle) string {
		return fmt.Sprintf("VCPU: %d free, %d requested", h.Free(placement.VCPU), c.requestedAmount(placement.VCPU))
	},
	placement.MemoryMB: func(h *HostState, c *Cycle) string {
		return fmt.Sprintf("RAM: %d MB free, %d MB requested", h.Free(placement.MemoryMB), c.requestedAmount(placement.MemoryMB))
	},
	placement.DiskGB: func(h *HostState, c *Cycle) string {
		return fmt.Sprintf("disk: %d GB free, %d GB requested", h.Free(placement.DiskGB), c.requestedAmount(placement.DiskGB))
	},
}

// requestedAmount is the amount of rc the request asks of the compute
// node: the flavor's, as overridden by resources: extra specs. It is
// worked out once per request, not once per host.
func (c *Cycle) requestedAmount(rc string) int64 {
	if c.requestedRes == nil {
		c.requestedRes = BuildPlacementQuery(c.Spec, 0).Groups[0].Resources
	}
	return c.requestedRes[rc]
}

const legacyNotice = "placement already refuses hosts without room, in the claim's own transaction; this filter only repeats the check on the scheduler's view"
