package scheduler

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/berth-project/berth/internal/logtest"
	"github.com/berth-project/berth/internal/testwait"
)

// TestForcedHostSkipsFilters: a forced host (availability_zone
// "zone:host") is placed on without the filters, as Nova's
// get_filtered_hosts returns force_hosts unfiltered, while 2.74's
// requested destination on the same host goes through them; placement
// still decides whether the host has room. The host "down" has missed
// its liveness, so ComputeFilter refuses it.
func TestForcedHostSkipsFilters(t *testing.T) {
	c := newCloud(t)
	c.addHost("up", "cell1", 8, 8192, false)
	c.addHost("down", "cell1", 8, 8192, false)
	if _, err := c.cli.Delete(c.ctx, c.keys.Alive("down")); err != nil {
		t.Fatal(err)
	}
	testwait.Poll(t, testwait.Timeout, "the host manager to see down down", func() (bool, string) {
		v, ok := c.hosts.view("down")
		return ok && !v.Up, fmt.Sprintf("seen %v, up %v", ok, v.Up)
	})
	var logs logtest.Buffer
	s, err := New(Config{MaxAttempts: 3, HostSubsetSize: 1, MaxPlacementResults: 1000,
		EnabledFilters: []string{"ComputeFilter"}, Weights: map[string]float64{"ram": 1}},
		c.place, c.hosts, hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Debug}))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		desc                   string
		dest                   *Destination
		forceHosts, forceNodes []string
		vcpus                  int
		wantHost               string // "" with wantErr
		wantErr                string
	}{
		{desc: "requested destination goes through the filters", dest: &Destination{Host: "down"}, vcpus: 1,
			wantErr: "Requested host down: ComputeFilter"},
		{desc: "forced host skips them", forceHosts: []string{"down"}, vcpus: 1, wantHost: "down"},
		{desc: "forced node skips them", forceNodes: []string{"down"}, vcpus: 1, wantHost: "down"},
		{desc: "forced host and node", forceHosts: []string{"down"}, forceNodes: []string{"down"}, vcpus: 1, wantHost: "down"},
		{desc: "forced host that passes anyway", forceHosts: []string{"up"}, vcpus: 1, wantHost: "up"},
		{desc: "forced host without room: placement still says no", forceHosts: []string{"down"}, vcpus: 16,
			wantErr: "VCPU 16 exceeds max_unit 8 on down"},
		{desc: "forced host unknown", forceHosts: []string{"nowhere"}, vcpus: 1,
			wantErr: "Compute host nowhere could not be found."},
	}
	for i, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			sp := spec(tc.vcpus, 256, fmt.Sprintf("forced-%d", i))
			sp.RequestedDestination, sp.ForceHosts, sp.ForceNodes = tc.dest, tc.forceHosts, tc.forceNodes
			sels, err := s.SelectDestinations(c.ctx, sp)
			if tc.wantErr != "" {
				var nvh *NoValidHostError
				if !errors.As(err, &nvh) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %v, want NoValidHost saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := sels[0][0].ServiceHost; got != tc.wantHost {
				t.Fatalf("placed on %s, want %s", got, tc.wantHost)
			}
			if len(sels[0]) != 1 {
				t.Errorf("alternates %v for a forced host, want none", sels[0][1:])
			}
			forcedLine := regexp.MustCompile(`\[DEBUG\] host passed the filters: forced \(availability_zone zone:host\), filters skipped: .*host=` + tc.wantHost + ` `)
			if !forcedLine.MatchString(logs.String()) {
				t.Errorf("no debug line saying %s passed because forced in:\n%s", tc.wantHost, logs.String())
			}
		})
	}
}

// TestForcedHostsMatch is get_filtered_hosts' matching: force_hosts in
// any case, force_nodes exactly, both when both are given.
func TestForcedHostsMatch(t *testing.T) {
	hosts := []*HostState{{Host: "alpha"}, {Host: "Beta"}, {Host: "gamma"}}
	for _, tc := range []struct {
		desc                   string
		forceHosts, forceNodes []string
		want                   string
	}{
		{"a host", []string{"alpha"}, nil, "alpha"},
		{"a host in another case", []string{"BETA"}, nil, "Beta"},
		{"two hosts", []string{"alpha", "gamma"}, nil, "alpha,gamma"},
		{"a node, exactly", nil, []string{"Beta"}, "Beta"},
		{"a node in another case is not it", nil, []string{"beta"}, ""},
		{"host and node must both match", []string{"alpha"}, []string{"gamma"}, ""},
		{"no such host", []string{"delta"}, nil, ""},
	} {
		got := forcedHosts(hosts, &RequestSpec{ForceHosts: tc.forceHosts, ForceNodes: tc.forceNodes}, hclog.NewNullLogger())
		var names []string
		for _, h := range got {
			names = append(names, h.Host)
		}
		if strings.Join(names, ",") != tc.want {
			t.Errorf("%s: %v, want %s", tc.desc, names, tc.want)
		}
	}
}
