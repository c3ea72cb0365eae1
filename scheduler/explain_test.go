package scheduler

import (
	"errors"
	"testing"
)

// TestNoValidHostNamesWhatRanOut fails requests over real placement and
// etcd and reads the reason: the class that ran out (after the request's
// own picks), max_unit, and the disabled host by name.
func TestNoValidHostNamesWhatRanOut(t *testing.T) {
	c := newCloud(t)
	c.addHost("a", "cell1", 8, 8192, false)
	c.addHost("b", "cell1", 8, 8192, false)
	c.addHost("off", "cell1", 64, 65536, true)
	s := c.scheduler(Config{MaxAttempts: 3, HostSubsetSize: 1, MaxPlacementResults: 1000,
		EnabledFilters: []string{"ComputeFilter"}, Weights: map[string]float64{"ram": 1}})
	cases := []struct {
		desc string
		spec *RequestSpec
		want string
	}{
		{"memory runs out after four of five", spec(1, 4096, "m1", "m2", "m3", "m4", "m5"),
			"No valid host was found. Placed 4 of 5 instances, then 0 of 3 hosts fit: " +
				"2 lacked MEMORY_MB (needs 4096 MB, the most free on a host is 0 MB); off is disabled."},
		{"a flavor over every enabled host's max_unit", spec(16, 1024, "big"),
			"No valid host was found. 0 of 3 hosts fit: VCPU 16 exceeds max_unit 8 on 2 hosts; off is disabled."},
		{"memory beyond every host is max_unit (the host's total)", spec(1, 10000, "fat1", "fat2"),
			"No valid host was found. 0 of 3 hosts fit: MEMORY_MB 10000 exceeds max_unit 8192 on 2 hosts; off is disabled."},
		{"the most free is what is left after the request's picks", spec(1, 6000, "f1", "f2", "f3"),
			"No valid host was found. Placed 2 of 3 instances, then 0 of 3 hosts fit: " +
				"2 lacked MEMORY_MB (needs 6000 MB, the most free on a host is 2192 MB); off is disabled."},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			_, err := s.SelectDestinations(c.ctx, tc.spec)
			var nvh *NoValidHostError
			if !errors.As(err, &nvh) {
				t.Fatalf("got %v, want NoValidHost", err)
			}
			if err.Error() != tc.want {
				t.Errorf("reason\n got %q\nwant %q", err.Error(), tc.want)
			}
			for _, h := range []string{"a", "b"} {
				if u := c.usage(h); u != 0 {
					t.Errorf("%s keeps %d MB after the failed request", h, u)
				}
			}
		})
	}
}
