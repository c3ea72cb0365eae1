package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/agent"
	"github.com/berth-project/berth/api"
	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/testwait"
)

// TestMultiHost runs Berth as deployed on several machines, each a
// network namespace with its own address (see netns_test.go), and puts it
// through the failures a deployment meets. The scenarios share one
// cluster, in order; each checks the invariants at its end, and each can
// run alone (go test ./e2e -run TestMultiHost/agent_partitioned).
func TestMultiHost(t *testing.T) {
	c := newMHCluster(t)
	failed := ""
	run := func(name string, f func(t *testing.T, c *mhCluster)) {
		ok := t.Run(name, func(st *testing.T) {
			if failed != "" {
				// Its failure may have left the shared cluster broken (a
				// host cut off, a process not restarted): this one would
				// only fail for that.
				st.Skipf("skipped: %s failed before it on the shared cluster", failed)
			}
			c.use(st)
			defer c.use(t)
			start := time.Now()
			f(st, c)
			st.Logf("%s took %s", name, time.Since(start).Round(100*time.Millisecond))
		})
		if !ok && failed == "" {
			failed = name
		}
	}
	run("bursts", scenarioBursts)
	run("scheduler_leader_killed", scenarioLeaderKilled)
	run("agent_partitioned", scenarioPartition)
	run("etcd_member_killed", scenarioEtcdMemberKilled)
	run("cell_conductor_killed", scenarioConductorKilled)
	run("cold_moves", scenarioColdMoves)
}

// use makes t the test that helpers report failures to (a subtest's own,
// so FailNow stops the right goroutine); processes and hosts stay owned by
// the top-level test, so they outlive the subtest that started them.
func (c *mhCluster) use(t *testing.T) {
	c.t = t
	c.net.t = t
}

// Scenario 1: 200 servers in 4 bursts of 50, each burst's requests
// alternating between the two servers' APIs.
func scenarioBursts(t *testing.T, c *mhCluster) {
	start := time.Now()
	total := 0
	for b := 1; b <= 4; b++ {
		ids, errs := c.burst(fmt.Sprintf("burst%d", b), 50, c.alternate())
		if len(errs) > 0 {
			t.Fatalf("burst %d: %d of 50 requests refused, first: %v", b, len(errs), errs[0])
		}
		total += len(ids)
	}
	asked := time.Since(start)
	byID := c.settleAll(3 * time.Minute)
	active, errored := 0, 0
	for id := range c.requested {
		switch byID[id].Status {
		case "ACTIVE":
			active++
		case "ERROR":
			errored++
		}
	}
	t.Logf("%d servers asked for in %s, all settled after %s: %d ACTIVE, %d ERROR",
		total, asked.Round(time.Millisecond), time.Since(start).Round(time.Millisecond), active, errored)
	if total != 200 || active == 0 {
		t.Fatalf("%d servers accepted, %d ACTIVE; want 200 accepted, most ACTIVE", total, active)
	}
	c.checkInvariants("bursts")
}

