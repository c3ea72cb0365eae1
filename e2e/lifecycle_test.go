package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/agent"
	"github.com/berth-project/berth/api"
	"github.com/berth-project/berth/internal/testwait"
	"github.com/berth-project/berth/placement"
)

// TestRetryOnAlternatesDisableAndExhaust: builds failing on the chosen
// hosts end ACTIVE on an alternate of the same cell; a disabled host is
// never chosen and carries the trait in Placement; with every enabled host
// failing the build ends in ERROR after max_attempts with each attempt's
// reason and no allocation left.
func TestRetryOnAlternatesDisableAndExhaust(t *testing.T) {
	c := newCluster(t)
	c.startConductor("conductor", "cell1", nil)
	c.startServer("server", allRoles, nil)
	// compute-3 has the least RAM, so the RAM weigher ranks it last: the
	// failing hosts are tried first and compute-3 is the last alternate.
	// compute-5, healthy, is alone in cell2, which does not exist when its
	// agent registers; it has the least RAM so it is never the first pick.
	c.startAgents(agentSpec{host: "compute-1", memoryMB: 16384, fail: true}, agentSpec{host: "compute-2", memoryMB: 16384, fail: true},
		agentSpec{host: "compute-3", memoryMB: 8192}, agentSpec{host: "compute-4", memoryMB: 16384, fail: true},
		agentSpec{host: "compute-5", memoryMB: 4096, cell: "cell2"})
	if out := c.cliOK("host", "list", "-o", "value", "-c", "host", "-c", "cell", "-c", "mapped"); !strings.Contains(out, "compute-5 cell2 false") {
		t.Fatalf("compute-5 should be unmapped before cell2 exists:\n%s", out)
	}
	c.cliOK("cell", "create", "cell2")
	if out := c.cliOK("cell", "discover-hosts"); !strings.Contains(out, "mapped compute-5 to cell2") {
		t.Fatalf("discover-hosts:\n%s", out)
	}
	if out := c.cliOK("cell", "list"); !strings.Contains(out, "cell2") {
		t.Fatalf("cell list:\n%s", out)
	}

	start := time.Now()
	out := c.cliOK("service", "disable", "compute-4", "--reason", "spare")
	t.Logf("disable with the agent up answered in %s (trait confirmed)", time.Since(start).Round(time.Millisecond))
	if !strings.Contains(out, "disabled") || !strings.Contains(out, "spare") {
		t.Fatalf("disable output:\n%s", out)
	}
	// The API answered after the agent confirmed the trait; it is in the
	// provider record in etcd (what etcdctl shows) and in the Placement API.
	if !c.disabledTrait("compute-4") {
		t.Fatal("COMPUTE_STATUS_DISABLED not on compute-4's provider after disable returned")
	}
	if rec := c.provider("compute-4"); !slices.Contains(rec.Traits, placement.TraitComputeStatusDisabled) {
		t.Fatalf("provider record in etcd lacks the trait: %v", rec.Traits)
	}

	a := c.create("a")
	v := c.settle(a)
	if v.Status != "ACTIVE" || v.Host != "compute-3" || v.Attempts != 3 {
		t.Fatalf("server a: %s on %s after %d attempts, want ACTIVE on compute-3 after 3:\n%+v", v.Status, v.Host, v.Attempts, v)
	}
	// The alternates record went with ACTIVE; the failed attempts and their
	// reasons stay with the instance.
	sel := c.cliOK("selection", "show", a, "-o", "value", "-c", "kind", "-c", "n", "-c", "host", "-c", "reason")
	if strings.Count(sel, "\nattempt ") != 3 || strings.Count(sel, "failed the build") != 2 ||
		!strings.Contains(sel, "\nattempt 3 compute-3") {
		t.Fatalf("selection show of a:\n%s", sel)
	}

	// Now only failing hosts are enabled.
	c.cliOK("service", "disable", "compute-3")
	c.cliOK("service", "enable", "compute-4")
	if c.disabledTrait("compute-4") || !c.disabledTrait("compute-3") {
		t.Fatalf("traits after enable/disable: compute-3 %v, compute-4 %v", c.traits("compute-3"), c.traits("compute-4"))
	}
	b := c.create("b")
	v = c.settle(b)
	if v.Status != "ERROR" || v.Fault == nil || !strings.Contains(v.Fault.Message, "Exhausted all hosts") {
		t.Fatalf("server b: %+v, want ERROR: Exhausted all hosts", v)
	}
	for _, h := range []string{"compute-1", "compute-2", "compute-4"} {
		if !strings.Contains(v.Fault.Details, h+": fake driver on "+h+" failed the build") {
			t.Errorf("fault details lack %s's reason: %q", h, v.Fault.Details)
		}
	}
	sel = c.cliOK("selection", "show", b, "-o", "value", "-c", "kind", "-c", "n", "-c", "host", "-c", "reason")
	if strings.Contains(sel, "compute-3") || strings.Count(sel, "failed the build") != 3 || strings.Contains(sel, "\nalternate ") {
		t.Fatalf("selection of b: want 3 failed attempts, none on the disabled compute-3, no alternate left:\n%s", sel)
	}
	// Retries stay in the chosen host's cell: compute-5 would have built it.
	if strings.Contains(v.Fault.Details, "compute-5") || strings.Count(v.Fault.Details, "failed the build") != 3 {
		t.Errorf("b was retried outside cell1 or not 3 times: %q", v.Fault.Details)
	}
	if con := c.consumer(b); con != nil {
		t.Fatalf("allocation left for the failed instance: %+v", con.Allocations)
	}
	// Only a's m1.small is allocated anywhere.
	if got := c.totalUsage("MEMORY_MB"); got != 2048 {
		t.Fatalf("%d MB allocated in total, want 2048 (server a only)", got)
	}
}

