package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/agent"
	"github.com/berth-project/berth/api"
	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/internal/testwait"
)

// TestKilledMidMoves is the Proof's two failures of the control plane
// during a move, with real processes over one deployment (etcd, a cell
// conductor, an API+Placement process, scheduler+superconductor
// processes, four process-driver agents whose guests are `sleep`
// processes):
//
//  1. the superconductor is SIGKILLed during a live migration, paused
//     where it has handed the source's allocation to the migration and
//     claimed a destination under the instance, its hand-off not yet
//     committed; a replacement takes the request when the lease
//     expires, frees the stale claim and finishes the migration;
//  2. the scheduler leader is SIGKILLed during a cold drain, when the
//     drain record shows moves in flight and servers not yet started;
//     the other scheduler takes the lead and its drain duty finishes
//     the drain from the record (adopting, following and confirming).
//
// After each: the servers ACTIVE off their source, each guest running
// on exactly one host, Placement's usages exactly the servers' flavors
// (no claim leaked or doubled), every migration final, and the move
// invariants green.
func TestKilledMidMoves(t *testing.T) {
	c := newCluster(t)
	procDir := t.TempDir()
	t.Cleanup(func() { killRecorded(procDir) })
	c.startConductor("conductor", "cell1", nil)
	c.startServer("front", frontRoles, nil)
	const point = "superconductor.before-live-handoff"
	env, paused := pauseEnv(t, point)
	scheds := map[string]*proc{"super-a": c.startSched("super-a", env)}
	hosts := []string{"compute-1", "compute-2", "compute-3", "compute-4"}
	var specs []agentSpec
	for _, h := range hosts {
		specs = append(specs, agentSpec{host: h, memoryMB: 16384, processDir: procDir})
	}
	c.startAgents(specs...)
	live := c.boot("live", "compute-1", 1)[0]
	drained := c.boot("drained", "compute-2", 5)
	all := append([]string{live}, drained...)
	c.checkMoves("booted", true, procDir)

	// 1. The superconductor killed mid live migration.
	c.cliOK("server", "migrate", "--live", live)
	if got := waitPaused(t, paused, point); got != live {
		t.Fatalf("superconductor paused on %s, want %s", got, live)
	}
	mig := c.lastMigration(live)
	if mig.Status != etcdschema.MigrationAccepted || len(mig.Attempts) != 0 {
		t.Fatalf("the migration while its superconductor is paused: %s with attempts %+v, want accepted, none", mig.Status, mig.Attempts)
	}
	src := c.holdings(mig.UUID)
	if len(src) != 1 || src["compute-1"] != int64(mTiny.RAMMB) {
		t.Fatalf("the migration holds %v MB, want m1.tiny on compute-1", src)
	}
	claim := c.holdings(live)
	stale := ""
	for h := range claim {
		stale = h
	}
	if len(claim) != 1 || stale == "compute-1" || claim[stale] != int64(mTiny.RAMMB) {
		t.Fatalf("the instance holds %v MB, want the paused superconductor's claim of m1.tiny on another host", claim)
	}
	if pids := guestHosts(procDir, hosts, live); len(pids) != 1 || pids[0] != "compute-1" {
		t.Fatalf("the guest runs on %v before the hand-off, want compute-1", pids)
	}
	// The replacement stops at the same point (the source must still be
	// the migration's, one claim the instance's), and is killed too.
	scheds["super-a"].kill(t)
	env, paused = pauseEnv(t, point)
	scheds["super-b"] = c.startSched("super-b", env)
	if got := waitPaused(t, paused, point); got != live {
		t.Fatalf("the second superconductor paused on %s, want %s", got, live)
	}
	if h := c.holdings(mig.UUID); len(h) != 1 || h["compute-1"] != int64(mTiny.RAMMB) {
		t.Fatalf("the migration holds %v MB under the second holder, want m1.tiny on compute-1 still", h)
	}
	if h := c.holdings(live); len(h) != 1 || h["compute-1"] != 0 {
		t.Fatalf("the instance holds %v MB under the second holder, want one claim of m1.tiny off compute-1", h)
	}
	// Both ends counted, once each: every server's flavor and the source's.
	if got, want := c.totalUsage("MEMORY_MB"), int64((len(all)+1)*mTiny.RAMMB); got != want {
		t.Fatalf("%d MB in use with the second holder paused, want %d", got, want)
	}
	scheds["super-b"].kill(t)
	scheds["super-c"] = c.startSched("super-c", nil)
	v := c.movedOff(live, "compute-1")
	mig = c.lastMigration(live)
	if mig.Status != etcdschema.MigrationCompleted || mig.DestHost != v.Host || len(mig.Attempts) != 1 {
		t.Errorf("the live migration after the takeover: %s to %s, attempts %+v; want completed to %s in one attempt",
			mig.Status, mig.DestHost, mig.Attempts, v.Host)
	}
	if h := c.holdings(live); len(h) != 1 || h[v.Host] != int64(mTiny.RAMMB) {
		t.Errorf("the instance holds %v MB after the takeover, want m1.tiny on %s once (the stale claim on %s freed)", h, v.Host, stale)
	}
	if h := c.holdings(mig.UUID); len(h) != 0 {
		t.Errorf("the completed migration still holds %v MB", h)
	}
	c.checkMoves("live migration taken over", true, procDir)
	c.exactUsages("live migration taken over", hosts, all)
	t.Logf("live migration: the stale claim was on %s, the takeover moved the guest to %s", stale, v.Host)

	// 2. The scheduler leader killed mid drain: a second candidate first.
	scheds["super-d"] = c.startSched("super-d", nil)
	byPID := map[int]string{}
	for name, p := range scheds {
		if name == "super-c" || name == "super-d" {
			byPID[p.cmd.Process.Pid] = name
		}
	}
	testwait.Poll(t, 30*time.Second, "a scheduler leader among the running", func() (bool, string) {
		pid, id := c.schedLeader()
		return byPID[pid] != "", id
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	drainKey := c.keys.HostDrain("compute-2")
	watch := c.cli.Watch(ctx, drainKey)
	c.cliOK("host", "drain", "compute-2", "--parallel", "2")
	var killed string
	var mid etcdschema.HostDrain
	for killed == "" {
		wr, ok := <-watch
		if !ok || wr.Err() != nil {
			t.Fatalf("watch of the drain ended before a move was in flight: %v", wr.Err())
		}
		for _, ev := range wr.Events {
			if ev.Type != clientv3.EventTypePut || etcdschema.Decode(drainKey, ev.Kv.Value, &mid) != nil {
				continue
			}
			n := mid.Counts()
			if mid.State == etcdschema.DrainDraining && n[etcdschema.DrainMoving] >= 1 && n[etcdschema.DrainWaiting] >= 1 {
				pid, id := c.schedLeader()
				if killed = byPID[pid]; killed == "" {
					t.Fatalf("the drain's leader %s is no process of this test", id)
				}
				scheds[killed].kill(t)
				break
			}
		}
	}
	cancel()
	t.Logf("killed the scheduler leader %s with the drain at %v", killed, mid.Counts())
	var end etcdschema.HostDrain
	testwait.Poll(t, 90*time.Second, "the drain complete under the new leader", func() (bool, string) {
		resp, err := c.cli.Get(context.Background(), drainKey)
		if err != nil || len(resp.Kvs) != 1 || etcdschema.Decode(drainKey, resp.Kvs[0].Value, &end) != nil {
			return false, fmt.Sprint(err)
		}
		return etcdschema.DrainFinal(end.State) && end.Counts()[etcdschema.DrainMoving] == 0,
			fmt.Sprintf("%s %v %s", end.State, end.Counts(), end.Error)
	})
	if end.State != etcdschema.DrainComplete || end.Counts()[etcdschema.DrainMoved] != len(drained) {
		t.Fatalf("the drain ended %s (%s): %+v", end.State, end.Error, end.Instances)
	}
	if s := c.service("compute-2"); s.Status != "disabled" || s.DisabledReason != "draining" {
		t.Errorf("compute-2 after its drain: %s (%q), want disabled, draining", s.Status, s.DisabledReason)
	}
	for _, id := range drained {
		v := c.movedOff(id, "compute-2")
		migs := c.migrationsOf(id, end.RequestID)
		if len(migs) != 1 || migs[0].Status != etcdschema.MigrationConfirmed || migs[0].DestHost != v.Host {
			t.Errorf("%s on %s: the drain's migrations %+v, want one, confirmed, to %s", id, v.Host, migs, v.Host)
		}
	}
	c.checkMoves("drain taken over", true, procDir)
	c.exactUsages("drain taken over", hosts, all)
}

// startSched starts a scheduler+superconductor process whose election
// and leases are 2 s, so a killed one's work moves on within seconds.
func (c *cluster) startSched(name string, env []string) *proc {
	c.t.Helper()
	cfg := etcdBlock(c.etcdURL) + fmt.Sprintf(`
scheduler {
  bind = "127.0.0.1:%d"
  max_attempts = 3
  election_ttl = "2s"
  leader_interval = "1s"
}
superconductor {
  lease_ttl = "2s"
}
`, etcdtest.FreePort(c.t))
	return startProcEnv(c.t, name, env, "run", "server", "-config", writeFile(c.t, c.dir, name+".hcl", cfg))
}

// schedLeader reads the scheduler election's leader (the candidate with
// the lowest create revision; its value is scheduler@host:pid:rand).
func (c *cluster) schedLeader() (pid int, id string) {
	resp, err := c.cli.Get(context.Background(), c.keys.Election("scheduler")+"/", clientv3.WithFirstCreate()...)
	if err != nil || len(resp.Kvs) == 0 {
		return 0, fmt.Sprint(err)
	}
	id = string(resp.Kvs[0].Value)
	if parts := strings.Split(strings.ReplaceAll(id, "/", ":"), ":"); len(parts) >= 3 {
		pid, _ = strconv.Atoi(parts[1])
	}
	return pid, id
}

// boot creates n servers on host and waits until they are ACTIVE.
func (c *cluster) boot(name, host string, n int) []string {
	c.t.Helper()
	resp, err := c.api.CreateServers(context.Background(), api.CreateRequest{Name: name, Flavor: "m1.tiny", Count: n, Host: host})
	if err != nil {
		c.t.Fatalf("create %s on %s: %v", name, host, err)
	}
	ids := serverIDs(resp)
	for _, id := range ids {
		if v := c.settle(id); v.Status != "ACTIVE" || v.Host != host {
			c.t.Fatalf("%s: %s on %s, want ACTIVE on %s", id, v.Status, v.Host, host)
		}
	}
	return ids
}

// movedOff waits until id is ACTIVE with no task on a host other than
// from, and returns it.
func (c *cluster) movedOff(id, from string) *api.ServerView {
	c.t.Helper()
	var v *api.ServerView
	testwait.Poll(c.t, 90*time.Second, id+" ACTIVE off "+from, func() (bool, string) {
		var err error
		v, err = c.api.GetServer(context.Background(), id)
		if err != nil {
			return false, err.Error()
		}
		if v.Status == "ERROR" {
			c.t.Fatalf("%s went ERROR: %+v", id, v)
		}
		return v.Status == "ACTIVE" && v.TaskState == "" && v.Host != from && v.Host != "",
			fmt.Sprintf("%s/%s on %s", v.Status, v.TaskState, v.Host)
	})
	return v
}

// holdings is the MB of memory consumer holds, by host.
func (c *cluster) holdings(consumer string) map[string]int64 {
	c.t.Helper()
	out := map[string]int64{}
	con := c.consumer(consumer)
	if con == nil {
		return out
	}
	for prov, a := range con.Allocations {
		host := prov
		for _, h := range []string{"compute-1", "compute-2", "compute-3", "compute-4"} {
			if agent.ProviderUUIDForHost(h) == prov {
				host = h
			}
		}
		out[host] += a.Resources["MEMORY_MB"]
	}
	return out
}

// exactUsages checks each host's provider uses exactly the m1.tiny
// servers etcd places there, and that they add up to every server once.
func (c *cluster) exactUsages(what string, hosts, ids []string) {
	c.t.Helper()
	per := map[string]int64{}
	for _, id := range ids {
		v, err := c.api.GetServer(context.Background(), id)
		if err != nil {
			c.t.Fatal(err)
		}
		per[v.Host] += int64(mTiny.RAMMB)
	}
	for _, h := range hosts {
		if got := c.provider(h).Usages["MEMORY_MB"]; got != per[h] {
			c.t.Errorf("%s: %s uses %d MB, its servers %d", what, h, got, per[h])
		}
	}
	if got, want := c.totalUsage("MEMORY_MB"), int64(len(ids)*mTiny.RAMMB); got != want {
		c.t.Errorf("%s: %d MB in use in all, want %d (every server once)", what, got, want)
	}
}

// migrationsOf reads id's migrations of request requestID from etcd.
func (c *cluster) migrationsOf(id, requestID string) []etcdschema.Migration {
	c.t.Helper()
	resp, err := c.cli.Get(context.Background(), c.keys.CellsPrefix(), clientv3.WithPrefix())
	if err != nil {
		c.t.Fatal(err)
	}
	var out []etcdschema.Migration
	for _, kv := range resp.Kvs {
		if !strings.Contains(string(kv.Key), "/migrations/") {
			continue
		}
		var m etcdschema.Migration
		if err := etcdschema.Decode(string(kv.Key), kv.Value, &m); err != nil {
			c.t.Fatal(err)
		}
		if m.InstanceUUID == id && m.RequestID == requestID {
			out = append(out, m)
		}
	}
	return out
}

// guestHosts lists the hosts whose process driver records a running
// guest of id.
func guestHosts(procDir string, hosts []string, id string) []string {
	var out []string
	for _, h := range hosts {
		if pid, err := readRecordedPID(procDir, h, id); err == nil && processAlive(pid) {
			out = append(out, h)
		}
	}
	return out
}
