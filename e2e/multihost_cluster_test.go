package e2e

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/api"
	"github.com/berth-project/berth/configs"
	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/etcdauth"
	"github.com/berth-project/berth/internal/testwait"
	"github.com/berth-project/berth/internal/tlsgen"
)

// mhCluster is a Berth deployment over several hosts of a hostNet: three
// etcd members (`berth etcd`), servers, cell conductors and agents, each
// with the config an operator's deployment renders for its host.
type mhCluster struct {
	t    *testing.T
	net  *hostNet
	dir  string
	keys etcdschema.Keys
	// vars are the short timings every config is rendered with.
	vars map[string]string

	hosts      map[string]*netHost
	etcdNames  []string             // etcd-1..3, on ctl-1..3
	etcd       map[string]*hostProc // by member name
	servers    map[string]*hostProc // server-1, server-2 on ctl-1, ctl-2
	conductors map[string]*hostProc
	agents     map[string]*hostProc
	agentCell  map[string]string

	cli *clientv3.Client // every member's endpoint, as Berth's roles have

	// The deployment's TLS, as an operator sets it up: a lab CA (berth
	// tls ca) in tlsDir, every process's certificate named as its config
	// (berth tls cert), and the harness's own, "root": it reads and
	// writes etcd as the operator, whose etcd user is root once etcd's
	// auth is on (etcdauth, as berth etcd-auth applies it).
	tlsDir string
	ca     *tlsgen.CA
	https  *http.Client // verifies the servers with the lab CA
	auth   etcdauth.Machines

	mu        sync.Mutex
	requested map[string]string // server id -> the burst that asked for it
	// adminToken is the rendered identity admin's token, for /v1 (the
	// servers' APIs check tokens, auth = "keystone"); see apiClient.
	adminToken string
}

// The deployment templates' tunables (`berth config render -var`), set
// for tests: the fake driver with 200 ms builds on hosts of fixed size,
// and short timings (hosts read down 3 s after their last report, the
// scheduler leader's lease is 2 s and it sweeps down hosts every second).
var mhVars = map[string]string{
	"log_level":                "debug",
	"report_interval":          "1s",
	"service_down_time":        "3s",
	"election_ttl":             "2s",
	"leader_interval":          "1s",
	"down_host_grace":          "1s",
	"superconductor_lease_ttl": "2s",
	"conductor_lease_ttl":      "2s",
	"driver":                   "fake",
	"build_time":               "200ms",
	"disk_gb":                  "2000",
	"vcpus":                    "32",
	"memory_mb":                "65536",
}

// newMHCluster deploys scenario 1's layout: hosts ctl-1..3 run an etcd
// member each, ctl-1 and ctl-2 a server and a cell conductor (cell1,
// cell2); compute-1..6 run an agent, three per cell.
func newMHCluster(t *testing.T) *mhCluster {
	t.Helper()
	return newMHClusterVars(t, mhVars)
}

// newMHClusterVars is newMHCluster with the templates' variables vars
// (mhVars with a change: the process driver, say).
func newMHClusterVars(t *testing.T, vars map[string]string) *mhCluster {
	t.Helper()
	if testing.Short() {
		t.Skip("e2e: starts real processes")
	}
	c := &mhCluster{t: t, net: newHostNet(t), dir: t.TempDir(), keys: etcdschema.New("/berth"),
		vars: vars, hosts: map[string]*netHost{}, etcd: map[string]*hostProc{},
		servers: map[string]*hostProc{}, conductors: map[string]*hostProc{},
		agents: map[string]*hostProc{}, agentCell: map[string]string{}, requested: map[string]string{}}
	if c.net.netns {
		t.Logf("hosts are network namespaces on bridge %s, subnet %s.0/24", c.net.bridge, c.net.subnet)
	} else {
		t.Logf("no network namespaces (%s): hosts are 127.0.0.x addresses", c.net.why)
	}
	for i := 1; i <= 3; i++ {
		c.addHost(fmt.Sprintf("ctl-%d", i))
		c.etcdNames = append(c.etcdNames, fmt.Sprintf("etcd-%d", i))
	}
	for i := 1; i <= 6; i++ {
		c.addHost(fmt.Sprintf("compute-%d", i))
	}
	c.makeCA()

	start := time.Now()
	for i, name := range c.etcdNames {
		c.startEtcd(name, c.hosts[fmt.Sprintf("ctl-%d", i+1)])
	}
	c.cli = c.client(c.endpoints()...)
	c.waitMembersAgree(60 * time.Second)
	t.Logf("etcd cluster of 3 up in %s", time.Since(start).Round(time.Millisecond))
	c.enableEtcdAuth()

	c.startConductor("conductor-1", c.hosts["ctl-1"], "cell1", nil)
	c.startConductor("conductor-2", c.hosts["ctl-2"], "cell2", nil)
	c.startServer("server-1", c.hosts["ctl-1"])
	c.startServer("server-2", c.hosts["ctl-2"])
	for i := 1; i <= 6; i++ {
		cell := "cell1"
		if i > 3 {
			cell = "cell2"
		}
		c.startAgent(fmt.Sprintf("compute-%d", i), cell, nil)
	}
	for i := 1; i <= 6; i++ {
		c.waitState(fmt.Sprintf("compute-%d", i), "up", 30*time.Second)
	}
	t.Logf("cluster of %d hosts up in %s", len(c.hosts), time.Since(start).Round(time.Millisecond))
	return c
}