// Scenario 2: SIGKILL the process of the scheduler leader (a whole
// server: api, placement, scheduler, superconductor) in the middle of a
// burst. The other server's scheduler leads within the election TTL, and
// every server asked for settles; requests the dead API refused are asked
// again of the live one, as a client would.
func scenarioLeaderKilled(t *testing.T, c *mhCluster) {
	ttl, _ := time.ParseDuration(c.vars["election_ttl"])
	testwait.Poll(t, 30*time.Second, "both schedulers campaigning", func() (bool, string) {
		n := c.countPrefix(c.keys.Election("scheduler") + "/")
		return n == 2, fmt.Sprintf("%d candidates", n)
	})
	pid, leaderID := c.schedulerLeader()
	var victim *hostProc
	for _, p := range c.servers {
		if p.running() && p.pid() == pid {
			victim = p
		}
	}
	if victim == nil {
		t.Fatalf("scheduler leader %q is none of the server processes", leaderID)
	}
	t.Logf("scheduler leader: %s (%s on %s)", leaderID, victim.name, victim.host.name)

	var accepted atomic.Int64
	var refused []error
	var ids []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		ids, refused = c.burstFailover("failover", 60, &accepted)
	}()
	testwait.Poll(t, 60*time.Second, "a third of the burst accepted", func() (bool, string) {
		return accepted.Load() >= 20, fmt.Sprintf("%d accepted", accepted.Load())
	})
	killed := time.Now()
	victim.kill(t)
	var newID string
	testwait.Poll(t, 30*time.Second, "a new scheduler leader", func() (bool, string) {
		p, id := c.schedulerLeader()
		newID = id
		return p != 0 && p != pid, id
	})
	failover := time.Since(killed)
	t.Logf("leader failover: %s after SIGKILL of %s (election_ttl %s); new leader %s", failover.Round(time.Millisecond), victim.name, ttl, newID)
	// The old leader's lease outlives it by at most the TTL; allow 2 s for
	// etcd's lease expiry sweep and the poll on a loaded 2-core machine.
	if failover > ttl+2*time.Second {
		t.Errorf("new leader after %s; election_ttl is %s", failover, ttl)
	}
	<-done
	if len(ids) != 60 {
		t.Fatalf("%d of 60 servers accepted (refusals: %v)", len(ids), refused)
	}
	byID := c.settleAll(2 * time.Minute)
	counts := map[string]int{}
	for _, id := range ids {
		counts[byID[id].Status]++
	}
	// A request the dying API had stored before it died, whose answer was
	// lost, made a server the client does not know of; it must settle
	// too (the invariants check every server listed).
	unknown := 0
	asked := map[string]bool{}
	for _, id := range ids {
		asked[id] = true
	}
	for id, s := range byID {
		if strings.HasPrefix(s.Name, "failover-") && !asked[id] {
			unknown++
		}
	}
	t.Logf("burst of 60 across the kill: %d requests failed on the dying API and were asked again; outcome %v; %d more servers made by requests whose answer was lost",
		len(refused), counts, unknown)

	c.net.restart(victim)
	c.waitAPI(victim.host)
	testwait.Poll(t, 30*time.Second, "the restarted scheduler campaigning", func() (bool, string) {
		n := c.countPrefix(c.keys.Election("scheduler") + "/")
		return n == 2, fmt.Sprintf("%d candidates", n)
	})
	c.checkInvariants("scheduler_leader_killed")
}

// burstFailover is burst with a client's failover: a request the chosen
// API fails is asked again of the other server.
func (c *mhCluster) burstFailover(name string, n int, accepted *atomic.Int64) ([]string, []error) {
	clients := []*api.Client{}
	names := []string{}
	for nm, p := range c.servers {
		clients = append(clients, c.apiClient(p.host))
		names = append(names, nm)
	}
	return c.burstEach(name, n, 4, func(i int) ([]string, []error) {
		var refused []error
		for try := 0; try < len(clients)*3; try++ {
			k := (i + try) % len(clients)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			resp, err := clients[k].CreateServers(ctx, api.CreateRequest{
				Name: fmt.Sprintf("%s-%d", name, i), Flavor: "m1.tiny", Count: 1})
			cancel()
			if err != nil {
				refused = append(refused, fmt.Errorf("%s: %w", names[k], err))
				continue
			}
			accepted.Add(1)
			return serverIDs(resp), refused
		}
		return nil, refused
	})
}

