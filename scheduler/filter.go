package scheduler

import (
	"fmt"
	"sort"
)

// Filter decides whether a host can take an instance of the request.
type Filter interface {
	// Name is the name used in config and in "no valid host" reasons.
	Name() string
	// RunOncePerRequest filters run only for the first instance of a
	// multi-instance request: their answer cannot change between picks.
	RunOncePerRequest() bool
	// HostPasses reports whether h may take the instance at index i.
	HostPasses(h *HostState, spec *RequestSpec, i int) bool
}

// filterFactories maps config names to constructors. Filters register
// themselves from their own file.
var filterFactories = map[string]func() Filter{}

func registerFilter(name string, f func() Filter) { filterFactories[name] = f }

// FilterNames lists every known filter, for config validation and docs.
func FilterNames() []string {
	out := make([]string, 0, len(filterFactories))
	for n := range filterFactories {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// NewFilters builds the enabled filters in the configured order.
func NewFilters(names []string) ([]Filter, error) {
	out := make([]Filter, 0, len(names))
	for _, n := range names {
		f, ok := filterFactories[n]
		if !ok {
			return nil, fmt.Errorf("unknown filter %q (known: %v)", n, FilterNames())
		}
		out = append(out, f())
	}
	return out, nil
}

// runFilters applies filters in order, stopping when none is left, and
// counts what each removed.
func runFilters(filters []Filter, hosts []*HostState, spec *RequestSpec, i int, counts map[string]int) []*HostState {
	for _, f := range filters {
		if i > 0 && f.RunOncePerRequest() {
			continue
		}
		kept := make([]*HostState, 0, len(hosts))
		for _, h := range hosts {
			if f.HostPasses(h, spec, i) {
				kept = append(kept, h)
			}
		}
		counts[f.Name()] += len(hosts) - len(kept)
		hosts = kept
		if len(hosts) == 0 {
			break
		}
	}
	return hosts
}