func (c *mhCluster) addHost(name string) *netHost {
	h := c.net.addHost(name)
	c.hosts[name] = h
	return h
}

// endpoints are every etcd member's client URL.
func (c *mhCluster) endpoints() []string {
	var out []string
	for i := range c.etcdNames {
		out = append(out, c.etcdURL(i))
	}
	return out
}

// etcdMembers is the -etcd argument of `berth config render`.
func (c *mhCluster) etcdMembers() []configs.EtcdMember {
	var out []configs.EtcdMember
	for i, n := range c.etcdNames {
		out = append(out, configs.EtcdMember{Name: n, Address: c.hosts[fmt.Sprintf("ctl-%d", i+1)].addr})
	}
	return out
}

func (c *mhCluster) client(endpoints ...string) *clientv3.Client {
	c.t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, TLS: c.rootTLS()})
	if err != nil {
		c.t.Fatalf("etcd client for %v: %v", endpoints, err)
	}
	c.net.root.Cleanup(func() { cli.Close() })
	return cli
}

// e2eAdminPasswordHash is the rendered servers' identity admin's
// password hash: "e2e-admin-pw" at bcrypt's minimum cost.
const e2eAdminPasswordHash = "$2a$04$pJlz2lVF/q.hk/.i2uzmWOn4dYl7.lV9r0utCXdfn1M.HpInRtYxa"

// config renders a host's config for role from the deployment templates
// and writes it to the test's directory.
func (c *mhCluster) config(role, name string, h *netHost, cell string, extra map[string]string) string {
	c.t.Helper()
	vars := map[string]string{}
	for k, v := range c.vars {
		vars[k] = v
	}
	for k, v := range extra {
		vars[k] = v
	}
	c.cert(name, h)
	dv := configs.DeployVars{Name: name, Address: h.addr, Etcd: c.etcdMembers(), Cell: cell,
		DataDir: filepath.Join(c.dir, name), Vars: vars, AdminPasswordHash: e2eAdminPasswordHash, TLSDir: c.tlsDir}
	out, err := configs.RenderDeploy(role, dv)
	if err != nil {
		c.t.Fatalf("render %s config for %s on %s: %v", role, name, h.name, err)
	}
	return writeFile(c.t, c.dir, name+".hcl", string(out))
}

func (c *mhCluster) startEtcd(name string, h *netHost) *hostProc {
	c.t.Helper()
	p := c.net.start(h, name, nil, "run", "etcd", "-config", c.config("etcd", name, h, "", nil))
	c.etcd[name] = p
	return p
}

func (c *mhCluster) startServer(name string, h *netHost) *hostProc {
	c.t.Helper()
	p := c.net.start(h, name, nil, "run", "server", "-config", c.config("server", name, h, "", nil))
	c.servers[name] = p
	c.waitAPI(h)
	return p
}

func (c *mhCluster) startConductor(name string, h *netHost, cell string, env []string) *hostProc {
	c.t.Helper()
	c.authorize(name, cell, false)
	p := c.net.start(h, name, env, "run", "conductor", "-config", c.config("conductor", name, h, cell, nil))
	c.conductors[name] = p
	testwait.Poll(c.t, 30*time.Second, "cell "+cell+" recorded", func() (bool, string) {
		resp, err := c.cli.Get(context.Background(), c.keys.Cell(cell))
		return err == nil && len(resp.Kvs) == 1, fmt.Sprint(err)
	})
	return p
}

// startAgent starts the agent of host name (a host of the cluster) in
// cell; extra overrides template variables (build_time, fail...).
func (c *mhCluster) startAgent(name, cell string, extra map[string]string) *hostProc {
	c.t.Helper()
	h := c.hosts[name]
	c.authorize(name, cell, true)
	p := c.net.start(h, "agent-"+name, nil, "run", "agent", "-config", c.config("agent", name, h, cell, extra))
	c.agents[name] = p
	c.agentCell[name] = cell
	return p
}

