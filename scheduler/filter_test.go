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
	cases := []struct {
		desc   string
		filter Filter
		host   *HostState
		hints  etcdschema.SchedulerHints
		want   bool
	}{
		{"compute: up and enabled passes", ComputeFilter{}, hostWith(true, false), etcdschema.SchedulerHints{}, true},
		{"compute: down fails", ComputeFilter{}, hostWith(false, false), etcdschema.SchedulerHints{}, false},
		{"compute: disabled fails", ComputeFilter{}, hostWith(true, true), etcdschema.SchedulerHints{}, false},
		{"same_host: no hint passes", SameHostFilter{}, hostWith(true, false), etcdschema.SchedulerHints{}, true},
		{"same_host: holds one of them passes", SameHostFilter{}, hostWith(true, false, "a"),
			etcdschema.SchedulerHints{SameHost: []string{"x", "a"}}, true},
		{"same_host: holds none fails", SameHostFilter{}, hostWith(true, false, "b"),
			etcdschema.SchedulerHints{SameHost: []string{"a"}}, false},
		{"different_host: no hint passes", DifferentHostFilter{}, hostWith(true, false, "a"), etcdschema.SchedulerHints{}, true},
		{"different_host: holds one fails", DifferentHostFilter{}, hostWith(true, false, "a"),
			etcdschema.SchedulerHints{DifferentHost: []string{"a", "z"}}, false},
		{"different_host: holds none passes", DifferentHostFilter{}, hostWith(true, false, "b"),
			etcdschema.SchedulerHints{DifferentHost: []string{"a"}}, true},
	}
	for _, c := range cases {
		t.Run(c.desc, func(t *testing.T) {
			spec := &RequestSpec{Hints: c.hints}
			if got := c.filter.HostPasses(c.host, spec, 0); got != c.want {
				t.Fatalf("HostPasses = %v, want %v", got, c.want)
			}
		})
	}
}

func TestNewFiltersRejectsUnknownNames(t *testing.T) {
	if _, err := NewFilters([]string{"ComputeFilter", "NoSuchFilter"}); err == nil {
		t.Fatal("want an error for an unknown filter")
	}
}
