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
	"github.com/berth-project/berth/internal/testwait"
	"github.com/berth-project/berth/placement"
)

// cluster is one etcd with berth processes started against it, each with
// its own config file, on loopback ports.
type cluster struct {
	t         *testing.T
	etcd      *embedetcd.Server
	etcdURL   string // the processes' etcd endpoint: etcd's, or a member's of a cluster of processes
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
	c := &cluster{t: t, etcd: etcd, etcdURL: etcd.ClientURL(), cli: etcd.Client(), keys: etcdschema.New("/berth"), dir: t.TempDir(),
		apiAddr:   freeAddr(t),
		placeAddr: freeAddr(t)}
	c.apiURL = "http://" + c.apiAddr
	c.api = api.NewClient(c.apiURL)
	return c
}

// apiBlock is the compute API's block at addr. Its projects have no
// quota: these tests drive scheduling with bursts larger than Nova's
// default quota (10 instances, 20 cores); quotas have tests of their own
// (compute, quotas, internal/stack).
func apiBlock(addr string) string {
	return fmt.Sprintf("api {\n  bind = %q\n  quota {\n    instances = -1\n    cores = -1\n    ram = -1\n  }\n}\n", addr)
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
	b.WriteString(etcdBlock(c.etcdURL))
	for _, r := range strings.Fields(roles) {
		switch r {
		case "api":
			b.WriteString(apiBlock(c.apiAddr))
		case "placement":
			fmt.Fprintf(&b, "placement { bind = %q }\n", c.placeAddr)
		case "scheduler":
			fmt.Fprintf(&b, "scheduler {\n  bind = \"127.0.0.1:%d\"\n  max_attempts = 3\n}\n", etcdtest.FreePort(c.t))
		case "superconductor":
			// A short lease: a killed superconductor's work moves on in 2 s.
			b.WriteString("superconductor {\n  lease_ttl = \"2s\"\n}\n")
		}
	}
	p := startProcEnv(c.t, name, env, "run", "server", "-config", writeFile(c.t, c.dir, name+".hcl", b.String()))
	if strings.Contains(roles, "api") {
		waitHTTP(c.t, c.apiURL+"/healthz")
	}
	return p
}

func (c *cluster) startConductor(name, cell string, env []string) *proc {
	c.t.Helper()
	cfg := writeFile(c.t, c.dir, name+".hcl", etcdBlock(c.etcdURL)+fmt.Sprintf(`
conductor {
  cell = %q
  lease_ttl = "2s"
}
`, cell))
	p := startProcEnv(c.t, name, env, "run", "conductor", "-config", cfg)
	testwait.Poll(c.t, 30*time.Second, "cell "+cell+" recorded", func() (bool, string) {
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
	cell     string // "" is cell1
	// buildTime is the fake driver's build_time ("" for none).
	buildTime string
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
	if a.cell == "" {
		a.cell = "cell1"
	}
	buildTime := ""
	if a.buildTime != "" {
		buildTime = fmt.Sprintf("build_time = %q", a.buildTime)
	}
	return writeFile(c.t, c.dir, a.host+".hcl", etcdBlock(c.etcdURL)+fmt.Sprintf(`
agent {
  host = %q
  cell = %q
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
    %s
  }
}
`, a.host, a.cell, driver, a.memoryMB, a.fail, buildTime))
}

func (c *cluster) startAgents(specs ...agentSpec) map[string]*proc {
	c.t.Helper()
	out := map[string]*proc{}
	for _, a := range specs {
		out[a.host] = startProc(c.t, "agent-"+a.host, "run", "agent", "-config", c.agentConfig(a))
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
	testwait.Poll(c.t, 30*time.Second, host+" "+state, func() (bool, string) {
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
	testwait.Poll(c.t, 60*time.Second, "server "+id+" ACTIVE or ERROR", func() (bool, string) {
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
	return readConsumer(c.t, c.cli, c.keys, id)
}

// readConsumer reads a consumer's allocations from etcd; nil when it has none.
func readConsumer(t testing.TB, cli *clientv3.Client, keys etcdschema.Keys, id string) *etcdschema.Consumer {
	t.Helper()
	resp, err := cli.Get(context.Background(), keys.Consumer(id))
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) == 0 {
		return nil
	}
	var con etcdschema.Consumer
	if err := etcdschema.Decode(string(resp.Kvs[0].Key), resp.Kvs[0].Value, &con); err != nil {
		t.Fatal(err)
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
	testwait.Poll(t, 30*time.Second, "a process paused at "+point, func() (bool, string) {
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

// recordedPID reads the process driver's record of an instance on host
// (the driver keeps each host's records in <state_dir>/<host>).
func recordedPID(t *testing.T, dir, host, id string) int {
	t.Helper()
	pid, err := readRecordedPID(dir, host, id)
	if err != nil {
		t.Fatalf("process record of %s on %s: %v", id, host, err)
	}
	return pid
}

func readRecordedPID(dir, host, id string) (int, error) {
	b, err := os.ReadFile(filepath.Join(dir, host, id+".json"))
	if err != nil {
		return 0, err
	}
	var rec struct {
		PID int `json:"pid"`
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		return 0, err
	}
	return rec.PID, nil
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

// killRecorded kills every process group a process driver recorded in dir
// (any host's), so a failed test leaves no sleeping process behind.
func killRecorded(dir string) {
	files, _ := filepath.Glob(filepath.Join(dir, "*", "*.json"))
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
