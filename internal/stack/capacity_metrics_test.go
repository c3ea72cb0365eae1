package stack

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/berth-project/berth/api"
	"github.com/berth-project/berth/configs"
	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/internal/testwait"
)

// TestCapacityAndServerMetrics boots one server that fits and one that
// does not on two hosts, and reads the figures an operator graphs:
// capacity, used and free by class, cell and zone (and per host with the
// option), servers by status and cell from the leader, what the
// superconductor made of each instance, and the build info.
func TestCapacityAndServerMetrics(t *testing.T) {
	s := startTestStackWith(t, etcdtest.Client(t), []string{"h1", "h2"}, nil, func(cfg *configs.Config) {
		cfg.Agent.Inventory.ReservedHostMemoryMB = 0
		cfg.Scheduler.HostCapacityMetrics = true
		cfg.Scheduler.LeaderInterval = 200 * time.Millisecond
	})
	c := api.NewClient(s.endpoints["compute API"])
	if v := waitStatus(t, c, create(t, c, "fits", "")); v.Status != "ACTIVE" {
		t.Fatalf("fits: %s %+v", v.Status, v.Fault)
	}
	resp, err := c.CreateServers(context.Background(), api.CreateRequest{Name: "huge", Flavor: "m1.xlarge", Count: 1})
	if err != nil {
		t.Fatal(err)
	}
	if v := waitStatus(t, c, resp.Servers[0].ID); v.Status != "ERROR" {
		t.Fatalf("huge: %s, want ERROR", v.Status)
	}
	// stackHCL's hosts: 8 VCPUs (x4), 16384 MB, 100 GB each; m1.tiny on one.
	const zone = `availability_zone="nova",cell="cell1"`
	want := map[string]float64{
		`berth_resource_capacity{` + zone + `,resource_class="MEMORY_MB"}`:           2 * 16384,
		`berth_resource_used{` + zone + `,resource_class="MEMORY_MB"}`:               512,
		`berth_resource_free{` + zone + `,resource_class="MEMORY_MB"}`:               2*16384 - 512,
		`berth_resource_capacity{` + zone + `,resource_class="VCPU"}`:                2 * 32,
		`berth_host_resource_capacity{` + zone + `,host="h1",resource_class="VCPU"}`: 32,
		`berth_host_resource_capacity{` + zone + `,host="h2",resource_class="VCPU"}`: 32,
		`berth_servers{cell="cell1",status="ACTIVE"}`:                                1,
		`berth_servers{cell="cell0",status="ERROR"}`:                                 1,
		`berth_superconductor_instances_total{outcome="handed_off"}`:                 1,
		`berth_superconductor_instances_total{outcome="no_valid_host"}`:              1,
	}
	testwait.Poll(t, 30*time.Second, "the capacity and server figures", func() (bool, string) {
		m := scrape(t, s.endpoints["status"])
		var off []string
		for k, v := range want {
			if got, ok := m[k]; !ok || got != v {
				off = append(off, fmt.Sprintf("%s = %v (present %v), want %v", k, got, ok, v))
			}
		}
		return len(off) == 0, strings.Join(off, "; ")
	})
	m := scrape(t, s.endpoints["status"])
	found := false
	for k, v := range m {
		if strings.HasPrefix(k, "berth_build_info{") && strings.Contains(k, `go_version="go`) && v == 1 {
			found = true
		}
	}
	if !found {
		t.Errorf("no berth_build_info with a go_version")
	}
}
