package e2e

import (
	"context"
	"fmt"
	"os"
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
// processes, five process-driver agents whose guests are `sleep`
// processes; compute-5, the roomiest, has no guest command, so a live
// pre-check there fails):
//
//  1. a live migration's superconductor is SIGKILLed three times: paused
//     where it has handed the source's allocation to the migration and
//     claimed the first destination (compute-5) under the instance, its
//     hand-off not committed; the same again for its replacement; then,
//     after compute-5's pre-check failed and sent the migration back,
//     paused with an alternate claimed. Each replacement must find the
//     source still the migration's and exactly one claim the instance's;
//     a fourth finishes the migration on the alternate;
//  2. the scheduler leader is SIGKILLed during a cold drain, then again
//     during a live drain (its process a superconductor too, so one
//     dies with live migrations in flight), each time when the drain
//     record shows moves in flight and servers not yet started; the
//     other scheduler takes the lead and its drain duty finishes the
//     drain from the record (following, and confirming the cold moves).
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
	const point, retryPoint = "superconductor.before-live-handoff", "superconductor.before-live-retry-handoff"
	env, paused := pauseEnv(t, point)
	scheds := map[string]*proc{"super-a": c.startSched("super-a", env)}
	hosts := []string{"compute-1", "compute-2", "compute-3", "compute-4"}
	var specs []agentSpec
	for _, h := range hosts {
		specs = append(specs, agentSpec{host: h, memoryMB: 16384, processDir: procDir})
	}
	c.startAgents(specs...)
	// compute-5 has the most room, so a live migration tries it first,
	// and no command to run a guest with, so its pre-check fails: the
	// migration goes back to the superconductor for an alternate.
	c.startCommandlessAgent(agentSpec{host: "compute-5", memoryMB: 65536, processDir: procDir})
	hosts = append(hosts, "compute-5")
	live := c.boot("live", "compute-1", 1)[0]
	all := append([]string{live}, c.boot("cold-drained", "compute-2", 5)...)
	all = append(all, c.boot("live-drained", "compute-1", 4)...)
	c.checkMoves("booted", true, procDir)

	// 1. The superconductor killed mid live migration, three times: twice
	// with the first destination claimed, once with an alternate claimed
	// after that destination's pre-check failed.
	c.cliOK("server", "migrate", "--live", live)
	if got := waitPaused(t, paused, point); got != live {
		t.Fatalf("superconductor paused on %s, want %s", got, live)
	}
	mig := c.lastMigration(live)
	if mig.Status != etcdschema.MigrationAccepted || len(mig.Attempts) != 0 {
		t.Fatalf("the migration while its superconductor is paused: %s with attempts %+v, want accepted, none", mig.Status, mig.Attempts)
	}
	if h := c.holdings(mig.UUID); len(h) != 1 || h["compute-1"] != int64(mTiny.RAMMB) {
		t.Fatalf("the migration holds %v MB, want m1.tiny on compute-1", h)
	}
	if h := c.holdings(live); len(h) != 1 || h["compute-5"] != int64(mTiny.RAMMB) {
		t.Fatalf("the instance holds %v MB, want the paused superconductor's claim of m1.tiny on compute-5", h)
	}
	if pids := guestHosts(procDir, hosts, live); len(pids) != 1 || pids[0] != "compute-1" {
		t.Fatalf("the guest runs on %v before the hand-off, want compute-1", pids)
	}
	// next kills the superconductor holding the migration and starts
	// the next one, paused at ("": not paused), and checks what that one
	// holds there: the source still the migration's, one claim the
	// instance's (on claimOn when given), both ends counted once.
	next := func(killed, name, at, claimOn string) {
		t.Helper()
		scheds[killed].kill(t)
		delete(scheds, killed)
		var env []string
		if at != "" {
			env, paused = pauseEnv(t, at)
		}
		scheds[name] = c.startSched(name, env)
		if at == "" {
			return
		}
		if got := waitPaused(t, paused, at); got != live {
			t.Fatalf("%s paused on %s, want %s", name, got, live)
		}
		if h := c.holdings(mig.UUID); len(h) != 1 || h["compute-1"] != int64(mTiny.RAMMB) {
			t.Fatalf("the migration holds %v MB under %s, want m1.tiny on compute-1 still", h, name)
		}
		if h := c.holdings(live); len(h) != 1 || h["compute-1"] != 0 || (claimOn != "" && h[claimOn] == 0) {
			t.Fatalf("the instance holds %v MB under %s, want one claim of m1.tiny off compute-1 (on %q)", h, name, claimOn)
		}
		if got, want := c.totalUsage("MEMORY_MB"), int64((len(all)+1)*mTiny.RAMMB); got != want {
			t.Fatalf("%d MB in use with %s paused, want %d: every server's flavor and the source's", got, name, want)
		}
	}
	next("super-a", "super-b", point, "compute-5")
	next("super-b", "super-c", retryPoint, "")
	mig = c.lastMigration(live)
	if len(mig.Attempts) != 1 || mig.Attempts[0].Host != "compute-5" || !strings.Contains(mig.Attempts[0].Reason, "no default command") {
		t.Fatalf("the migration's attempts at its retry: %+v, want compute-5's failed pre-check", mig.Attempts)
	}
	if h := c.holdings(live); h["compute-5"] != 0 {
		t.Fatalf("the instance still holds %v MB on compute-5 after its pre-check failed", h)
	}
	next("super-c", "super-d", "", "")
	v := c.movedOff(live, "compute-1")
	mig = c.lastMigration(live)
	if mig.Status != etcdschema.MigrationCompleted || mig.DestHost != v.Host || len(mig.Attempts) != 2 ||
		mig.Attempts[0].Host != "compute-5" || mig.Attempts[1].Host != v.Host || mig.Attempts[1].Reason != "" {
		t.Errorf("the live migration after the takeovers: %s to %s, attempts %+v; want completed to %s, after compute-5 failed",
			mig.Status, mig.DestHost, mig.Attempts, v.Host)
	}
	if h := c.holdings(live); len(h) != 1 || h[v.Host] != int64(mTiny.RAMMB) {
		t.Errorf("the instance holds %v MB after the takeovers, want m1.tiny on %s once", h, v.Host)
	}
	if h := c.holdings(mig.UUID); len(h) != 0 {
		t.Errorf("the completed migration still holds %v MB", h)
	}
	c.checkMoves("live migration taken over", true, procDir)
	c.exactUsages("live migration taken over", hosts, all)
	t.Logf("live migration: after compute-5 and three superconductors killed, the guest moved to %s", v.Host)
	// The drains have no business with compute-5.
	c.cliOK("service", "disable", "compute-5", "--reason", "no guest command")

	// 2. The scheduler leader killed mid drain, cold then live (the
	// leader's process is a superconductor too: the live round kills one
	// with live migrations in flight): a second candidate first, each time.
	for _, round := range []struct {
		host, candidate, status string
		args                    []string
	}{
		{"compute-2", "super-e", etcdschema.MigrationConfirmed, nil},
		{"compute-1", "super-f", etcdschema.MigrationCompleted, []string{"--live"}},
	} {
		scheds[round.candidate] = c.startSched(round.candidate, nil)
		byPID := map[int]string{}
		for name, p := range scheds {
			byPID[p.cmd.Process.Pid] = name
		}
		onHost := c.serversOn(all, round.host)
		killed, mid := c.drainKillingLeader(round.host, byPID, scheds, round.args...)
		t.Logf("drain of %s %v: killed the scheduler leader %s with the drain at %v", round.host, round.args, killed, mid.Counts())
		end := c.waitDrainSettled(round.host)
		if end.State != etcdschema.DrainComplete || end.Counts()[etcdschema.DrainMoved] != len(onHost) {
			t.Fatalf("the drain of %s ended %s (%s), want complete with its %d servers moved: %+v",
				round.host, end.State, end.Error, len(onHost), end.Instances)
		}
		if s := c.service(round.host); s.Status != "disabled" || s.DisabledReason != "draining" {
			t.Errorf("%s after its drain: %s (%q), want disabled, draining", round.host, s.Status, s.DisabledReason)
		}
		for _, id := range onHost {
			v := c.movedOff(id, round.host)
			migs := c.migrationsOf(id, end.RequestID)
			if len(migs) != 1 || migs[0].Status != round.status || migs[0].DestHost != v.Host {
				t.Errorf("%s on %s: the drain's migrations %+v, want one, %s, to %s", id, v.Host, migs, round.status, v.Host)
			}
		}
		c.checkMoves("drain of "+round.host+" taken over", true, procDir)
		c.exactUsages("drain of "+round.host+" taken over", hosts, all)
	}
}

