package scheduler

import (
	"strconv"
	"strings"

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
