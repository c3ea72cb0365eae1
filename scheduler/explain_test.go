package scheduler

import (
	"errors"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/logtest"
)

// TestNoValidHostNamesWhatRanOut fails requests over real placement and
// etcd and reads the reason: the class that ran out (after the request's
// own picks), max_unit, and the disabled host by name.
func TestNoValidHostNamesWhatRanOut(t *testing.T) {
	c := newCloud(t)
	c.addHost("a", "cell1", 8, 8192, false)
	c.addHost("b", "cell1", 8, 8192, false)
	c.addHost("off", "cell1", 64, 65536, true)
	c.addAggregate(&etcdschema.Aggregate{UUID: "agg-a", Name: "a-hosts", Hosts: []string{"a"},
		Metadata: map[string]string{"availability_zone": "az-a"}})
	inZone := spec(1, 6000, "z1", "z2")
	inZone.AvailabilityZone = "az-a"
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
		{"outside the requested zone, by the aggregate's name", inZone,
			"No valid host was found. Placed 1 of 2 instances, then 0 of 3 hosts fit: " +
				"b is in none of the aggregates a-hosts (availability zone az-a); a lacked MEMORY_MB (needs 6000 MB, 2192 MB free); off is disabled."},
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

// TestDebugLogShowsWeighedHostsAndReason: at debug, each pick logs the
// weighed hosts as Nova does, and a failure its reason and the filters'
// counts.
func TestDebugLogShowsWeighedHostsAndReason(t *testing.T) {
	c := newCloud(t)
	c.addHost("a", "cell1", 8, 8192, false)
	c.addHost("b", "cell1", 8, 4096, false)
	var buf logtest.Buffer
	s, err := New(Config{MaxAttempts: 3, HostSubsetSize: 1, MaxPlacementResults: 1000,
		EnabledFilters: []string{"ComputeFilter"}, Weights: map[string]float64{"ram": 1}},
		c.place, c.hosts, hclog.New(&hclog.LoggerOptions{Level: hclog.Debug, Output: &buf}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.SelectDestinations(c.ctx, spec(1, 1024, "ok")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SelectDestinations(c.ctx, spec(1, 8000, "big1")); err == nil {
		t.Fatal("8000 MB fit beside 1024 MB on a host of 8192 MB")
	}
	log := buf.String()
	for _, want := range []string{
		`weighed hosts: request_id="" instance=ok weighed="[WeighedHost [host: (a, a) ram: 8192MB disk: 0MB io_ops: 0 instances: 0, weight: 1], ` +
			`WeighedHost [host: (b, b) ram: 4096MB disk: 0MB io_ops: 0 instances: 0, weight: 0]]"`,
		`no valid host: request_id="" instance=big1`,
		`reason="0 of 2 hosts fit: MEMORY_MB 8000 exceeds max_unit 4096 on b; a lacked MEMORY_MB (needs 8000 MB, 7168 MB free)."`,
		"filters=\"[ComputeFilter: (removed 0)]\"",
	} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
}
