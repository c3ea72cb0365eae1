package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Capacity, usage and free room of the cloud's resources, computed at
// scrape time from the in-memory placement index and host view (the
// source's visit walks them under their read locks): no etcd read, and
// nothing done per claim. The aggregates, by resource class, cell and
// availability zone, are always exported: a few dozen series whatever the
// number of hosts. The same per host is behind an option
// (scheduler.host_capacity_metrics): three series per class per host is
// 90,000 series at 10,000 hosts, more than many Prometheus setups want
// from one target.

// CapacityRow is one provider's capacity and usage of one resource class,
// with where it is ("" when its host is not known to the host view).
type CapacityRow struct {
	Host, Cell, Zone, ResourceClass string
	// Capacity is (total - reserved) × allocation_ratio; Used what the
	// allocations take.
	Capacity, Used int64
}

// CapacitySource calls visit once per provider and class.
type CapacitySource func(visit func(CapacityRow))

// WatchCapacity exports berth_resource_capacity, _used and _free by
// resource_class, cell and availability_zone, summed from src at each
// scrape; with perHost, berth_host_resource_capacity, _used and _free by
// host as well.
func (m *Metrics) WatchCapacity(src CapacitySource, perHost bool) {
	if m == nil {
		return
	}
	agg := []string{"resource_class", "cell", "availability_zone"}
	host := append([]string{"host"}, agg...)
	c := &capacityCollector{src: src, perHost: perHost,
		capacity: prometheus.NewDesc("berth_resource_capacity",
			"Capacity ((total - reserved) x allocation_ratio) of the compute resource providers, by resource class, cell and availability zone.", agg, nil),
		used: prometheus.NewDesc("berth_resource_used",
			"Resources allocated on the compute resource providers, by resource class, cell and availability zone.", agg, nil),
		free: prometheus.NewDesc("berth_resource_free",
			"Capacity less usage, by resource class, cell and availability zone (a provider over its capacity counts 0).", agg, nil),
		hostCapacity: prometheus.NewDesc("berth_host_resource_capacity",
			"Capacity of one host's resource provider tree, by resource class (scheduler.host_capacity_metrics).", host, nil),
		hostUsed: prometheus.NewDesc("berth_host_resource_used",
			"Resources allocated on one host's resource provider tree, by resource class (scheduler.host_capacity_metrics).", host, nil),
		hostFree: prometheus.NewDesc("berth_host_resource_free",
			"Capacity less usage on one host, by resource class (scheduler.host_capacity_metrics).", host, nil),
	}
	m.reg.MustRegister(c)
}

type capacityCollector struct {
	src                              CapacitySource
	perHost                          bool
	capacity, used, free             *prometheus.Desc
	hostCapacity, hostUsed, hostFree *prometheus.Desc
}

func (c *capacityCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.capacity
	ch <- c.used
	ch <- c.free
	if c.perHost {
		ch <- c.hostCapacity
		ch <- c.hostUsed
		ch <- c.hostFree
	}
}

// sums are one series key's totals.
type sums struct{ capacity, used, free int64 }

func (s *sums) add(r CapacityRow) {
	s.capacity += r.Capacity
	s.used += r.Used
	s.free += max(r.Capacity-r.Used, 0)
}

func (c *capacityCollector) Collect(ch chan<- prometheus.Metric) {
	type aggKey struct{ rc, cell, zone string }
	type hostKey struct {
		host string
		aggKey
	}
	agg := map[aggKey]*sums{}
	var hosts map[hostKey]*sums
	if c.perHost {
		hosts = map[hostKey]*sums{}
	}
	// Only the sums are built under the source's locks; the series are
	// sent after it returns.
	c.src(func(r CapacityRow) {
		k := aggKey{r.ResourceClass, r.Cell, r.Zone}
		s := agg[k]
		if s == nil {
			s = &sums{}
			agg[k] = s
		}
		s.add(r)
		if hosts != nil && r.Host != "" {
			hk := hostKey{r.Host, k}
			hs := hosts[hk]
			if hs == nil {
				hs = &sums{}
				hosts[hk] = hs
			}
			hs.add(r)
		}
	})
	for k, s := range agg {
		ch <- prometheus.MustNewConstMetric(c.capacity, prometheus.GaugeValue, float64(s.capacity), k.rc, k.cell, k.zone)
		ch <- prometheus.MustNewConstMetric(c.used, prometheus.GaugeValue, float64(s.used), k.rc, k.cell, k.zone)
		ch <- prometheus.MustNewConstMetric(c.free, prometheus.GaugeValue, float64(s.free), k.rc, k.cell, k.zone)
	}
	for k, s := range hosts {
		ch <- prometheus.MustNewConstMetric(c.hostCapacity, prometheus.GaugeValue, float64(s.capacity), k.host, k.rc, k.cell, k.zone)
		ch <- prometheus.MustNewConstMetric(c.hostUsed, prometheus.GaugeValue, float64(s.used), k.host, k.rc, k.cell, k.zone)
		ch <- prometheus.MustNewConstMetric(c.hostFree, prometheus.GaugeValue, float64(s.free), k.host, k.rc, k.cell, k.zone)
	}
}
