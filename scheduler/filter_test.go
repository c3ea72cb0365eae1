package scheduler

import (
	"testing"

	"github.com/berth-project/berth/etcdschema"
)

func hostWith(up, disabled bool, instances ...string) *HostState {
	h := &HostState{Host: "h", Up: up, Service: &etcdschema.Service{Disabled: disabled},
		Instances: map[string]*etcdschema.InstanceInfo{}}
	for _, u := range instances {
		h.Instances[u] = &etcdschema.InstanceInfo{UUID: u}
	}
	return h
}

func TestFilters(t *testing.T) {
	maintenance := hostWith(true, true)
	maintenance.Service.DisabledReason = "maintenance"
	unregistered := hostWith(true, false)
	unregistered.Service = nil
	cases := []struct {
		desc   string
		filter Filter
		host   *HostState
		hints  etcdschema.SchedulerHints
		want   string // the reason, or passes
	}{
		{"compute: up and enabled passes", ComputeFilter{}, hostWith(true, false), etcdschema.SchedulerHints{}, passes},
		{"compute: down fails", ComputeFilter{}, hostWith(false, false), etcdschema.SchedulerHints{}, "compute service is down"},
		{"compute: disabled fails", ComputeFilter{}, hostWith(true, true), etcdschema.SchedulerHints{}, "compute service is disabled"},
		{"compute: the operator's disabled reason is given", ComputeFilter{}, maintenance, etcdschema.SchedulerHints{},
			"compute service is disabled (maintenance)"},
		{"compute: no service record fails", ComputeFilter{}, unregistered, etcdschema.SchedulerHints{},
			"no compute service record"},
		{"same_host: no hint passes", SameHostFilter{}, hostWith(true, false), etcdschema.SchedulerHints{}, passes},
		{"same_host: holds one of them passes", SameHostFilter{}, hostWith(true, false, "a"),
			etcdschema.SchedulerHints{SameHost: []string{"x", "a"}}, passes},
		{"same_host: holds none fails", SameHostFilter{}, hostWith(true, false, "b"),
			etcdschema.SchedulerHints{SameHost: []string{"a"}}, "holds none of the same_host instances a"},
		{"different_host: no hint passes", DifferentHostFilter{}, hostWith(true, false, "a"), etcdschema.SchedulerHints{}, passes},
		{"different_host: holds one fails", DifferentHostFilter{}, hostWith(true, false, "a"),
			etcdschema.SchedulerHints{DifferentHost: []string{"a", "z"}}, "holds instance a named in different_host"},
		{"different_host: holds none passes", DifferentHostFilter{}, hostWith(true, false, "b"),
			etcdschema.SchedulerHints{DifferentHost: []string{"a"}}, passes},
	}
	for _, c := range cases {
		t.Run(c.desc, func(t *testing.T) {
			cy := newCycle(&RequestSpec{Hints: c.hints})
			got := c.filter.Filter(c.host, cy)
			if got.Passed() != (c.want == passes) || got.Reason(c.host, cy) != c.want {
				t.Fatalf("Filter: passed %v, reason %q; want reason %q", got.Passed(), got.Reason(c.host, cy), c.want)
			}
		})
	}
}

func TestNewFiltersRejectsUnknownNames(t *testing.T) {
	if _, err := NewFilters([]string{"ComputeFilter", "NoSuchFilter"}); err == nil {
		t.Fatal("want an error for an unknown filter")
	}
}