// serversOn lists the servers of ids on host now.
func (c *cluster) serversOn(ids []string, host string) []string {
	c.t.Helper()
	var out []string
	for _, id := range ids {
		v, err := c.api.GetServer(context.Background(), id)
		if err != nil {
			c.t.Fatal(err)
		}
		if v.Host == host {
			out = append(out, id)
		}
	}
	if len(out) < 3 {
		c.t.Fatalf("%d servers on %s, want at least 3 (a move in flight and one waiting at parallel 2)", len(out), host)
	}
	return out
}

// drainKillingLeader starts a drain of host (parallel 2, with args),
// watches its record and, on the first write with a move in flight and
// a server not yet started, SIGKILLs the scheduler leader, which must
// be one of byPID, and drops it from procs. It returns the leader's
// name and that record.
func (c *cluster) drainKillingLeader(host string, byPID map[int]string, procs map[string]*proc, args ...string) (string, etcdschema.HostDrain) {
	c.t.Helper()
	testwait.Poll(c.t, 30*time.Second, "a scheduler leader among the running", func() (bool, string) {
		pid, id := c.schedLeader()
		return byPID[pid] != "", id
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	key := c.keys.HostDrain(host)
	watch := c.cli.Watch(ctx, key)
	c.cliOK(append([]string{"host", "drain", host, "--parallel", "2"}, args...)...)
	var mid etcdschema.HostDrain
	for {
		wr, ok := <-watch
		if !ok || wr.Err() != nil {
			c.t.Fatalf("the watch of %s's drain ended before a move was in flight: %v", host, wr.Err())
		}
		for _, ev := range wr.Events {
			if ev.Type != clientv3.EventTypePut || etcdschema.Decode(key, ev.Kv.Value, &mid) != nil {
				continue
			}
			n := mid.Counts()
			if mid.State == etcdschema.DrainDraining && n[etcdschema.DrainMoving] >= 1 && n[etcdschema.DrainWaiting] >= 1 {
				pid, id := c.schedLeader()
				name := byPID[pid]
				if name == "" {
					c.t.Fatalf("the drain's leader %s is no process of this test", id)
				}
				procs[name].kill(c.t)
				delete(procs, name)
				return name, mid
			}
		}
	}
}

// waitDrainSettled waits until host's drain has ended and follows no
// move, and returns its record.
func (c *cluster) waitDrainSettled(host string) etcdschema.HostDrain {
	c.t.Helper()
	key := c.keys.HostDrain(host)
	var end etcdschema.HostDrain
	testwait.Poll(c.t, 90*time.Second, "the drain of "+host+" settled under the new leader", func() (bool, string) {
		resp, err := c.cli.Get(context.Background(), key)
		if err != nil || len(resp.Kvs) != 1 || etcdschema.Decode(key, resp.Kvs[0].Value, &end) != nil {
			return false, fmt.Sprint(err)
		}
		return etcdschema.DrainFinal(end.State) && end.Counts()[etcdschema.DrainMoving] == 0,
			fmt.Sprintf("%s %v %s", end.State, end.Counts(), end.Error)
	})
	return end
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

// startCommandlessAgent starts a process-driver agent with no default
// command: it cannot run a guest of a flavor without one (m1.tiny).
func (c *cluster) startCommandlessAgent(a agentSpec) {
	c.t.Helper()
	cfg := c.agentConfig(a)
	b, err := os.ReadFile(cfg)
	if err != nil {
		c.t.Fatal(err)
	}
	without := strings.Replace(string(b), "command = \"sleep 300\"\n", "", 1)
	if without == string(b) {
		c.t.Fatalf("no command line to drop in %s:\n%s", cfg, b)
	}
	if err := os.WriteFile(cfg, []byte(without), 0o644); err != nil {
		c.t.Fatal(err)
	}
	startProc(c.t, "agent-"+a.host, "run", "agent", "-config", cfg)
	c.waitState(a.host, "up")
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
		for _, h := range []string{"compute-1", "compute-2", "compute-3", "compute-4", "compute-5"} {
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
