package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/agent"
	"github.com/berth-project/berth/api"
	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/testwait"
)

// The cold moves (resize, confirm, revert, cold migration) with real
// berth processes: a server process, a cell conductor and agents, each
// its own process against one etcd, driven through the openstack CLI and
// through berth's, with agents killed (SIGKILL) in the middle of a move.

var (
	mTiny  = api.DefaultFlavors()[0]
	mSmall = api.DefaultFlavors()[1]
)

// moveCloud is a cluster with a helper per client of the moves.
type moveCloud struct {
	*cluster
	procDir string
	osc     *osc // the openstack CLI on Placement
}

// nova runs the openstack CLI on the compute API (noauth2's admin token,
// the latest microversion) and returns what it printed.
func (m *moveCloud) nova(args ...string) string {
	m.t.Helper()
	full := append([]string{"--os-auth-type", "admin_token", "--os-token", "admin:admin",
		"--os-endpoint", m.apiURL + "/v2.1", "--os-compute-api-version", "2.latest"}, args...)
	cmd := exec.Command("openstack", full...)
	cmd.Env = m.osc.env
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		m.t.Fatalf("openstack %s: %v\n%s%s", strings.Join(args, " "), err, out.String(), errOut.String())
	}
	return out.String()
}

// server waits until id is status (and on host, when given) and returns it.
func (m *moveCloud) server(id, status, host string) *api.ServerView {
	m.t.Helper()
	var v *api.ServerView
	testwait.Poll(m.t, 60*time.Second, fmt.Sprintf("%s %s on %q", id, status, host), func() (bool, string) {
		var err error
		v, err = m.api.GetServer(context.Background(), id)
		if err != nil {
			return false, err.Error()
		}
		if v.Status == "ERROR" && status != "ERROR" {
			m.t.Fatalf("%s went ERROR: %+v", id, v)
		}
		return v.Status == status && (host == "" || v.Host == host) && v.TaskState == "",
			fmt.Sprintf("%s/%s on %s", v.Status, v.TaskState, v.Host)
	})
	return v
}

// usages checks each host's usage through `openstack resource provider
// usage show`: exactly the flavors given (a host not named uses nothing).
func (m *moveCloud) usages(what string, hosts []string, want map[string][]etcdschema.Flavor) {
	m.t.Helper()
	for _, h := range hosts {
		sum := map[string]int{"VCPU": 0, "MEMORY_MB": 0, "DISK_GB": 0}
		for _, f := range want[h] {
			for rc, n := range flavorResources(f) {
				sum[rc] += int(n)
			}
		}
		var rows []struct {
			ResourceClass string `json:"resource_class"`
			Usage         int    `json:"usage"`
		}
		m.osc.json(m.t, &rows, "resource", "provider", "usage", "show", agent.ProviderUUIDForHost(h))
		got := map[string]int{}
		for _, r := range rows {
			got[r.ResourceClass] = r.Usage
		}
		if fmt.Sprint(got) != fmt.Sprint(sum) {
			m.t.Errorf("%s: %s uses %v, want %v", what, h, got, sum)
		}
	}
}

// allocation returns what `openstack resource provider allocation show`
// prints for consumer: resources by provider.
func (m *moveCloud) allocation(consumer string) map[string]map[string]int {
	m.t.Helper()
	var rows []struct {
		ResourceProvider string         `json:"resource_provider"`
		Resources        map[string]int `json:"resources"`
	}
	m.osc.json(m.t, &rows, "resource", "provider", "allocation", "show", consumer)
	out := map[string]map[string]int{}
	for _, r := range rows {
		out[r.ResourceProvider] = r.Resources
	}
	return out
}

// guestPIDs returns the pid of id's guest on each host that records one.
func (m *moveCloud) guestPIDs(id string, hosts []string) map[string]int {
	out := map[string]int{}
	for _, h := range hosts {
		if pid, err := readRecordedPID(m.procDir, h, id); err == nil {
			out[h] = pid
		}
	}
	return out
}

// migrations is `openstack server migration list --server id`, oldest
// first: each row's status, type and hosts.
func (m *moveCloud) migrations(id string) []string {
	m.t.Helper()
	var rows []map[string]any
	if err := json.Unmarshal([]byte(m.nova("server", "migration", "list", "--server", id, "-f", "json")), &rows); err != nil {
		m.t.Fatal(err)
	}
	var out []string
	for i := len(rows) - 1; i >= 0; i-- {
		r := rows[i]
		out = append(out, fmt.Sprintf("%v %v %v->%v", r["Type"], r["Status"], r["Source Compute"], r["Dest Compute"]))
	}
	return out
}

