package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/internal/testwait"
)

// TestRemoteSchedulersAndLeaderFailover runs two scheduler-only servers
// and a server with the API and a superconductor but no scheduler: builds
// go through a scheduler found under /members/scheduler/ over HTTP. The
// leading scheduler is then killed (SIGKILL): the other leads within the
// election TTL, and builds keep working through it.
func TestRemoteSchedulersAndLeaderFailover(t *testing.T) {
	c := newCluster(t)
	etcd, dir, apiAddr, apiURL := c.etcd, c.dir, c.apiAddr, c.apiURL
	scheds := map[int]*proc{}
	for i := 1; i <= 2; i++ {
		f := writeFile(t, dir, fmt.Sprintf("sched%d.hcl", i), etcdBlock(etcd.ClientURL())+fmt.Sprintf(`
scheduler {
  bind = "127.0.0.1:%d"
  election_ttl = "2s"
  leader_interval = "1s"
}
`, etcdtest.FreePort(t)))
		p := startProc(t, fmt.Sprintf("scheduler-%d", i), "run", "server", "-config", f)
		scheds[p.cmd.Process.Pid] = p
	}
	front := writeFile(t, dir, "front.hcl", etcdBlock(etcd.ClientURL())+apiBlock(apiAddr)+`
superconductor {
  select_timeout = "5s"
}
`)
	c.startConductor("conductor", "cell1", nil)
	startProc(t, "front", "run", "server", "-config", front)
	waitHTTP(t, apiURL+"/healthz")
	c.startAgents(agentSpec{host: "compute-1", memoryMB: 16384}, agentSpec{host: "compute-2", memoryMB: 16384})
	keys := etcdschema.New("/berth")
	cli := etcd.Client()
	ctx := context.Background()
	count := func(prefix string) int {
		resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			return -1
		}
		return int(resp.Count)
	}
	testwait.Poll(t, 30*time.Second, "two schedulers registered and campaigning, two agents alive", func() (bool, string) {
		m, e := count(keys.Members("scheduler")), count(keys.Election("scheduler")+"/")
		alive := 0
		for i := 1; i <= 2; i++ {
			alive += count(keys.Alive(fmt.Sprintf("compute-%d", i)))
		}
		return m == 2 && e == 2 && alive == 2, fmt.Sprintf("members=%d candidates=%d alive=%d", m, e, alive)
	})
	create := func(name string, n int) {
		t.Helper()
		out, err := runCLI(t, apiURL, "server", "create", "--flavor", "m1.small", "--count", strconv.Itoa(n), "--name", name, "--wait", "--timeout", "60s")
		if err != nil || countByStatus(out)["ACTIVE"] != n {
			t.Fatalf("create %s: %v; want %d ACTIVE:\n%s", name, err, n, out)
		}
	}
	create("via-remote", 2)

	// Who leads? The candidate key with the lowest create revision; its
	// value is the scheduler's id, which carries its pid.
	leaderPid := func() (int, string) {
		resp, err := cli.Get(ctx, keys.Election("scheduler")+"/", clientv3.WithFirstCreate()...)
		if err != nil || len(resp.Kvs) == 0 {
			return 0, ""
		}
		id := string(resp.Kvs[0].Value)
		parts := strings.Split(id, ":") // role@host:pid:rand
		if len(parts) < 3 {
			return 0, id
		}
		pid, _ := strconv.Atoi(parts[1])
		return pid, id
	}
	pid, id := leaderPid()
	old, ok := scheds[pid]
	if !ok {
		t.Fatalf("leader %q is not one of the scheduler processes %v", id, scheds)
	}
	killed := time.Now()
	if err := old.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	testwait.Poll(t, 10*time.Second, "the other scheduler to lead", func() (bool, string) {
		p, id := leaderPid()
		return p != 0 && p != pid, id
	})
	if took := time.Since(killed); took > 2*time.Second+3*time.Second {
		t.Errorf("new leader after %s; the election TTL is 2s", took)
	}
	create("after-failover", 2)
}

