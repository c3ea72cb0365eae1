package scheduler

import (
	"errors"
	"strings"
	"testing"
)

// TestRequestedDestination pins requests to a host, a node or a cell over
// real placement and etcd; the best-weighed host ("big") is never where a
// pinned request goes.
func TestRequestedDestination(t *testing.T) {
	c := newCloud(t)
	c.addHost("big", "cell1", 64, 65536, false)
	c.addHost("small", "cell1", 16, 4096, false)
	c.addHost("other", "cell2", 8, 8192, false)
	c.addHost("off", "cell2", 64, 65536, true)
	s := c.scheduler(Config{MaxAttempts: 3, HostSubsetSize: 1, MaxPlacementResults: 1000,
		EnabledFilters: []string{"ComputeFilter"}, Weights: map[string]float64{"ram": 1}})
	cases := []struct {
		name     string
		dest     *Destination
		wantHost string // "" with wantErr
		wantErr  string
	}{
		{"no destination goes to the roomiest", nil, "big", ""},
		{"host", &Destination{Host: "small"}, "small", ""},
		{"node alone", &Destination{Node: "small"}, "small", ""},
		{"host and its node", &Destination{Host: "small", Node: "small"}, "small", ""},
		{"cell", &Destination{Cell: "cell2"}, "other", ""},
		{"host outside the cell", &Destination{Host: "small", Cell: "cell2"}, "",
			"Requested host small: requested_destination: in cell cell1, not the requested cell cell2."},
		{"unknown host", &Destination{Host: "nope"}, "", "Compute host nope could not be found."},
		{"node of another host", &Destination{Host: "small", Node: "big"}, "", "Compute host small has no node big."},
		{"host too small", &Destination{Host: "small"}, "",
			"0 of 1 host fit: VCPU 32 exceeds max_unit 16 on small. Requested host small: Placement: VCPU 32 exceeds max_unit 16 on small."},
		{"disabled host, whatever its room", &Destination{Host: "off"}, "",
			"Requested host off: Placement: compute service is disabled, so its provider has COMPUTE_STATUS_DISABLED."},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sp := spec(2, 1024, "d"+string(rune('a'+i)))
			if tc.name == "host too small" {
				sp = spec(32, 1024, "too-big") // big has room, small not
			}
			sp.RequestedDestination = tc.dest
			sels, err := s.SelectDestinations(c.ctx, sp)
			if tc.wantErr != "" {
				var nvh *NoValidHostError
				if !errors.As(err, &nvh) || !strings.HasPrefix(err.Error(), "No valid host was found. ") ||
					!strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %v, want NoValidHost with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := sels[0][0].ServiceHost; got != tc.wantHost {
				t.Fatalf("placed on %s, want %s", got, tc.wantHost)
			}
			for _, alt := range sels[0][1:] {
				if !tc.dest.admits(alt.ServiceHost, alt.Cell) {
					t.Errorf("alternate %s/%s outside the requested destination", alt.ServiceHost, alt.Cell)
				}
			}
		})
	}
}
