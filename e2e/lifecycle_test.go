package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/agent"
	"github.com/berth-project/berth/api"
	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/embedetcd"
	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/internal/testhook"
	"github.com/berth-project/berth/placement"
)

// cluster is one etcd with berth processes started against it, each with
// its own config file, on loopback ports.
type cluster struct {
	t         *testing.T
	etcd      *embedetcd.Server
	cli       *clientv3.Client
	keys      etcdschema.Keys
	dir       string
	apiAddr   string
	placeAddr string
	apiURL    string
	api       *api.Client
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("e2e: starts real processes")
	}
	etcd := etcdtest.Start(t)
	c := &cluster{t: t, etcd: etcd, cli: etcd.Client(), keys: etcdschema.New("/berth"), dir: t.TempDir(),
		apiAddr:   fmt.Sprintf("127.0.0.1:%d", etcdtest.FreePort(t)),
		placeAddr: fmt.Sprintf("127.0.0.1:%d", etcdtest.FreePort(t))}
	c.apiURL = "http://" + c.apiAddr
	c.api = api.NewClient(c.apiURL)
	return c
}

// serverBlocks are the role blocks of a berth server process.
const (
	frontRoles = "api\nplacement\n"            // the API and the Placement API
	schedRoles = "scheduler\nsuperconductor\n" // scheduling and hand-off
	allRoles   = "api\nplacement\nscheduler\nsuperconductor\n"
)

// startServer starts `berth server` with the given roles (see frontRoles).
func (c *cluster) startServer(name, roles string, env []string) *proc {
	c.t.Helper()
	var b strings.Builder
	b.WriteString(etcdBlock(c.etcd.ClientURL()))
	for _, r := range strings.Fields(roles) {
		switch r {
		case "api":
			fmt.Fprintf(&b, "api { bind = %q }\n", c.apiAddr)
		case "placement":
			fmt.Fprintf(&b, "placement { bind = %q }\n", c.placeAddr)
		case "scheduler":
			fmt.Fprintf(&b, "scheduler {\n  bind = \"127.0.0.1:%d\"\n  max_attempts = 3\n}\n", etcdtest.FreePort(c.t))
		case "superconductor":
			b.WriteString("superconductor {}\n")
		}
	}
	p := startProcEnv(c.t, name, env, "server", "-config", writeFile(c.t, c.dir, name+".hcl", b.String()))
	if strings.Contains(roles, "api") {
		waitHTTP(c.t, c.apiURL+"/healthz")
	}
	return p
}

func (c *cluster) startConductor(name, cell string, env []string) *proc {
	c.t.Helper()
	cfg := writeFile(c.t, c.dir, name+".hcl", etcdBlock(c.etcd.ClientURL())+fmt.Sprintf(`
conductor {
  cell = %q
  lease_ttl = "2s"
}
`, cell))
	p := startProcEnv(c.t, name, env, "conductor", "-config", cfg)
	eventually(c.t, 30*time.Second, "cell "+cell+" recorded", func() (bool, string) {
		resp, err := c.cli.Get(context.Background(), c.keys.Cell(cell))
		return err == nil && len(resp.Kvs) == 1, fmt.Sprint(err)
	})
	return p
}

// agentSpec is one simulated host: fake driver, given RAM, failing or not.
type agentSpec struct {
	host     string
	memoryMB int
	fail     bool
	// processDir, when set, runs the process driver ("sleep 300" per
	// instance) with its state records there, instead of the fake driver.
	processDir string
}

// agentConfig writes the host's config: 1 s reports and a 3 s
// service_down_time, so a killed agent reads down within seconds.
func (c *cluster) agentConfig(a agentSpec) string {
	driver := "driver = \"fake\""
	if a.processDir != "" {
		driver = fmt.Sprintf("driver = \"process\"\n  process {\n    command = \"sleep 300\"\n    state_dir = %q\n    stop_grace = \"2s\"\n  }", a.processDir)
	}
	return writeFile(c.t, c.dir, a.host+".hcl", etcdBlock(c.etcd.ClientURL())+fmt.Sprintf(`
agent {
  host = %q
  cell = "cell1"
  %s
  report_interval = "1s"
  service_down_time = "3s"
  inventory {
    vcpus = 8
    memory_mb = %d
    disk_gb = 200
    reserved_host_memory_mb = 0
  }
  fake {
    fail = %v
    fail_reschedulable = true
  }
}
`, a.host, driver, a.memoryMB, a.fail))
}