// Scenario 3: cut an agent's host off while it builds. It reads down
// after service_down_time, nothing new lands there, and the leader's
// down-host duty turns its builds into retries after down_host_grace,
// which the cell conductor builds on the alternates. Healed, the agent
// reads up again; its builds, finished in the dark, find their casts gone:
// it destroys them and leaves nothing behind in etcd.
func scenarioPartition(t *testing.T, c *mhCluster) {
	c.net.skipWithoutNetns(t)
	const victim = "compute-3"
	// Restart the victim with slow builds and far the most RAM and vCPUs,
	// so the weighers send it the next burst (its builds in flight, which
	// the io_ops weigher counts against it, do not outweigh that) and the
	// builds are still running when it is cut off.
	old := c.agents[victim]
	old.stop(t, 20*time.Second)
	c.startAgent(victim, c.agentCell[victim], map[string]string{"build_time": "10s", "memory_mb": "1048576", "vcpus": "1024"})
	c.waitState(victim, "up", 30*time.Second)

	ids, errs := c.burst("partition", 8, c.alternate())
	if len(errs) > 0 {
		t.Fatalf("burst refused: %v", errs)
	}
	// Builds elsewhere take 200 ms; the victim's take 10 s. Wait until
	// each server is either ACTIVE elsewhere or cast to the victim.
	var inFlight []string
	testwait.Poll(t, 30*time.Second, "the burst built elsewhere or in flight on "+victim, func() (bool, string) {
		inFlight = inFlight[:0]
		other := 0
		for _, id := range ids {
			resp, err := c.cli.Get(context.Background(), c.keys.Build(victim, id))
			if err != nil {
				return false, err.Error()
			}
			if len(resp.Kvs) == 1 {
				inFlight = append(inFlight, id)
				continue
			}
			if v, err := c.api().GetServer(context.Background(), id); err == nil && v.Status == "ACTIVE" && v.Host != victim {
				other++
			}
		}
		return len(inFlight) > 0 && len(inFlight)+other == len(ids),
			fmt.Sprintf("%d of %d cast to %s, %d ACTIVE elsewhere", len(inFlight), len(ids), victim, other)
	})
	t.Logf("%d of %d servers in flight on %s", len(inFlight), len(ids), victim)

	h := c.hosts[victim]
	cut := time.Now()
	c.net.cutOff(h)
	c.waitState(victim, "down", 30*time.Second)
	readDown := time.Since(cut)
	svc := c.vars["service_down_time"]
	t.Logf("%s read down %s after its link went down (service_down_time %s)", victim, readDown.Round(time.Millisecond), svc)

	testwait.Poll(t, 60*time.Second, "the cut-off host's builds ACTIVE elsewhere", func() (bool, string) {
		moved := 0
		var state []string
		for _, id := range inFlight {
			v, err := c.api().GetServer(context.Background(), id)
			if err != nil {
				return false, err.Error()
			}
			if v.Status == "ACTIVE" && v.Host != victim && v.Host != "" {
				moved++
			} else {
				state = append(state, v.Status+"@"+v.Host)
			}
		}
		return moved == len(inFlight), fmt.Sprintf("%d of %d moved; others %v", moved, len(inFlight), state)
	})
	retried := time.Since(cut)
	t.Logf("%d in-flight builds retried and ACTIVE elsewhere %s after the cut (down_host_grace %s, leader_interval %s)",
		len(inFlight), retried.Round(time.Millisecond), c.vars["down_host_grace"], c.vars["leader_interval"])
	if resp, err := c.cli.Get(context.Background(), c.keys.HostDown(victim)); err != nil || len(resp.Kvs) != 1 {
		t.Errorf("no down record for %s: %v", victim, err)
	}

	// While it is cut off, nothing new lands there, though it has the
	// most free RAM.
	during, errs := c.burst("while-cut", 8, c.alternate())
	if len(errs) > 0 {
		t.Fatalf("burst while cut off refused: %v", errs)
	}
	byID := c.settleAll(time.Minute)
	for _, id := range during {
		if byID[id].Host == victim {
			t.Errorf("server %s built on %s while it was cut off", id, victim)
		}
	}

	healed := time.Now()
	c.net.heal(h)
	c.waitState(victim, "up", 60*time.Second)
	t.Logf("%s read up %s after its link came back", victim, time.Since(healed).Round(time.Millisecond))
	// Its builds ran on in the dark; when they end the agent finds each
	// cast taken back, records nothing and destroys what it built (the
	// fake driver's instances are in its memory: its log is where to see
	// it). Then nothing may place them on the victim.
	testwait.Poll(t, 60*time.Second, victim+" to drop the builds taken back", func() (bool, string) {
		b, _ := os.ReadFile(c.agents[victim].log)
		n := strings.Count(string(b), "build outcome dropped: the cast was taken back")
		return n == len(inFlight), fmt.Sprintf("%d of %d", n, len(inFlight))
	})
	t.Logf("%s reconciled %s after the heal: %d builds taken back destroyed locally", victim, time.Since(healed).Round(time.Millisecond), len(inFlight))
	for _, id := range inFlight {
		if v, err := c.api().GetServer(context.Background(), id); err != nil || v.Host == victim || v.Status != "ACTIVE" {
			t.Errorf("server %s after the heal: %+v %v", id, v, err)
		}
		if con := c.consumer(id); con == nil || len(con.Allocations) != 1 {
			t.Errorf("server %s holds allocations %+v after the heal, want one", id, con)
		} else if _, onVictim := con.Allocations[agent.ProviderUUIDForHost(victim)]; onVictim {
			t.Errorf("server %s still holds a claim on %s", id, victim)
		}
	}
	// The returned host works again: a server pinned to it goes ACTIVE.
	ids, errs = c.burstPinned("after-heal", victim)
	if len(errs) > 0 {
		t.Fatalf("pinned create: %v", errs)
	}
	byID = c.settleAll(time.Minute)
	if v := byID[ids[0]]; v.Status != "ACTIVE" || v.Host != victim {
		t.Errorf("server pinned to the healed %s: %+v", victim, v)
	}
	// Back to the cluster's common sizes and build time, so later
	// scenarios are not steered to it.
	c.agents[victim].stop(t, 20*time.Second)
	c.startAgent(victim, c.agentCell[victim], nil)
	c.waitState(victim, "up", 30*time.Second)
	c.checkInvariants("agent_partitioned")
}

