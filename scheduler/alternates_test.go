package scheduler

import (
	"fmt"
	"testing"

	"github.com/berth-project/berth/etcdschema"
)

// TestAlternatesIncludeSiblingsHosts: after the hosts no instance of the
// request took (Nova's alternates), an instance's list carries the hosts
// its siblings took, so a request spanning every host keeps its retries;
// never its own host, never another cell's, never a claim; and a hard
// anti-affinity group gets none of its siblings' hosts.
func TestAlternatesIncludeSiblingsHosts(t *testing.T) {
	for _, tc := range []struct {
		desc        string
		hosts       int
		instances   int
		maxAttempts int
		group       string
		// wantLen is each list's length; untakenFirst says how many
		// alternates of each list must be hosts no instance took.
		wantLen, untakenFirst int
	}{
		{desc: "dense request: 12 on 6 hosts, every host taken", hosts: 6, instances: 12, maxAttempts: 3,
			wantLen: 3, untakenFirst: 0},
		{desc: "sparse request: untaken hosts first, then siblings'", hosts: 4, instances: 2, maxAttempts: 4,
			wantLen: 4, untakenFirst: 2},
		{desc: "single instance: only untaken hosts exist", hosts: 3, instances: 1, maxAttempts: 5,
			wantLen: 3, untakenFirst: 2},
		{desc: "anti-affinity group: no sibling's host", hosts: 4, instances: 3, maxAttempts: 4,
			group: etcdschema.PolicyAntiAffinity, wantLen: 2, untakenFirst: 1},
		{desc: "affinity group: all on one host, no alternate at all", hosts: 3, instances: 2, maxAttempts: 3,
			group: etcdschema.PolicyAffinity, wantLen: 1},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			c := newCloud(t)
			for i := range tc.hosts {
				c.addHost(fmt.Sprintf("h%d", i), "cell1", 16, 16384, false)
			}
			// A host of another cell, least free RAM so never picked: never
			// anyone's alternate either.
			c.addHost("far", "cell2", 2, 1024, false)
			cfg := groupConfig()
			cfg.MaxAttempts, cfg.HostSubsetSize = tc.maxAttempts, 1
			cfg.Weights = map[string]float64{"ram": 1}
			s := c.scheduler(cfg)
			group := ""
			if tc.group != "" {
				group = "g"
				c.addGroup(group, tc.group, 0)
			}
			req := c.request(group, uuids("x", tc.instances)...)
			req.Flavor.VCPUs, req.Flavor.RAMMB = 1, 512
			sels, err := s.SelectDestinations(c.ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			taken := map[string]bool{}
			for _, list := range sels {
				taken[list[0].ServiceHost] = true
			}
			for i, list := range sels {
				if len(list) != tc.wantLen {
					t.Fatalf("instance %d: %d selections %v, want %d", i, len(list), hostsIn(list), tc.wantLen)
				}
				seen := map[string]bool{}
				for k, alt := range list {
					if seen[alt.ServiceHost] || alt.Cell != list[0].Cell || alt.AllocationRequest == "" {
						t.Fatalf("instance %d: bad alternate %d in %v", i, k, hostsIn(list))
					}
					seen[alt.ServiceHost] = true
					if k == 0 {
						continue
					}
					if untaken := !taken[alt.ServiceHost]; untaken != (k <= tc.untakenFirst) {
						t.Fatalf("instance %d: alternate %d (%s) untaken=%v; want the %d untaken hosts first, then siblings': %v",
							i, k, alt.ServiceHost, untaken, tc.untakenFirst, hostsIn(list))
					}
				}
			}
			// Only the chosen hosts are claimed: one VCPU per instance.
			var used int64
			for i := range tc.hosts {
				used += c.usage(fmt.Sprintf("h%d", i))
			}
			if used != int64(tc.instances) || c.usage("far") != 0 {
				t.Fatalf("claimed %d VCPU (far %d) for %d instances: alternates must stay unclaimed", used, c.usage("far"), tc.instances)
			}
		})
	}
}

func hostsIn(list []etcdschema.Selection) []string {
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = s.ServiceHost
	}
	return out
}
