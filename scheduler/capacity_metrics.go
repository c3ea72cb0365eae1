package scheduler

import "github.com/berth-project/berth/internal/metrics"

// CapacityVisitor is placement's walk over its providers' capacity and
// usage (placement.Service.VisitCapacity).
type CapacityVisitor interface {
	VisitCapacity(visit func(root, rc string, capacity, used int64))
}

// CapacitySource is the source of berth_resource_* (metrics.WatchCapacity):
// placement's providers, each with the host, cell and availability zone of
// its tree's compute node as this host manager sees them (hosts in no AZ
// aggregate are in defaultAZ). It reads only memory: the host manager's
// view once under its lock, then placement's index.
func (hm *HostManager) CapacitySource(p CapacityVisitor, defaultAZ string) metrics.CapacitySource {
	if defaultAZ == "" {
		defaultAZ = "nova"
	}
	return func(visit func(metrics.CapacityRow)) {
		type where struct{ host, cell, zone string }
		hm.mu.RLock()
		at := make(map[string]where, len(hm.byProvider))
		for uuid, r := range hm.byProvider {
			at[uuid] = where{host: r.name, cell: cellOf(r)}
		}
		hm.mu.RUnlock()
		aggs := hm.aggregates()
		for uuid, w := range at {
			w.zone = hostAvailabilityZone(aggs.byHost[w.host], defaultAZ)
			at[uuid] = w
		}
		p.VisitCapacity(func(root, rc string, capacity, used int64) {
			w := at[root]
			visit(metrics.CapacityRow{Host: w.host, Cell: w.cell, Zone: w.zone, ResourceClass: rc, Capacity: capacity, Used: used})
		})
	}
}