// TestColdMovesWithProcesses moves a real guest process between two
// process-driver agents that share one state_dir (as berth dev's do),
// through the openstack CLI, then berth's, then with an agent killed in
// the middle of a move, checking every step: the server's status and
// host, Placement's usages (during a move the source held by the
// migration's consumer, the destination by the instance; after a confirm
// or revert one host only), the guest running on exactly one host, and
// the move invariants.
func TestColdMovesWithProcesses(t *testing.T) {
	c := newCluster(t)
	skipWithoutOSC(t)
	m := &moveCloud{cluster: c, procDir: t.TempDir(), osc: newOSC(t, "http://"+c.placeAddr, "admin")}
	t.Cleanup(func() { killRecorded(m.procDir) })
	c.startConductor("conductor", "cell1", nil)
	c.startServer("server", allRoles, nil)
	hosts := []string{"compute-1", "compute-2"}
	specs := map[string]agentSpec{}
	for _, h := range hosts {
		specs[h] = agentSpec{host: h, memoryMB: 16384, processDir: m.procDir}
	}
	agents := c.startAgents(specs["compute-1"], specs["compute-2"])
	// restart replaces host's agent: SIGKILL (no shutdown) or SIGTERM,
	// then a new one, paused at point when given.
	restart := func(host string, kill bool, point string) string {
		t.Helper()
		if kill {
			agents[host].kill(t)
		} else if err := agents[host].stop(t, 20*time.Second); err != nil && !strings.Contains(err.Error(), "signal") {
			t.Logf("agent %s stopped: %v", host, err)
		}
		var env []string
		var file string
		if point != "" {
			env, file = pauseEnv(t, point)
		}
		agents[host] = startProcEnv(t, "agent-"+host+"-"+fmt.Sprint(time.Now().UnixNano()), env,
			"run", "agent", "-config", c.agentConfig(specs[host]))
		// Up alone may be the killed agent's alive key, not yet expired:
		// the new one has reconciled once it says so.
		waitLogged(t, agents[host], "reconciled with the driver")
		c.waitState(host, "up")
		return file
	}
	runsOnly := func(what, id, host string) int {
		t.Helper()
		var pids map[string]int
		testwait.Poll(t, 30*time.Second, what, func() (bool, string) {
			pids = m.guestPIDs(id, hosts)
			return len(pids) == 1 && pids[host] > 0 && processAlive(pids[host]), fmt.Sprint(pids)
		})
		return pids[host]
	}

	out := c.cliOK("server", "create", "--flavor", "m1.tiny", "--name", "mover", "--host", "compute-1", "--wait", "--timeout", "60s")
	if !strings.Contains(out, "ACTIVE") {
		t.Fatalf("create:\n%s", out)
	}
	servers, err := c.api.ListServers(context.Background())
	if err != nil || len(servers) != 1 {
		t.Fatalf("servers %v, %v", servers, err)
	}
	id := servers[0].ID
	booted := runsOnly("the guest on compute-1", id, "compute-1")
	m.usages("booted", hosts, map[string][]etcdschema.Flavor{"compute-1": {mTiny}})
	c.checkMoves("booted", true, m.procDir)

	// The openstack CLI: resize, revert; migrate, confirm.
	m.nova("server", "resize", "--flavor", "m1.small", "--wait", id)
	if v := m.server(id, "VERIFY_RESIZE", "compute-2"); v.Flavor.Name != "m1.small" {
		t.Errorf("flavor in VERIFY_RESIZE: %+v", v.Flavor)
	}
	resized := runsOnly("the resized guest on compute-2 only", id, "compute-2")
	if processAlive(booted) {
		t.Errorf("the source's guest %d still runs after the resize", booted)
	}
	m.usages("resize in VERIFY_RESIZE: both hosts held", hosts,
		map[string][]etcdschema.Flavor{"compute-1": {mTiny}, "compute-2": {mSmall}})
	migs := m.migrations(id)
	if len(migs) != 1 || migs[0] != "resize finished compute-1->compute-2" {
		t.Fatalf("migration list during the resize: %v", migs)
	}
	c.checkMoves("resize in VERIFY_RESIZE", false, m.procDir)
	m.nova("server", "resize", "revert", id)
	if v := m.server(id, "ACTIVE", "compute-1"); v.Flavor.Name != "m1.tiny" {
		t.Errorf("flavor after the revert: %+v", v.Flavor)
	}
	runsOnly("the reverted guest on compute-1 only", id, "compute-1")
	if processAlive(resized) {
		t.Errorf("the destination's guest %d still runs after the revert", resized)
	}
	m.usages("reverted", hosts, map[string][]etcdschema.Flavor{"compute-1": {mTiny}})
	c.checkMoves("reverted", true, m.procDir)

	m.nova("server", "migrate", "--wait", id)
	m.server(id, "VERIFY_RESIZE", "compute-2")
	runsOnly("the migrated guest on compute-2 only", id, "compute-2")
	m.usages("migration in VERIFY_RESIZE: both hosts held", hosts,
		map[string][]etcdschema.Flavor{"compute-1": {mTiny}, "compute-2": {mTiny}})
	mig := c.lastMigration(id)
	if a := m.allocation(mig.UUID); len(a) != 1 || a[agent.ProviderUUIDForHost("compute-1")]["MEMORY_MB"] != mTiny.RAMMB {
		t.Errorf("the migration's consumer holds %v, want m1.tiny on compute-1", a)
	}
	if a := m.allocation(id); len(a) != 1 || a[agent.ProviderUUIDForHost("compute-2")]["MEMORY_MB"] != mTiny.RAMMB {
		t.Errorf("the instance holds %v, want m1.tiny on compute-2", a)
	}
	c.checkMoves("migration in VERIFY_RESIZE", false, m.procDir)
	m.nova("server", "resize", "confirm", id)
	m.server(id, "ACTIVE", "compute-2")
	m.usages("migration confirmed", hosts, map[string][]etcdschema.Flavor{"compute-2": {mTiny}})
	if a := m.allocation(mig.UUID); len(a) != 0 {
		t.Errorf("the confirmed migration's consumer still holds %v", a)
	}
	c.checkMoves("migration confirmed", true, m.procDir)
	if migs := m.migrations(id); fmt.Sprint(migs) != "[resize reverted compute-1->compute-2 migration confirmed compute-1->compute-2]" {
		t.Errorf("migration list: %v", migs)
	}

	// berth's CLI: resize and confirm, migrate and revert.
	c.cliOK("server", "resize", "--flavor", "m1.small", id, "--wait")
	m.server(id, "VERIFY_RESIZE", "compute-1")
	m.usages("berth resize in VERIFY_RESIZE", hosts,
		map[string][]etcdschema.Flavor{"compute-1": {mSmall}, "compute-2": {mTiny}})
	c.checkMoves("berth resize in VERIFY_RESIZE", false, m.procDir)
	c.cliOK("server", "resize", "confirm", id, "--wait")
	m.server(id, "ACTIVE", "compute-1")
	runsOnly("the resized guest on compute-1 only", id, "compute-1")
	m.usages("berth resize confirmed", hosts, map[string][]etcdschema.Flavor{"compute-1": {mSmall}})
	c.checkMoves("berth resize confirmed", true, m.procDir)
	c.cliOK("server", "migrate", id, "--wait")
	m.server(id, "VERIFY_RESIZE", "compute-2")
	m.usages("berth migrate in VERIFY_RESIZE", hosts,
		map[string][]etcdschema.Flavor{"compute-1": {mSmall}, "compute-2": {mSmall}})
	c.cliOK("server", "resize", "revert", id, "--wait")
	m.server(id, "ACTIVE", "compute-1")
	runsOnly("the reverted guest on compute-1 only", id, "compute-1")
	m.usages("berth migrate reverted", hosts, map[string][]etcdschema.Flavor{"compute-1": {mSmall}})
	c.checkMoves("berth migrate reverted", true, m.procDir)
	if out := c.cliOK("migration", "list", "--server", id); strings.Count(out, "confirmed") != 2 || strings.Count(out, "reverted") != 2 {
		t.Errorf("berth migration list:\n%s", out)
	}

	// The source's agent killed while the destination finishes: the
	// source's guest is stopped and the destination's not started yet, so
	// the server (ACTIVE on the source, no cast there) runs nowhere. The
	// restarted source neither resumes it nor sets it ERROR, and the
	// destination, killed and restarted in turn, finishes the move.
	paused := restart("compute-2", false, "agent.before-move-"+etcdschema.MoveFinish)
	c.cliOK("server", "migrate", id)
	waitPaused(t, paused, "agent.before-move-"+etcdschema.MoveFinish)
	testwait.Poll(t, 30*time.Second, "no guest while the destination is paused", func() (bool, string) {
		pids := m.guestPIDs(id, hosts)
		return len(pids) == 0, fmt.Sprint(pids)
	})
	restart("compute-1", true, "")
	if v, err := c.api.GetServer(context.Background(), id); err != nil || v.Status != "ACTIVE" || v.Host != "compute-1" ||
		v.TaskState != etcdschema.TaskResizeMigrated {
		t.Fatalf("the moving server after its source's agent restarted: %+v, %v", v, err)
	}
	if pids := m.guestPIDs(id, hosts); len(pids) != 0 {
		t.Fatalf("the restarted source started the moving guest again: %v", pids)
	}
	restart("compute-2", true, "")
	m.server(id, "VERIFY_RESIZE", "compute-2")
	runsOnly("the migrated guest on compute-2 only", id, "compute-2")
	m.usages("migrated across agent restarts", hosts,
		map[string][]etcdschema.Flavor{"compute-1": {mSmall}, "compute-2": {mSmall}})
	c.checkMoves("migrated across agent restarts", false, m.procDir)
	c.cliOK("server", "resize", "confirm", id, "--wait")
	m.server(id, "ACTIVE", "compute-2")
	c.checkMoves("confirmed across agent restarts", true, m.procDir)

	// The source's agent killed at its own step (its guest still runs):
	// the restarted agent adopts the guest, then stops it for the move.
	running := runsOnly("the guest on compute-2", id, "compute-2")
	paused = restart("compute-2", false, "agent.before-move-"+etcdschema.MoveOut)
	c.cliOK("server", "migrate", id)
	waitPaused(t, paused, "agent.before-move-"+etcdschema.MoveOut)
	restart("compute-2", true, "")
	m.server(id, "VERIFY_RESIZE", "compute-1")
	runsOnly("the migrated guest on compute-1 only", id, "compute-1")
	if processAlive(running) {
		t.Errorf("the source's guest %d still runs after the move", running)
	}
	c.checkMoves("migrated across a killed source", false, m.procDir)
	c.cliOK("server", "resize", "revert", id, "--wait")
	m.server(id, "ACTIVE", "compute-2")
	runsOnly("the reverted guest on compute-2 only", id, "compute-2")
	c.checkMoves("reverted after a killed source", true, m.procDir)

	m.nova("server", "delete", "--wait", id)
	testwait.Poll(t, 30*time.Second, "no guest after the delete", func() (bool, string) {
		pids := m.guestPIDs(id, hosts)
		return len(pids) == 0, fmt.Sprint(pids)
	})
	c.checkMoves("deleted", true, m.procDir)
	if left := leftovers(t, c.cli, c.keys); len(left) > 0 {
		t.Fatalf("left behind after the delete: %v", left)
	}
}