// TestAgentDownDisabledAndBack: a killed agent reads down after
// service_down_time and is no longer chosen; disabling it while down only
// marks it; restarted, it reads up, its instances are reconciled and still
// ACTIVE, and its start-up sync sets the trait, so builds still avoid it
// until it is enabled.
func TestAgentDownDisabledAndBack(t *testing.T) {
	c := newCluster(t)
	c.startConductor("conductor", "cell1", nil)
	c.startServer("server", allRoles, nil)
	// compute-1 runs real processes, which outlive its agent.
	procDir := t.TempDir()
	t.Cleanup(func() { killRecorded(procDir) })
	one := agentSpec{host: "compute-1", memoryMB: 16384, processDir: procDir}
	agents := c.startAgents(one, agentSpec{host: "compute-2", memoryMB: 16384})

	// One request of two: each pick sees the one before, so they spread.
	resp, err := c.api.CreateServers(context.Background(), api.CreateRequest{Name: "first", Flavor: "m1.small", Count: 2})
	if err != nil {
		t.Fatal(err)
	}
	var first []string
	for _, s := range resp.Servers {
		first = append(first, s.ID)
	}
	onOne := ""
	for _, id := range first {
		if v := c.settle(id); v.Status != "ACTIVE" {
			t.Fatalf("%s: %+v", id, v)
		} else if v.Host == "compute-1" {
			onOne = id
		}
	}
	if onOne == "" {
		t.Fatal("the weighers should have spread two servers over two empty hosts")
	}

	killed := time.Now()
	agents["compute-1"].kill(t)
	c.waitState("compute-1", "down")
	t.Logf("compute-1 read down %s after SIGKILL (service_down_time 3s)", time.Since(killed).Round(100*time.Millisecond))

	for i := 0; i < 2; i++ {
		if v := c.settle(c.create(fmt.Sprintf("while-down-%d", i))); v.Status != "ACTIVE" || v.Host != "compute-2" {
			t.Fatalf("server built while compute-1 is down: %+v", v)
		}
	}

	start := time.Now()
	out := c.cliOK("service", "disable", "compute-1", "--reason", "failed PSU")
	if !strings.Contains(out, "down") || !strings.Contains(out, "disabled") || time.Since(start) > 5*time.Second {
		t.Fatalf("disabling a down host took %s:\n%s", time.Since(start), out)
	}
	if c.disabledTrait("compute-1") {
		t.Fatal("trait set with no agent running")
	}

	pid := recordedPID(t, procDir, "compute-1", onOne)
	if !processAlive(pid) {
		t.Fatalf("instance process %d died with its agent", pid)
	}
	startProc(t, "agent-compute-1-again", "run", "agent", "-config", c.agentConfig(one))
	c.waitState("compute-1", "up")
	testwait.Poll(t, 30*time.Second, "the returning agent sets the trait", func() (bool, string) {
		tr := c.traits("compute-1")
		return slices.Contains(tr, placement.TraitComputeStatusDisabled), fmt.Sprint(tr)
	})
	if v, err := c.api.GetServer(context.Background(), onOne); err != nil || v.Status != "ACTIVE" || v.Host != "compute-1" {
		t.Fatalf("instance on compute-1 after the agent's restart: %+v, %v", v, err)
	}
	// Reconciled: the restarted agent adopted the process rather than
	// killing it as an orphan or starting a second one.
	if got := recordedPID(t, procDir, "compute-1", onOne); got != pid || !processAlive(pid) {
		t.Fatalf("instance process after the restart: pid %d (alive %v), want %d still running", got, processAlive(got), pid)
	}
	if v := c.settle(c.create("while-disabled")); v.Host != "compute-2" {
		t.Fatalf("server built on a disabled host: %+v", v)
	}

	c.cliOK("service", "enable", "compute-1")
	if c.disabledTrait("compute-1") {
		t.Fatal("trait still set after enable returned")
	}
	// forced_down overrides a live heartbeat: the scheduler treats the host
	// as down.
	if out := c.cliOK("service", "force-down", "compute-2"); !strings.Contains(out, "down") {
		t.Fatalf("force-down:\n%s", out)
	}
	if v := c.settle(c.create("while-forced-down")); v.Status != "ACTIVE" || v.Host != "compute-1" {
		t.Fatalf("server built while compute-2 is forced down: %+v", v)
	}
	c.cliOK("service", "force-down", "compute-2", "--unset")
	c.waitState("compute-2", "up")
	hosts := c.cliOK("host", "list")
	if !strings.Contains(hosts, "compute-1") || !strings.Contains(hosts, "up") {
		t.Fatalf("host list:\n%s", hosts)
	}

	list, err := c.api.ListServers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, s := range list {
		ids = append(ids, s.ID)
	}
	c.cliOK(append([]string{"server", "delete", "--wait", "--timeout", "60s"}, ids...)...)
	if left := leftovers(t, c.cli, c.keys); len(left) > 0 {
		t.Fatalf("allocations left after deleting every server: %v", left)
	}
	if processAlive(pid) {
		t.Fatalf("instance process %d still running after its server was deleted", pid)
	}
}

