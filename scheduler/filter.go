package scheduler

import (
	"fmt"
	"sort"
)

// Filter decides whether a host can take the instance being placed, and
// says why not.
type Filter interface {
	// Name is the name used in config and in "no valid host" reasons.
	Name() string
	// RunOncePerRequest filters run only for the first instance of a
	// multi-instance request: their answer cannot change between picks.
	RunOncePerRequest() bool
	// Filter says whether h may take c's current instance (c.Instance,
	// c.Index); a refusal carries the reason, which "no valid host"
	// answers report.
	Filter(h *HostState, c *Cycle) Status
}

// Status is a filter's answer for one host: the zero Status passes it, a
// rejection says why in words an operator can act on ("RAM: 512 MB free,
// 2048 MB requested").
//
// A reason that depends on the host is worded only when asked for, by a
// plain function of the host and the cycle the filter saw, which the
// caller passes to Reason (it holds both; the Status need not): a request
// turns hundreds of hosts down for one reason and keeps the words of a
// few (maxSampleReasons), and wording (or even a closure) for every one
// made filtering 10,000 hosts much slower (BenchmarkFilterAndWeigh).
type Status struct {
	Code Code
	// text is a fixed reason; explain words one from h and c on demand.
	text    string
	explain func(h *HostState, c *Cycle) string
}

// Code is whether a host passed a filter.
type Code uint8

const (
	// Pass lets the host through.
	Pass Code = iota
	// Reject turns it down for this instance.
	Reject
)

// Passed says the host passed.
func (s Status) Passed() bool { return s.Code == Pass }

// Reason is why h was turned down ("" when it passed), given the host and
// cycle the filter saw. It is worded from them as they are now: ask before
// the next pick changes them, as runFilters does.
func (s Status) Reason(h *HostState, c *Cycle) string {
	if s.explain != nil {
		return s.explain(h, c)
	}
	return s.text
}

// pass is the Status of a host that passes.
var pass = Status{}

// reject is the Status of a host turned down for a fixed reason.
func reject(reason string) Status { return Status{Code: Reject, text: reason} }

// rejectWith is the Status of a host turned down for the reason explain
// words from the host and cycle, when asked. explain is a plain function
// (no closure), so the rejection allocates nothing.
func rejectWith(explain func(h *HostState, c *Cycle) string) Status {
	return Status{Code: Reject, explain: explain}
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

// runFilters applies filters in order for c's current instance, stopping
// when no host is left, and records in c what each removed and why.
func runFilters(filters []Filter, hosts []*HostState, c *Cycle) []*HostState {
	for _, f := range filters {
		if c.Index > 0 && f.RunOncePerRequest() {
			continue
		}
		// kept is hosts itself until the filter turns one down: most
		// filters pass every host of most requests, and a copy per filter
		// per request was garbage. The input is never written (the join's
		// list is kept whole for explaining a failure).
		kept, copied := hosts, false
		for i, h := range hosts {
			st := f.Filter(h, c)
			if st.Passed() {
				if copied {
					kept = append(kept, h)
				}
				continue
			}
			if !copied {
				kept, copied = append(make([]*HostState, 0, len(hosts)), hosts[:i]...), true
			}
			c.reject(f.Name(), h, st)
		}
		hosts = kept
		if len(hosts) == 0 {
			break
		}
	}
	return hosts
}