// TestBuildOnADeadHostIsRescheduled kills (SIGKILL) the agent of the host
// an instance is being built on. The leader scheduler sees the host down
// and, after down_host_grace, takes the build back: the cell conductor
// rebuilds it on the alternate, and the only allocation left is there.
func TestBuildOnADeadHostIsRescheduled(t *testing.T) {
	c := newCluster(t)
	etcd, dir, apiAddr, apiURL := c.etcd, c.dir, c.apiAddr, c.apiURL
	server := writeFile(t, dir, "server.hcl", etcdBlock(etcd.ClientURL())+fmt.Sprintf(`
api { bind = %q }
scheduler {
  bind = "127.0.0.1:%d"
  election_ttl = "2s"
  leader_interval = "1s"
  down_host_grace = "1s"
}
superconductor {}
`, apiAddr, etcdtest.FreePort(t)))
	c.startConductor("conductor", "cell1", nil)
	startProc(t, "server", "run", "server", "-config", server)
	waitHTTP(t, apiURL+"/healthz")
	// Builds take 8 s, so the agent is killed while one is in flight.
	agents := c.startAgents(agentSpec{host: "compute-1", memoryMB: 16384, buildTime: "8s"},
		agentSpec{host: "compute-2", memoryMB: 16384, buildTime: "8s"})
	keys := etcdschema.New("/berth")
	cli := etcd.Client()
	ctx := context.Background()
	testwait.Poll(t, 30*time.Second, "two agents alive", func() (bool, string) {
		resp, err := cli.Get(ctx, keys.HostsPrefix(), clientv3.WithPrefix(), clientv3.WithKeysOnly())
		if err != nil {
			return false, err.Error()
		}
		n := 0
		for _, kv := range resp.Kvs {
			if strings.HasSuffix(string(kv.Key), "/alive") {
				n++
			}
		}
		return n == 2, fmt.Sprintf("%d alive", n)
	})
	if out, err := runCLI(t, apiURL, "server", "create", "--flavor", "m1.small", "--name", "survivor"); err != nil {
		t.Fatalf("create: %v\n%s", err, out)
	}
	instance := func() (etcdschema.Instance, bool) {
		resp, err := cli.Get(ctx, keys.CellInstances("cell1"), clientv3.WithPrefix())
		if err != nil || len(resp.Kvs) != 1 {
			return etcdschema.Instance{}, false
		}
		var inst etcdschema.Instance
		if etcdschema.Decode(string(resp.Kvs[0].Key), resp.Kvs[0].Value, &inst) != nil {
			return etcdschema.Instance{}, false
		}
		return inst, true
	}
	var first etcdschema.Instance
	testwait.Poll(t, 30*time.Second, "the build cast to a host", func() (bool, string) {
		inst, ok := instance()
		first = inst
		return ok && inst.Host != "" && inst.Status == etcdschema.StatusBuild, fmt.Sprintf("%+v", inst)
	})
	if err := agents[first.Host].cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	testwait.Poll(t, 60*time.Second, "the instance ACTIVE on the other host", func() (bool, string) {
		inst, ok := instance()
		return ok && inst.Status == etcdschema.StatusActive && inst.Host != "" && inst.Host != first.Host,
			fmt.Sprintf("status=%s host=%s task=%s", inst.Status, inst.Host, inst.TaskState)
	})
	down, err := cli.Get(ctx, keys.HostDown(first.Host))
	if err != nil || len(down.Kvs) != 1 {
		t.Fatalf("the dead host was not recorded down: %v", err)
	}
	resp, err := cli.Get(ctx, keys.Consumer(first.UUID))
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("the rebuilt instance has no allocation: %v", err)
	}
	var cons etcdschema.Consumer
	if err := etcdschema.Decode("consumer", resp.Kvs[0].Value, &cons); err != nil {
		t.Fatal(err)
	}
	svc, err := cli.Get(ctx, keys.Service(first.Host))
	if err != nil || len(svc.Kvs) != 1 {
		t.Fatal("no service record for the dead host")
	}
	var s etcdschema.Service
	if err := etcdschema.Decode("service", svc.Kvs[0].Value, &s); err != nil {
		t.Fatal(err)
	}
	if _, ok := cons.Allocations[s.ProviderUUID]; ok || len(cons.Allocations) != 1 {
		t.Fatalf("allocations %v: the claim on the dead host %s was not freed", cons.Allocations, first.Host)
	}
}