// TestCellConductorKilledHoldingRetry: the conductor holding a retry dies
// after claiming the alternate and before casting; another conductor of
// the cell takes the retry once the lease expires, frees the stale claim
// and builds the instance once.
func TestCellConductorKilledHoldingRetry(t *testing.T) {
	c := newCluster(t)
	env, file := pauseEnv(t, "cellconductor.before-commit")
	first := c.startConductor("conductor-a", "cell1", env)
	c.startServer("server", allRoles, nil)
	c.startAgents(agentSpec{host: "compute-1", memoryMB: 16384, fail: true}, agentSpec{host: "compute-2", memoryMB: 8192})

	id := c.create("r")
	if got := waitPaused(t, file, "cellconductor.before-commit"); got != id {
		t.Fatalf("paused on %s, want %s", got, id)
	}
	// conductor-a holds the retry and a claim on compute-2.
	if con := c.consumer(id); con == nil || len(con.Allocations) != 1 {
		t.Fatalf("no claim held by the paused conductor: %+v", con)
	}
	first.kill(t)
	c.startConductor("conductor-b", "cell1", nil)

	v := c.settle(id)
	if v.Status != "ACTIVE" || v.Host != "compute-2" || v.Attempts != 2 {
		t.Fatalf("server after the conductor's death: %s on %s, %d attempts; want ACTIVE on compute-2 after 2:\n%+v",
			v.Status, v.Host, v.Attempts, v)
	}
	if n := c.instanceRecords(id); n != 1 {
		t.Fatalf("%d instance records, want 1", n)
	}
	con := c.consumer(id)
	if con == nil || len(con.Allocations) != 1 || con.Allocations[agent.ProviderUUIDForHost("compute-2")].Resources["MEMORY_MB"] != 2048 {
		t.Fatalf("allocations of the built instance: %+v", con)
	}
	if got := c.totalUsage("MEMORY_MB"); got != 2048 {
		t.Fatalf("%d MB allocated in total, want 2048: the dead conductor's claim was not freed", got)
	}
}

// TestSuperconductorKilledMidHandOff: the superconductor dies with a claim
// made and its hand-off transaction not sent; another superconductor takes
// the BuildRequest when the lease expires, frees the stale claim and hands
// it off once.
func TestSuperconductorKilledMidHandOff(t *testing.T) {
	c := newCluster(t)
	c.startConductor("conductor", "cell1", nil)
	c.startServer("front", frontRoles, nil)
	env, file := pauseEnv(t, "superconductor.before-handoff")
	first := c.startServer("super-a", schedRoles, env)
	c.startAgents(agentSpec{host: "compute-1", memoryMB: 16384}, agentSpec{host: "compute-2", memoryMB: 16384})

	id := c.create("s")
	if got := waitPaused(t, file, "superconductor.before-handoff"); got != id {
		t.Fatalf("paused on %s, want %s", got, id)
	}
	if con := c.consumer(id); con == nil {
		t.Fatal("the paused superconductor holds no claim")
	}
	first.kill(t)
	c.startServer("super-b", schedRoles, nil)

	v := c.settle(id)
	if v.Status != "ACTIVE" {
		t.Fatalf("server after the superconductor's death: %+v", v)
	}
	if n := c.instanceRecords(id); n != 1 {
		t.Fatalf("%d instance records, want 1", n)
	}
	list, err := c.api.ListServers(context.Background())
	if err != nil || len(list) != 1 {
		t.Fatalf("servers listed: %d (%v), want 1", len(list), err)
	}
	resp, err := c.cli.Get(context.Background(), c.keys.BuildRequests(), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || resp.Count != 0 {
		t.Fatalf("build requests left: %d (%v)", resp.Count, err)
	}
	con := c.consumer(id)
	if con == nil || len(con.Allocations) != 1 || con.Allocations[agent.ProviderUUIDForHost(v.Host)].Resources["MEMORY_MB"] != 2048 {
		t.Fatalf("allocations of the built instance on %s: %+v", v.Host, con)
	}
	if got := c.totalUsage("MEMORY_MB"); got != 2048 {
		t.Fatalf("%d MB allocated in total, want 2048: the dead superconductor's claim was orphaned", got)
	}
}