// apis are the API clients of the servers running now.
func (c *mhCluster) apis() []*api.Client {
	var names []string
	for n, p := range c.servers {
		if p.running() {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	var out []*api.Client
	for _, n := range names {
		out = append(out, c.apiClient(c.servers[n].host))
	}
	return out
}

// e2eAdminPassword is the password e2eAdminPasswordHash is of.
const e2eAdminPassword = "e2e-admin-pw"

// api is one running server's API.
func (c *mhCluster) api() *api.Client {
	c.t.Helper()
	a := c.apis()
	if len(a) == 0 {
		c.t.Fatal("no server running")
	}
	return a[0]
}

func (c *mhCluster) service(host string) (api.ServiceView, error) {
	svcs, err := c.api().ListServices(context.Background())
	if err != nil {
		return api.ServiceView{}, err
	}
	for _, s := range svcs {
		if s.Host == host {
			return s, nil
		}
	}
	return api.ServiceView{}, fmt.Errorf("no service %s", host)
}

func (c *mhCluster) waitState(host, state string, timeout time.Duration) {
	c.t.Helper()
	testwait.Poll(c.t, timeout, host+" "+state, func() (bool, string) {
		s, err := c.service(host)
		return err == nil && s.State == state, fmt.Sprintf("%+v %v", s, err)
	})
}

// burst asks for n servers, one request each, spread over clients in
// turn, eight at a time. It returns the ids accepted and the errors of the
// requests refused (a server killed mid-burst refuses its share).
func (c *mhCluster) burst(name string, n int, clients func(i int) *api.Client) ([]string, []error) {
	return c.burstEach(name, n, 8, func(i int) ([]string, []error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		resp, err := clients(i).CreateServers(ctx, api.CreateRequest{
			Name: fmt.Sprintf("%s-%d", name, i), Flavor: "m1.tiny", Count: 1})
		if err != nil {
			return nil, []error{err}
		}
		return serverIDs(resp), nil
	})
}

// burstEach runs one(i) for every i below n, parallel at a time, records
// every id it returns as requested under name, and returns all the ids and
// errors.
func (c *mhCluster) burstEach(name string, n, parallel int, one func(i int) ([]string, []error)) ([]string, []error) {
	var (
		mu   sync.Mutex
		ids  []string
		errs []error
		wg   sync.WaitGroup
		sem  = make(chan struct{}, parallel)
	)
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			got, failed := one(i)
			mu.Lock()
			ids, errs = append(ids, got...), append(errs, failed...)
			mu.Unlock()
		}(i)
	}
	wg.Wait()
	c.mu.Lock()
	for _, id := range ids {
		c.requested[id] = name
	}
	c.mu.Unlock()
	return ids, errs
}

func serverIDs(resp *api.CreateResponse) []string {
	var ids []string
	for _, s := range resp.Servers {
		ids = append(ids, s.ID)
	}
	return ids
}

// alternate sends request i to server (i mod the running servers).
func (c *mhCluster) alternate() func(int) *api.Client {
	clients := c.apis()
	return func(i int) *api.Client { return clients[i%len(clients)] }
}

// settleAll waits until every server asked for so far is ACTIVE or ERROR.
func (c *mhCluster) settleAll(timeout time.Duration) map[string]api.ServerView {
	c.t.Helper()
	var byID map[string]api.ServerView
	testwait.Poll(c.t, timeout, "every requested server ACTIVE or ERROR", func() (bool, string) {
		list, err := c.api().ListAllServers(context.Background())
		if err != nil {
			return false, err.Error()
		}
		byID = map[string]api.ServerView{}
		for _, s := range list {
			byID[s.ID] = s
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		pending := map[string]int{}
		for id := range c.requested {
			s, ok := byID[id]
			switch {
			case !ok:
				pending["missing"]++
			case s.Status != "ACTIVE" && s.Status != "ERROR":
				pending[s.Status+"/"+s.TaskState]++
			}
		}
		return len(pending) == 0, fmt.Sprintf("%d requested, not settled: %v", len(c.requested), pending)
	})
	return byID
}

// schedulerLeader reads who leads the scheduler election: the candidate
// with the lowest create revision; its value is role@host:pid:rand.
func (c *mhCluster) schedulerLeader() (pid int, id string) {
	resp, err := c.cli.Get(context.Background(), c.keys.Election("scheduler")+"/", clientv3.WithFirstCreate()...)
	if err != nil || len(resp.Kvs) == 0 {
		return 0, ""
	}
	id = string(resp.Kvs[0].Value)
	parts := strings.Split(id, ":")
	if len(parts) >= 3 {
		fmt.Sscan(parts[1], &pid)
	}
	return pid, id
}

// countPrefix counts keys under prefix.
func (c *mhCluster) countPrefix(prefix string) int {
	resp, err := c.cli.Get(context.Background(), prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return -1
	}
	return int(resp.Count)
}
