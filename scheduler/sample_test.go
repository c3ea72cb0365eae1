package scheduler

import (
	"fmt"
	"testing"

	"github.com/berth-project/berth/internal/testwait"
)

// With placement_sample_size below the number of hosts, requests see
// different random windows of candidates, so they spread over more hosts
// than one window holds; a request whose sample has no valid host is
// scheduled again over all candidates, so sampling never makes a
// placeable request fail.
func TestPlacementSampleSize(t *testing.T) {
	c := newCloud(t)
	for i := 0; i < 12; i++ {
		c.addHost(fmt.Sprintf("h%02d", i), "cell1", 64, 65536, false)
	}
	cfg := Config{MaxAttempts: 1, HostSubsetSize: 1, MaxPlacementResults: 1000, PlacementSampleSize: 2,
		EnabledFilters: []string{"ComputeFilter"}, Weights: map[string]float64{"ram": 1}}
	s := c.scheduler(cfg)
	if n := s.sampleSize(newCycle(spec(1, 512, "x"))); n != 2 {
		t.Fatalf("sample size %d, want 2", n)
	}
	if n := s.sampleSize(newCycle(spec(1, 512, "x", "y", "z"))); n != 3 {
		t.Fatalf("sample size for 3 instances × 1 attempt = %d, want 3", n)
	}
	same := spec(1, 512, "x")
	same.Hints.SameHost = []string{"other"}
	if n := s.sampleSize(newCycle(same)); n != 0 {
		t.Fatalf("same_host request sampled (%d)", n)
	}
	used := map[string]bool{}
	for i := 0; i < 30; i++ {
		sels, err := s.SelectDestinations(c.ctx, spec(1, 512, fmt.Sprintf("s%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		used[sels[0][0].ServiceHost] = true
	}
	if len(used) <= 2 {
		t.Fatalf("30 sampled requests used only %v: the sample is not random", used)
	}

	// All hosts but one go down: most samples hold no valid host.
	for i := 1; i < 12; i++ {
		if _, err := c.cli.Delete(c.ctx, c.keys.Alive(fmt.Sprintf("h%02d", i))); err != nil {
			t.Fatal(err)
		}
	}
	testwait.Poll(t, testwait.Timeout, "the host manager to see h01-h11 down", func() (bool, string) {
		for i := 1; i < 12; i++ {
			if v, ok := c.hosts.view(fmt.Sprintf("h%02d", i)); !ok || v.Up {
				return false, fmt.Sprintf("h%02d not seen down", i)
			}
		}
		return true, ""
	})
	for i := 0; i < 10; i++ {
		sels, err := s.SelectDestinations(c.ctx, spec(1, 512, fmt.Sprintf("d%d", i)))
		if err != nil {
			t.Fatalf("request %d with one host up: %v", i, err)
		}
		if h := sels[0][0].ServiceHost; h != "h00" {
			t.Fatalf("request %d placed on %s, which is down", i, h)
		}
	}
}