// waitLogged waits until p's output has a line containing s.
func waitLogged(t *testing.T, p *proc, s string) {
	t.Helper()
	testwait.Poll(t, 30*time.Second, p.name+" logs "+s, func() (bool, string) {
		b, err := os.ReadFile(p.log)
		return err == nil && strings.Contains(string(b), s), fmt.Sprint(err)
	})
}

// lastMigration reads id's newest migration from etcd.
func (c *cluster) lastMigration(id string) etcdschema.Migration {
	c.t.Helper()
	var last etcdschema.Migration
	var lastRev int64
	resp, err := c.cli.Get(context.Background(), c.keys.CellsPrefix(), clientv3.WithPrefix())
	if err != nil {
		c.t.Fatal(err)
	}
	for _, kv := range resp.Kvs {
		if !strings.Contains(string(kv.Key), "/migrations/") {
			continue
		}
		var mg etcdschema.Migration
		if err := etcdschema.Decode(string(kv.Key), kv.Value, &mg); err != nil {
			c.t.Fatal(err)
		}
		if mg.InstanceUUID == id && kv.CreateRevision > lastRev {
			last, lastRev = mg, kv.CreateRevision
		}
	}
	return last
}

// TestColdMoveFailures fails cold moves on purpose with real processes:
// fake drivers that fail every build and move prep on chosen hosts
// (compute-2 and compute-4, the first with the most room so the
// scheduler prefers it), and the cell conductor killed (SIGKILL) while it
// holds a resize's retry with an alternate claimed. Another conductor
// takes the retry over and finishes the resize on the alternate; a
// cold migration whose every destination fails ends in error with every
// host's reason, the server ACTIVE on its source. After each: Placement
// exactly as the servers and moves account for, no consumer left by a
// move, every migration final.
func TestColdMoveFailures(t *testing.T) {
	c := newCluster(t)
	m := &moveCloud{cluster: c}
	point := "cellconductor.before-move-commit"
	env, paused := pauseEnv(t, point)
	first := c.startConductor("conductor-1", "cell1", env)
	c.startServer("server", allRoles, nil)
	c.startAgents(agentSpec{host: "compute-1", memoryMB: 16384},
		agentSpec{host: "compute-2", memoryMB: 32768, fail: true},
		agentSpec{host: "compute-3", memoryMB: 24576},
		agentSpec{host: "compute-4", memoryMB: 20480, fail: true})
	create := func(name string) string {
		t.Helper()
		c.cliOK("server", "create", "--flavor", "m1.tiny", "--name", name, "--host", "compute-1", "--wait", "--timeout", "60s")
		servers, err := c.api.ListServers(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range servers {
			if s.Name == name {
				return s.ID
			}
		}
		t.Fatalf("no server %s", name)
		return ""
	}
	held := func(consumer string) map[string]int64 {
		t.Helper()
		out := map[string]int64{}
		if con := c.consumer(consumer); con != nil {
			for prov, a := range con.Allocations {
				out[prov] = a.Resources["MEMORY_MB"]
			}
		}
		return out
	}
	rp := agent.ProviderUUIDForHost

	// compute-2 fails the resize's prep; the conductor claims compute-3
	// for the retry and is killed before it casts the prep there.
	id := create("retried")
	c.cliOK("server", "resize", "--flavor", "m1.small", id)
	if got := waitPaused(t, paused, point); got != id {
		t.Fatalf("conductor paused on %s, want %s", got, id)
	}
	if h := held(id); len(h) != 1 || h[rp("compute-3")] != int64(mSmall.RAMMB) {
		t.Fatalf("the paused conductor's claim: %v, want m1.small on compute-3", h)
	}
	mig := c.lastMigration(id)
	if h := held(mig.UUID); len(h) != 1 || h[rp("compute-1")] != int64(mTiny.RAMMB) {
		t.Fatalf("the migration holds %v, want m1.tiny on compute-1", h)
	}
	first.kill(t)
	c.startConductor("conductor-2", "cell1", nil)
	m.server(id, "VERIFY_RESIZE", "compute-3")
	mig = c.lastMigration(id)
	if len(mig.Attempts) != 2 || mig.Attempts[0].Host != "compute-2" || !strings.Contains(mig.Attempts[0].Reason, "configured to fail") ||
		mig.Attempts[1].Host != "compute-3" || mig.Attempts[1].Reason != "" {
		t.Errorf("attempts %+v, want compute-2 failed, then compute-3", mig.Attempts)
	}
	if h := held(id); len(h) != 1 || h[rp("compute-3")] != int64(mSmall.RAMMB) {
		t.Errorf("the instance holds %v after the takeover, want m1.small on compute-3 once", h)
	}
	c.checkMoves("resize retried by another conductor", false, "")
	t.Logf("the retried resize's attempts: %+v", mig.Attempts)
	c.cliOK("server", "resize", "confirm", id, "--wait")
	m.server(id, "ACTIVE", "compute-3")
	c.checkMoves("retried resize confirmed", true, "")

	// Every destination fails: compute-3 is disabled, compute-2 and
	// compute-4 fail the prep.
	c.cliOK("service", "disable", "compute-3", "--reason", "keep the migration off")
	id2 := create("stays")
	c.cliOK("server", "migrate", id2)
	testwait.Poll(t, 60*time.Second, "the migration in error", func() (bool, string) {
		mig = c.lastMigration(id2)
		return mig.Status == etcdschema.MigrationError, mig.Status
	})
	for _, h := range []string{"compute-2", "compute-4"} {
		if !strings.Contains(mig.Error, h+": fake driver on "+h+" failed the move") {
			t.Errorf("the migration's error does not give %s's reason: %s", h, mig.Error)
		}
	}
	v := m.server(id2, "ACTIVE", "compute-1")
	if v.Flavor.Name != "m1.tiny" {
		t.Errorf("the server after its failed migration: %+v", v)
	}
	if h := held(id2); len(h) != 1 || h[rp("compute-1")] != int64(mTiny.RAMMB) {
		t.Errorf("the server holds %v after its failed migration, want m1.tiny on compute-1", h)
	}
	if out := c.cliOK("migration", "list", "--server", id2); !strings.Contains(out, "error") {
		t.Errorf("berth migration list:\n%s", out)
	}
	c.checkMoves("migration failed on every host", true, "")
	t.Logf("the failed migration's error: %s", mig.Error)

	c.cliOK("server", "delete", "--wait", "--timeout", "60s", id, id2)
	c.checkMoves("deleted", true, "")
	if left := leftovers(t, c.cli, c.keys); len(left) > 0 {
		t.Fatalf("left behind after the deletes: %v", left)
	}
}
