package scheduler

import "strings"

// aggregateExtraSpecsScope is the only scope this filter reads besides
// unscoped keys.
const aggregateExtraSpecsScope = "aggregate_instance_extra_specs"

// AggregateInstanceExtraSpecsFilter matches flavor extra specs against the
// host's aggregate metadata. Every extra spec that is unscoped, or scoped
// aggregate_instance_extra_specs:, must name a metadata key of the host's
// aggregates (a missing key fails the host) and at least one of that key's
// values must match it (extraSpecMatch, with Nova's operators). Specs with
// any other scope (resources:, trait:, hw:, ...) are skipped.
type AggregateInstanceExtraSpecsFilter struct{}

var _ Filter = AggregateInstanceExtraSpecsFilter{}

func init() {
	registerFilter("AggregateInstanceExtraSpecsFilter", func() Filter { return AggregateInstanceExtraSpecsFilter{} })
}

func (AggregateInstanceExtraSpecsFilter) Name() string            { return "AggregateInstanceExtraSpecsFilter" }
func (AggregateInstanceExtraSpecsFilter) RunOncePerRequest() bool { return true }

func (AggregateInstanceExtraSpecsFilter) HostPasses(h *HostState, spec *RequestSpec, _ int) bool {
	// Every spec must hold, so the order does not matter; the values are
	// looked up in place rather than gathered, as this runs per host.
	for key, req := range spec.Flavor.ExtraSpecs {
		if scope, rest, scoped := strings.Cut(key, ":"); scoped {
			if scope != aggregateExtraSpecsScope {
				continue
			}
			key = rest
		}
		found, matched := false, false
		for _, a := range h.Aggregates {
			if v, ok := a.Metadata[key]; ok {
				found = true
				if extraSpecMatch(v, req) {
					matched = true
					break
				}
			}
		}
		if !found || !matched {
			return false
		}
	}
	return true
}