// burstPinned asks for one server on host.
func (c *mhCluster) burstPinned(name, host string) ([]string, []error) {
	resp, err := c.api().CreateServers(context.Background(), api.CreateRequest{Name: name, Flavor: "m1.tiny", Count: 1, Host: host})
	if err != nil {
		return nil, []error{err}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var ids []string
	for _, s := range resp.Servers {
		ids = append(ids, s.ID)
		c.requested[s.ID] = name
	}
	return ids, nil
}

// consumer reads a consumer's allocations; nil when it has none.
func (c *mhCluster) consumer(id string) *etcdschema.Consumer {
	c.t.Helper()
	return readConsumer(c.t, c.cli, c.keys, id)
}

// Scenario 4: SIGKILL the etcd raft leader; Berth goes on serving through
// the two members left (every client has all three endpoints). The member
// restarted on its data dir rejoins and catches up.
func scenarioEtcdMemberKilled(t *testing.T, c *mhCluster) {
	st, err := c.cli.Status(context.Background(), c.endpoints()[0])
	if err != nil {
		t.Fatal(err)
	}
	members, err := c.cli.MemberList(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var victim string
	for _, m := range members.Members {
		if m.ID == st.Leader {
			victim = m.Name
		}
	}
	if _, ok := c.etcd[victim]; !ok {
		t.Fatalf("raft leader %x is none of %v", st.Leader, c.etcdNames)
	}
	p := c.etcd[victim]
	killed := time.Now()
	p.kill(t)
	t.Logf("killed etcd raft leader %s on %s", victim, p.host.name)
	elected := c.watchElection(st.Leader)

	ids, errs := c.burst("etcd-down", 40, c.alternate())
	if len(errs) > 0 {
		t.Fatalf("%d of 40 requests refused with an etcd member down (%s), first: %v", len(errs), elected(), errs[0])
	}
	byID := c.settleAll(2 * time.Minute)
	active := 0
	for _, id := range ids {
		if byID[id].Status == "ACTIVE" {
			active++
		}
	}
	t.Logf("40 servers asked for and settled with %s down (%d ACTIVE) in %s; %s", victim, active, time.Since(killed).Round(time.Millisecond), elected())
	if active == 0 {
		t.Fatal("no server went ACTIVE with one etcd member down")
	}
	c.waitMembersAgree(30 * time.Second) // the two left

	restarted := time.Now()
	c.net.restart(p)
	c.waitMembersAgree(60 * time.Second)
	t.Logf("%s restarted on its data dir and agreed with the others after %s", victim, time.Since(restarted).Round(time.Millisecond))
	c.checkInvariants("etcd_member_killed")
}

// watchElection polls the running etcd members, from now on, until they
// all name one leader other than old; the function it returns says when
// that was (or that it has not happened yet), for the scenario's log.
func (c *mhCluster) watchElection(old uint64) func() string {
	start := time.Now()
	var mu sync.Mutex
	took := time.Duration(-1)
	var clis []*clientv3.Client
	var eps []string
	for i, n := range c.etcdNames {
		if p := c.etcd[n]; p.running() {
			ep := c.etcdURL(i)
			cli, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 2 * time.Second, TLS: c.rootTLS()})
			if err != nil {
				c.t.Fatalf("etcd client for %s: %v", n, err)
			}
			clis, eps = append(clis, cli), append(eps, ep)
		}
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() {
			for _, cli := range clis {
				cli.Close()
			}
		}()
		for time.Since(start) < 2*time.Minute {
			agreed := true
			var leader uint64
			for i, cli := range clis {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				st, err := cli.Status(ctx, eps[i])
				cancel()
				if err != nil || st.Leader == 0 || st.Leader == old || (leader != 0 && st.Leader != leader) {
					agreed = false
					break
				}
				leader = st.Leader
			}
			if agreed {
				mu.Lock()
				took = time.Since(start)
				mu.Unlock()
				return
			}
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond): // polling interval, not a wait for state
			}
		}
	}()
	c.net.root.Cleanup(func() {
		close(stop)
		<-done
	})
	return func() string {
		mu.Lock()
		defer mu.Unlock()
		if took < 0 {
			return fmt.Sprintf("the members left named no new leader in the %s since the kill", time.Since(start).Round(time.Millisecond))
		}
		return fmt.Sprintf("the members left named a new leader %s after the kill", took.Round(time.Millisecond))
	}
}