func (c *cluster) startAgents(specs ...agentSpec) map[string]*proc {
	c.t.Helper()
	out := map[string]*proc{}
	for _, a := range specs {
		out[a.host] = startProc(c.t, "agent-"+a.host, "agent", "-config", c.agentConfig(a))
	}
	for _, a := range specs {
		c.waitState(a.host, "up")
	}
	return out
}

func (c *cluster) service(host string) api.ServiceView {
	c.t.Helper()
	svcs, err := c.api.ListServices(context.Background())
	if err != nil {
		c.t.Fatalf("service list: %v", err)
	}
	for _, s := range svcs {
		if s.Host == host {
			return s
		}
	}
	return api.ServiceView{}
}

func (c *cluster) waitState(host, state string) {
	c.t.Helper()
	eventually(c.t, 30*time.Second, host+" "+state, func() (bool, string) {
		s := c.service(host)
		return s.State == state, fmt.Sprintf("%+v", s)
	})
}

// traits reads a host's provider traits through the Placement API.
func (c *cluster) traits(host string) []string {
	c.t.Helper()
	req, _ := http.NewRequest(http.MethodGet,
		fmt.Sprintf("http://%s/resource_providers/%s/traits", c.placeAddr, agent.ProviderUUIDForHost(host)), nil)
	req.Header.Set("X-Auth-Token", "admin")
	req.Header.Set("OpenStack-API-Version", "placement 1.6")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("placement traits of %s: %v", host, err)
	}
	defer resp.Body.Close()
	var out struct {
		Traits []string `json:"traits"`
	}
	if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&out) != nil {
		c.t.Fatalf("placement traits of %s: %s", host, resp.Status)
	}
	return out.Traits
}

// provider reads a host's provider record straight from etcd.
func (c *cluster) provider(host string) etcdschema.Provider {
	c.t.Helper()
	key := c.keys.Provider(agent.ProviderUUIDForHost(host))
	resp, err := c.cli.Get(context.Background(), key)
	if err != nil || len(resp.Kvs) != 1 {
		c.t.Fatalf("read %s: %v", key, err)
	}
	var p etcdschema.Provider
	if err := etcdschema.Decode(key, resp.Kvs[0].Value, &p); err != nil {
		c.t.Fatal(err)
	}
	return p
}

func (c *cluster) disabledTrait(host string) bool {
	return slices.Contains(c.traits(host), placement.TraitComputeStatusDisabled)
}

