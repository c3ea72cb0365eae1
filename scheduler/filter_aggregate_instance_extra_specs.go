package scheduler

import (
	"fmt"
	"strings"
)

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

func (AggregateInstanceExtraSpecsFilter) Filter(h *HostState, c *Cycle) Status {
	// Every spec must hold, so the order does not matter; the values are
	// looked up in place rather than gathered, as this runs per host.
	for spec, req := range c.Spec.Flavor.ExtraSpecs {
		if _, found, matched := hostMeetsExtraSpec(h, spec, req); !found || !matched {
			return rejectWith(explainExtraSpecs)
		}
	}
	return pass
}

// hostMeetsExtraSpec checks one extra spec against h's aggregates: key is
// the metadata key it names (its scope cut off), found says an aggregate
// has the key and matched that one of their values matches. Specs of
// other scopes are met by every host.
func hostMeetsExtraSpec(h *HostState, spec, req string) (key string, found, matched bool) {
	key = spec
	if scope, rest, scoped := strings.Cut(spec, ":"); scoped {
		if scope != aggregateExtraSpecsScope {
			return key, true, true
		}
		key = rest
	}
	for _, a := range h.Aggregates {
		if v, ok := a.Metadata[key]; ok {
			found = true
			if extraSpecMatch(v, req) {
				return key, true, true
			}
		}
	}
	return key, found, false
}

// explainExtraSpecs names the first extra spec, in key order, that h does
// not meet.
func explainExtraSpecs(h *HostState, c *Cycle) string {
	specs := c.Spec.Flavor.ExtraSpecs
	for _, spec := range sortedKeys(specs) {
		req := specs[spec]
		key, found, matched := hostMeetsExtraSpec(h, spec, req)
		switch {
		case !found:
			return fmt.Sprintf("no aggregate metadata %s for extra spec %s=%q", key, spec, req)
		case !matched:
			return fmt.Sprintf("aggregate metadata %s=%q does not match extra spec %s=%q",
				key, strings.Join(aggregateValues(h, key), "; "), spec, req)
		}
	}
	return "meets every extra spec" // not reached: the filter refused it for one
}
