package stack

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/berth-project/berth/api"
	"github.com/berth-project/berth/configs"
	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/internal/testwait"
)

// TestDevSpreadsHostsOverCells starts `berth dev`'s roles with three
// simulated hosts over two cells, one of them failing: the hosts go
// round-robin into cell1 and cell2 with the dev inventory, and a build
// pinned to the failing host fails.
func TestDevSpreadsHostsOverCells(t *testing.T) {
	cfg := configs.Defaults()
	cfg.EnableAllRoles()
	cfg.Etcd.Embedded = nil
	cfg.API.Bind, cfg.Placement.Bind, cfg.Scheduler.Bind = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	s := New(cfg, hclog.NewNullLogger())
	s.Attach(etcdtest.Client(t))
	t.Cleanup(s.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := Dev(DevOptions{Hosts: 3, Cells: 2, FailHosts: map[string]bool{"compute-3": true}, DataDir: t.TempDir()})
	if err := start(ctx, s); err != nil {
		t.Fatalf("start dev: %v", err)
	}
	if got := s.Endpoint("hosts"); got == "" {
		t.Errorf("no hosts line in the banner: %v", s.Endpoints)
	}
	c := api.NewClient(s.Endpoint("compute API"))
	wantCell := map[string]string{"compute-1": "cell1", "compute-2": "cell2", "compute-3": "cell1"}
	testwait.Poll(t, 30*time.Second, "three hosts up in their cells with the dev inventory", func() (bool, string) {
		hosts, err := c.ListHosts(ctx)
		var wrong []string
		for _, h := range hosts {
			// Disk is the one resource with nothing reserved and a ratio
			// of 1: its capacity is the inventory's.
			disk := h.Resources["DISK_GB"].Capacity
			if h.Cell != wantCell[h.Host] || h.State != "up" || disk != DevDiskGB {
				wrong = append(wrong, fmt.Sprintf("%s in %q %s with %d GB", h.Host, h.Cell, h.State, disk))
			}
		}
		return err == nil && len(hosts) == len(wantCell) && len(wrong) == 0,
			fmt.Sprintf("hosts %+v (%v); wrong: %v", hosts, err, wrong)
	})
	for host, want := range map[string]string{"compute-1": "ACTIVE", "compute-3": "ERROR"} {
		resp, err := c.CreateServers(ctx, api.CreateRequest{Name: "on-" + host, Flavor: "m1.tiny", Count: 1, Host: host})
		if err != nil {
			t.Fatal(err)
		}
		id := resp.Servers[0].ID
		// Within what is left of the test's minute.
		err = testwait.Wait(ctx, time.Minute, func() (bool, string) {
			v, err := c.GetServer(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if v.Status != want && (v.Status == "ACTIVE" || v.Status == "ERROR") {
				t.Fatalf("server pinned to %s is %s, want %s", host, v.Status, want)
			}
			return v.Status == want, v.Status
		})
		if err != nil {
			t.Fatalf("server pinned to %s never %s: %v", host, want, err)
		}
	}
}
