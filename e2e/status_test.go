package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/internal/testwait"
)

// TestStatusEndpointsAndGracefulStop runs a server, a conductor and an
// agent as real processes, the last two with a status listener: every
// process answers /readyz once loaded and /metrics with figures that moved
// with a real boot; SIGTERM then takes the agent's liveness key and the
// scheduler's member and election keys away at once, not after their
// TTLs (60 s and 10 s here).
func TestStatusEndpointsAndGracefulStop(t *testing.T) {
	c := newCluster(t)
	ctx := context.Background()
	condStatus := freeAddr(t)
	agentStatus := freeAddr(t)
	startProc(t, "conductor", "run", "conductor", "-config", writeFile(t, c.dir, "conductor.hcl",
		etcdBlock(c.etcd.ClientURL())+fmt.Sprintf("status {\n  bind = %q\n}\nconductor {\n  cell = \"cell1\"\n}\n", condStatus)))
	server := c.startServer("server", allRoles, nil)
	agent := startProc(t, "agent-s1", "run", "agent", "-config", writeFile(t, c.dir, "s1.hcl",
		etcdBlock(c.etcd.ClientURL())+fmt.Sprintf(`
status {
  bind = %q
}
agent {
  host = "s1"
  cell = "cell1"
  service_down_time = "60s"
  inventory {
    vcpus     = 8
    memory_mb = 8192
    disk_gb   = 100
  }
}
`, agentStatus)))

	httpGet := func(url string) (int, string) {
		resp, err := http.Get(url)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, base := range []string{"http://" + condStatus, "http://" + agentStatus, c.apiURL} {
		testwait.Poll(t, 60*time.Second, base+"/readyz", func() (bool, string) {
			code, body := httpGet(base + "/readyz")
			return code == http.StatusOK, fmt.Sprintf("%d %s", code, body)
		})
	}
	if v := c.settle(c.create("watched")); v.Status != "ACTIVE" {
		t.Fatalf("server = %s, want ACTIVE", v.Status)
	}
	for base, line := range map[string]string{
		"http://" + agentStatus: `berth_agent_builds_total{outcome="active"} 1`,
		c.apiURL:                `berth_scheduler_select_destinations_seconds_count{outcome="selected"} 1`,
		"http://" + condStatus:  `berth_conductor_reschedules_total{outcome="rescheduled"} 0`,
	} {
		code, body := httpGet(base + "/metrics")
		if code != http.StatusOK || !strings.Contains(body, line+"\n") {
			t.Errorf("%s/metrics = %d, want a line %q", base, code, line)
		}
	}

	count := func(key string, opts ...clientv3.OpOption) int64 {
		resp, err := c.cli.Get(ctx, key, append(opts, clientv3.WithCountOnly())...)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Count
	}
	present := func(what, key string, opts ...clientv3.OpOption) {
		t.Helper()
		if count(key, opts...) == 0 {
			t.Fatalf("%s (%s) absent before the stop", what, key)
		}
	}
	present("liveness", c.keys.Alive("s1"))
	present("scheduler member", c.keys.Members("scheduler"), clientv3.WithPrefix())
	present("election key", c.keys.Election("scheduler")+"/", clientv3.WithPrefix())

	start := time.Now()
	if err := agent.stop(t, 20*time.Second); err != nil {
		t.Errorf("agent exit after SIGTERM: %v", err)
	}
	if err := server.stop(t, 20*time.Second); err != nil {
		t.Errorf("server exit after SIGTERM: %v", err)
	}
	for what, key := range map[string]string{"liveness": c.keys.Alive("s1"), "scheduler member": c.keys.Members("scheduler"),
		"election key": c.keys.Election("scheduler") + "/"} {
		if n := count(key, clientv3.WithPrefix()); n != 0 {
			t.Errorf("%s (%s) still there after a graceful stop", what, key)
		}
	}
	if took := time.Since(start); took > 8*time.Second {
		t.Errorf("stopping the agent and the server took %s", took)
	}
}