// Scenario 5: a cell conductor dies holding retries (paused by testhook
// just before committing each retry's cast, its alternate claimed); the
// cell's other conductor takes them when their leases expire and builds
// each once.
func scenarioConductorKilled(t *testing.T, c *mhCluster) {
	const cell = "cell3"
	for _, h := range []string{"cond-3a", "cond-3b", "compute-7", "compute-8"} {
		c.addHost(h)
	}
	env, file := pauseEnv(t, "cellconductor.before-commit")
	first := c.startConductor("conductor-3a", c.hosts["cond-3a"], cell, env)
	// compute-7 fails every build (reschedulably, after 3 s) and has far
	// the most free RAM and vCPUs, so it is every server's first pick
	// until its first failure is recorded; compute-8 is the alternate in
	// the same cell.
	c.startAgent("compute-7", cell, map[string]string{"fail": "true", "build_time": "3s", "memory_mb": "1048576", "vcpus": "1024"})
	c.startAgent("compute-8", cell, nil)
	c.waitState("compute-7", "up", 30*time.Second)
	c.waitState("compute-8", "up", 30*time.Second)

	// Four requests of one, all placed before compute-7's first failure
	// (after which the BuildFailure weigher steers away from it). One
	// request of four would not do: a host chosen for one instance of a
	// request is no alternate for the others.
	ids, errs := c.burst("retry", 4, func(int) *api.Client { return c.api() })
	if len(errs) > 0 {
		t.Fatalf("burst refused: %v", errs)
	}
	// Each server fails on compute-7, then conductor-3a leases its retry,
	// claims compute-8 and stops before committing the cast. A server
	// another scheduler pass sent elsewhere just settles.
	var held []string
	testwait.Poll(t, 60*time.Second, "conductor-3a holding the retries", func() (bool, string) {
		b, _ := os.ReadFile(file)
		held = held[:0]
		isHeld := map[string]bool{}
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if f := strings.Fields(line); len(f) == 2 {
				held = append(held, f[1])
				isHeld[f[1]] = true
			}
		}
		settled := 0
		for _, id := range ids {
			if v, err := c.api().GetServer(context.Background(), id); err == nil && !isHeld[id] && (v.Status == "ACTIVE" || v.Status == "ERROR") {
				settled++
			}
		}
		return len(held) > 0 && len(held)+settled == len(ids), fmt.Sprintf("%d of %d held, %d settled", len(held), len(ids), settled)
	})
	for _, id := range held {
		if con := c.consumer(id); con == nil || len(con.Allocations) != 1 {
			t.Fatalf("retry %s held without its alternate's claim: %+v", id, con)
		}
	}
	c.startConductor("conductor-3b", c.hosts["cond-3b"], cell, nil)
	killed := time.Now()
	first.kill(t)
	byID := c.settleAll(time.Minute)
	t.Logf("%d retries held by the killed conductor finished by conductor-3b %s after the kill (lease_ttl %s)",
		len(held), time.Since(killed).Round(time.Millisecond), c.vars["conductor_lease_ttl"])
	for _, id := range held {
		v := byID[id]
		if v.Status != "ACTIVE" || v.Host != "compute-8" || v.Attempts != 2 {
			t.Errorf("server %s: %s on %s after %d attempts; want ACTIVE on compute-8 after 2", id, v.Status, v.Host, v.Attempts)
		}
		resp, err := c.cli.Get(context.Background(), c.keys.CellInstance(cell, id))
		if err != nil || len(resp.Kvs) != 1 {
			t.Errorf("instance record of %s in %s: %v", id, cell, err)
		}
		if con := c.consumer(id); con == nil || len(con.Allocations) != 1 || con.Allocations[agent.ProviderUUIDForHost("compute-8")].Resources["MEMORY_MB"] != 512 {
			t.Errorf("allocations of %s: %+v, want 512 MB on compute-8 only", id, con)
		}
	}
	if n := c.countPrefix(c.keys.Retries(cell)); n != 0 {
		t.Errorf("%d retries left in %s", n, cell)
	}
	c.checkInvariants("cell_conductor_killed")
}
