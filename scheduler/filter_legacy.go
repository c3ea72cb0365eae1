package scheduler

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
func legacyFits(h *HostState, spec *RequestSpec, rc, limitKey string) bool {
	want := requestedAmount(spec, rc)
	r, ok := h.Resources[rc]
	if want == 0 || !ok || r.Capacity == 0 {
		return true
	}
	if r.Capacity-r.Used < want {
		return false
	}
	h.setLimit(limitKey, r.Capacity)
	return true
}

// requestedAmount is the amount of rc the request asks of the compute
// node: the flavor's, as overridden by resources: extra specs.
func requestedAmount(spec *RequestSpec, rc string) int64 {
	q := BuildPlacementQuery(spec, 0)
	return q.Groups[0].Resources[rc]
}

const legacyNotice = "placement already refuses hosts without room, in the claim's own transaction; this filter only repeats the check on the scheduler's view"