// cliOK runs the berth CLI and fails the test on a non-zero exit.
func (c *cluster) cliOK(args ...string) string {
	c.t.Helper()
	out, err := cli(c.t, c.apiURL, args...)
	if err != nil {
		c.t.Fatalf("berth %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// create asks for one server and returns its id.
func (c *cluster) create(name string) string {
	c.t.Helper()
	resp, err := c.api.CreateServers(context.Background(), api.CreateRequest{Name: name, Flavor: "m1.small", Count: 1})
	if err != nil {
		c.t.Fatalf("create %s: %v", name, err)
	}
	return resp.Servers[0].ID
}

// settle waits until the server is ACTIVE or ERROR.
func (c *cluster) settle(id string) *api.ServerView {
	c.t.Helper()
	var v *api.ServerView
	eventually(c.t, 60*time.Second, "server "+id+" ACTIVE or ERROR", func() (bool, string) {
		var err error
		v, err = c.api.GetServer(context.Background(), id)
		if err != nil {
			return false, err.Error()
		}
		return v.Status == "ACTIVE" || v.Status == "ERROR", fmt.Sprintf("%+v", v)
	})
	return v
}

// consumer reads a consumer's allocations; nil when it has none.
func (c *cluster) consumer(id string) *etcdschema.Consumer {
	c.t.Helper()
	resp, err := c.cli.Get(context.Background(), c.keys.Consumer(id))
	if err != nil {
		c.t.Fatal(err)
	}
	if len(resp.Kvs) == 0 {
		return nil
	}
	var con etcdschema.Consumer
	if err := etcdschema.Decode(string(resp.Kvs[0].Key), resp.Kvs[0].Value, &con); err != nil {
		c.t.Fatal(err)
	}
	return &con
}

// totalUsage sums a resource class's usage over every provider.
func (c *cluster) totalUsage(rc string) int64 {
	c.t.Helper()
	resp, err := c.cli.Get(context.Background(), c.keys.Providers(), clientv3.WithPrefix())
	if err != nil {
		c.t.Fatal(err)
	}
	var sum int64
	for _, kv := range resp.Kvs {
		var p etcdschema.Provider
		if err := etcdschema.Decode(string(kv.Key), kv.Value, &p); err != nil {
			c.t.Fatal(err)
		}
		sum += p.Usages[rc]
	}
	return sum
}

// instancesIn counts instance records for id across every cell.
func (c *cluster) instanceRecords(id string) int {
	c.t.Helper()
	resp, err := c.cli.Get(context.Background(), c.keys.CellsPrefix(), clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		c.t.Fatal(err)
	}
	n := 0
	for _, kv := range resp.Kvs {
		if strings.HasSuffix(string(kv.Key), "/instances/"+id) {
			n++
		}
	}
	return n
}

// waitPaused waits until a process stopped at a testhook point.
func waitPaused(t *testing.T, file, point string) string {
	t.Helper()
	var id string
	eventually(t, 30*time.Second, "a process paused at "+point, func() (bool, string) {
		b, err := os.ReadFile(file)
		if err != nil {
			return false, err.Error()
		}
		f := strings.Fields(string(b))
		if len(f) >= 2 && f[0] == point {
			id = f[1]
			return true, ""
		}
		return false, string(b)
	})
	return id
}

func pauseEnv(t *testing.T, point string) ([]string, string) {
	file := filepath.Join(t.TempDir(), "paused")
	return []string{testhook.EnvPoint + "=" + point, testhook.EnvFile + "=" + file}, file
}

// kill ends a process with SIGKILL: no shutdown, no lease revoked.
func (p *proc) kill(t *testing.T) {
	t.Helper()
	_ = p.cmd.Process.Kill()
	err := <-p.done
	p.done <- err
}

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
	c.startAgents(agentSpec{host: "compute-1", memoryMB: 16384, fail: true}, agentSpec{host: "compute-2", memoryMB: 16384, fail: true},
		agentSpec{host: "compute-3", memoryMB: 8192}, agentSpec{host: "compute-4", memoryMB: 16384, fail: true})

	out := c.cliOK("service", "disable", "compute-4", "--reason", "spare")
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
	sel := c.cliOK("selection", "show", a)
	if !strings.Contains(sel, "3 attempt(s) made") {
		t.Fatalf("selection show:\n%s", sel)
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
	sel = c.cliOK("selection", "show", b)
	if strings.Contains(sel, "compute-3") || strings.Count(sel, "failed the build") != 3 || !strings.Contains(sel, "none left") {
		t.Fatalf("selection of b: want 3 failed attempts, none on the disabled compute-3, no alternate left:\n%s", sel)
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

	pid := recordedPID(t, procDir, onOne)
	if !processAlive(pid) {
		t.Fatalf("instance process %d died with its agent", pid)
	}
	startProc(t, "agent-compute-1-again", "agent", "-config", c.agentConfig(one))
	c.waitState("compute-1", "up")
	eventually(t, 30*time.Second, "the returning agent sets the trait", func() (bool, string) {
		tr := c.traits("compute-1")
		return slices.Contains(tr, placement.TraitComputeStatusDisabled), fmt.Sprint(tr)
	})
	if v, err := c.api.GetServer(context.Background(), onOne); err != nil || v.Status != "ACTIVE" || v.Host != "compute-1" {
		t.Fatalf("instance on compute-1 after the agent's restart: %+v, %v", v, err)
	}
	// Reconciled: the restarted agent adopted the process rather than
	// killing it as an orphan or starting a second one.
	if got := recordedPID(t, procDir, onOne); got != pid || !processAlive(pid) {
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

// recordedPID reads the process driver's record of an instance.
func recordedPID(t *testing.T, dir, id string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, id+".json"))
	if err != nil {
		t.Fatalf("process record of %s: %v", id, err)
	}
	var rec struct {
		PID int `json:"pid"`
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	return rec.PID
}

// processAlive says whether pid runs (a zombie awaiting its reaper does not).
func processAlive(pid int) bool {
	if pid <= 0 || syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || !strings.HasPrefix(strings.TrimSpace(s[i+1:]), "Z")
}

// killRecorded kills every process group a process driver recorded in dir,
// so a failed test leaves no sleeping process behind.
func killRecorded(dir string) {
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	for _, f := range files {
		b, _ := os.ReadFile(f)
		var rec struct {
			PID int `json:"pid"`
		}
		if json.Unmarshal(b, &rec) == nil && rec.PID > 0 {
			_ = syscall.Kill(-rec.PID, syscall.SIGKILL)
		}
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
