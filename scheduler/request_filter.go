package scheduler

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/placement"
)

// BuildPlacementQuery turns a request spec into an allocation-candidates
// query, as Nova's request filters and ResourceRequest.from_request_spec do:
// flavor amounts (overridden by resources:RC extra specs), required and
// forbidden traits from trait:T extra specs, and always
// !COMPUTE_STATUS_DISABLED (seed pre-filter-disabled-computes). limit is
// dropped for requests whose hints need every host considered.
func BuildPlacementQuery(spec *RequestSpec, maxResults int) placement.CandidateQuery {
	f := spec.Flavor
	res := map[string]int64{}
	add := func(rc string, n int64) {
		if n > 0 {
			res[rc] = n
		}
	}
	add(placement.VCPU, int64(f.VCPUs))
	add(placement.MemoryMB, int64(f.RAMMB))
	disk := int64(f.DiskGB) + int64(f.EphemeralGB) + int64((f.SwapMB+1023)/1024)
	add(placement.DiskGB, disk)

	g := placement.RequestGroup{Resources: res}
	for _, key := range sortedKeys(f.ExtraSpecs) {
		val := f.ExtraSpecs[key]
		switch {
		case strings.HasPrefix(key, "resources:"):
			rc := strings.TrimPrefix(key, "resources:")
			n, err := strconv.ParseInt(val, 10, 64)
			if err != nil || n < 0 || !validResourceClass(rc) {
				continue // Nova ignores malformed resource extra specs, with a warning
			}
			if n == 0 {
				delete(res, rc) // strip_zeros: resources:VCPU=0 removes VCPU
			} else {
				res[rc] = n
			}
		case strings.HasPrefix(key, "trait:"):
			t := strings.TrimPrefix(key, "trait:")
			switch val {
			case "required":
				g.Required = append(g.Required, t)
			case "forbidden":
				g.Forbidden = append(g.Forbidden, t)
			}
		}
	}
	// compute_status_filter: always, on the root provider (the compute node).
	q := placement.CandidateQuery{
		Groups:        []placement.RequestGroup{g},
		RootForbidden: []string{placement.TraitComputeStatusDisabled},
		Limit:         maxResults,
	}
	if len(spec.Hints.SameHost) > 0 || len(spec.Hints.DifferentHost) > 0 || spec.Hints.Group != "" {
		q.Limit = 0 // affinity must see every host, not a sample
	}
	return q
}

func validResourceClass(rc string) bool {
	if rc == "" {
		return false
	}
	for _, c := range rc {
		if !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// Metadata keys Nova's aggregate request filters read.
const (
	// tenantMetadataPrefix marks an aggregate for projects: any key with
	// this prefix whose value is the project id (filter_tenant_id,
	// filter_tenant_id_2, ...).
	tenantMetadataPrefix = "filter_tenant_id"
	// traitMetadataPrefix with value "required" isolates an aggregate for
	// requests that require the trait.
	traitMetadataPrefix = "trait:"
)

// applyAggregateRequestFilters runs Nova's aggregate request filters
// (request_filter.py, in its order) on a query built by
// BuildPlacementQuery, over the aggregates the host manager knows:
//
//   - require_tenant_aggregate, when limit_tenants_to_placement_aggregate:
//     member_of the aggregates whose filter_tenant_id* metadata names the
//     project; with none, fail if placement_aggregate_required_for_tenants.
//   - map_az_to_placement_aggregate: member_of the aggregates whose
//     availability_zone is the requested one. Berth adds one thing: a
//     request for the default AZ, which no aggregate names, forbids every
//     AZ aggregate, since a host in an AZ aggregate is not in the default
//     zone (Nova left that to the AvailabilityZoneFilter it later removed).
//   - isolate_aggregates, when enable_isolated_aggregate_filtering: forbid
//     aggregates with trait:T=required metadata for a T the request does
//     not require.
//
// member_of and forbidden aggregates go on the unsuffixed group, as Nova's
// requested_destination aggregates do. A returned error is Nova's
// RequestFilterFailed: the request cannot be placed.
func applyAggregateRequestFilters(q *placement.CandidateQuery, spec *RequestSpec, aggs []*etcdschema.Aggregate, cfg Config) error {
	g := &q.Groups[0]
	if cfg.LimitTenantsToPlacementAggregate {
		var mine []string
		for _, a := range aggs {
			for k, v := range a.Metadata {
				if strings.HasPrefix(k, tenantMetadataPrefix) && v == spec.ProjectID {
					mine = append(mine, a.UUID)
					break
				}
			}
		}
		switch {
		case len(mine) > 0:
			g.MemberOf = append(g.MemberOf, mine)
		case cfg.PlacementAggregateRequiredForTenants:
			return fmt.Errorf("no hosts available for tenant %s: no aggregate is assigned to it (filter_tenant_id)", spec.ProjectID)
		}
	}
	if az := spec.AvailabilityZone; az != "" {
		var inAZ, anyAZ []string
		for _, a := range aggs {
			switch z := a.AvailabilityZone(); {
			case z == az:
				inAZ = append(inAZ, a.UUID)
			case z != "":
				anyAZ = append(anyAZ, a.UUID)
			}
		}
		switch {
		case len(inAZ) > 0:
			g.MemberOf = append(g.MemberOf, inAZ)
		case az == cfg.DefaultAvailabilityZone:
			g.ForbiddenAggregates = append(g.ForbiddenAggregates, anyAZ...)
		}
	}
	if cfg.EnableIsolatedAggregateFiltering {
		required := map[string]bool{}
		for _, grp := range q.Groups {
			for _, t := range grp.Required {
				required[t] = true
			}
		}
		for _, a := range aggs {
			for k, v := range a.Metadata {
				if strings.HasPrefix(k, traitMetadataPrefix) && v == "required" &&
					!required[strings.TrimPrefix(k, traitMetadataPrefix)] {
					g.ForbiddenAggregates = append(g.ForbiddenAggregates, a.UUID)
					break
				}
			}
		}
	}
	return nil
}
