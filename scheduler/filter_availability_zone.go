package scheduler

import (
	"strings"

	"github.com/berth-project/berth/etcdschema"
)

// AvailabilityZoneFilter passes a host in the requested availability zone:
// one of its aggregates has that availability_zone, or it is in no AZ
// aggregate and the request is for the default zone. With no zone asked
// for, every host passes.
//
// Nova removed it in 2024.1 in favour of the map_az_to_placement_aggregate
// request filter, which Berth always runs; the filter stays for the seeds
// and for hosts whose provider has not been given its aggregates yet.
type AvailabilityZoneFilter struct{}

var _ Filter = AvailabilityZoneFilter{}

func init() {
	registerFilter("AvailabilityZoneFilter", func() Filter { return AvailabilityZoneFilter{} })
}

func (AvailabilityZoneFilter) Name() string            { return "AvailabilityZoneFilter" }
func (AvailabilityZoneFilter) RunOncePerRequest() bool { return true }

func (AvailabilityZoneFilter) Filter(h *HostState, c *Cycle) Status {
	az := c.Spec.AvailabilityZone
	if az == "" {
		return pass
	}
	if zones := aggregateValues(h, etcdschema.AggregateAZKey); len(zones) > 0 {
		if contains(zones, az) {
			return pass
		}
		return rejectWith(explainAvailabilityZone)
	}
	// In no AZ aggregate: the host's zone is the default one.
	if az != h.AvailabilityZone {
		return rejectWith(explainAvailabilityZone)
	}
	return pass
}

func explainAvailabilityZone(h *HostState, c *Cycle) string {
	if zones := aggregateValues(h, etcdschema.AggregateAZKey); len(zones) > 0 {
		return "in availability zone " + strings.Join(zones, ", ") + ", not " + c.Spec.AvailabilityZone
	}
	return "in no availability zone aggregate (default zone " + h.AvailabilityZone + "), not in " + c.Spec.AvailabilityZone
}
