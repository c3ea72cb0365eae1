package scheduler

import (
	"fmt"
	"testing"
)

func TestRunFiltersLimited(t *testing.T) {
	var hosts []*HostState
	for i := 0; i < 10; i++ {
		h := hostWith(i%2 == 0, false) // odd hosts are down
		h.Host = fmt.Sprintf("h%d", i)
		hosts = append(hosts, h)
	}
	filters := []Filter{ComputeFilter{}}
	cases := []struct {
		desc        string
		limit       int
		start       int
		want        []string
		wantRemoved int
		wantReasons []string // the first few, in the order met
	}{
		{"stops once limit hosts pass", 2, 0, []string{"h0", "h2"}, 1,
			[]string{"h1: compute service is down"}},
		{"starts where asked and wraps", 3, 7, []string{"h8", "h0", "h2"}, 3,
			[]string{"h7: compute service is down", "h9: compute service is down", "h1: compute service is down"}},
		{"a limit above what passes returns all that pass", 9, 3, []string{"h4", "h6", "h8", "h0", "h2"}, 5,
			[]string{"h3: compute service is down", "h5: compute service is down", "h7: compute service is down"}},
	}
	for _, c := range cases {
		t.Run(c.desc, func(t *testing.T) {
			cy := newCycle(&RequestSpec{})
			got := runFiltersLimited(filters, hosts, cy, c.limit, c.start)
			var names []string
			for _, h := range got {
				names = append(names, h.Host)
			}
			if fmt.Sprint(names) != fmt.Sprint(c.want) {
				t.Fatalf("passed %v, want %v", names, c.want)
			}
			removed := cy.counts(filters)[0]
			if removed.Removed != c.wantRemoved {
				t.Fatalf("ComputeFilter removed %d, want %d", removed.Removed, c.wantRemoved)
			}
			if fmt.Sprint(removed.Reasons) != fmt.Sprint(c.wantReasons) {
				t.Fatalf("ComputeFilter's reasons %q, want %q", removed.Reasons, c.wantReasons)
			}
		})
	}
}

func TestEffectiveCap(t *testing.T) {
	s := &Scheduler{cfg: Config{MaxAttempts: 3, MaxHostsToWeigh: 4}}
	one := &RequestSpec{InstanceUUIDs: []string{"a"}}
	five := &RequestSpec{InstanceUUIDs: []string{"a", "b", "c", "d", "e"}}
	if got := s.effectiveCap(one); got != 4 {
		t.Errorf("cap for one instance = %d, want 4", got)
	}
	if got := s.effectiveCap(five); got != 15 {
		t.Errorf("cap for five instances = %d, want 15 (room for alternates)", got)
	}
	s.cfg.MaxHostsToWeigh = 0
	if got := s.effectiveCap(five); got != 0 {
		t.Errorf("cap off = %d, want 0", got)
	}
}
