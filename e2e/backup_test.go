package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/api"
	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/internal/testwait"
)

// etcdProcs is a cluster of three `berth run etcd` processes.
type etcdProcs struct {
	procs   []*proc
	configs []string // each member's config, also what restore reads
	clients []string
}

// startEtcdProcs writes three member configs under dir (data dirs
// dir/etcd-N) and starts the members, unless restore is set: then each
// data dir is first made from that snapshot by `berth etcd snapshot
// restore --config`.
func startEtcdProcs(t *testing.T, dir, restore string) *etcdProcs {
	t.Helper()
	e := &etcdProcs{}
	var peers, initial []string
	for i := 1; i <= 3; i++ {
		peers = append(peers, fmt.Sprintf("http://127.0.0.1:%d", etcdtest.FreePort(t)))
		e.clients = append(e.clients, fmt.Sprintf("http://127.0.0.1:%d", etcdtest.FreePort(t)))
		initial = append(initial, fmt.Sprintf("etcd-%d=%s", i, peers[i-1]))
	}
	for i := 1; i <= 3; i++ {
		name := fmt.Sprintf("etcd-%d", i)
		e.configs = append(e.configs, writeFile(t, dir, name+".hcl", fmt.Sprintf(`etcd {
  prefix = "/berth"
  embedded {
    name = %q
    data_dir = %q
    client_url = %q
    peer_url = %q
    initial_cluster = %q
    heartbeat_interval = "200ms"
    election_timeout = "2s"
  }
}
`, name, filepath.Join(dir, name), e.clients[i-1], peers[i-1], strings.Join(initial, ","))))
		if restore != "" {
			out, err := exec.Command(berthBin, "etcd", "snapshot", "restore", restore, "--config", e.configs[i-1]).CombinedOutput()
			if err != nil {
				t.Fatalf("restore %s: %v\n%s", name, err, out)
			}
			t.Logf("%s", out)
		}
	}
	for i, cfg := range e.configs {
		e.procs = append(e.procs, startProc(t, fmt.Sprintf("%s-etcd-%d", filepath.Base(dir), i+1), "run", "etcd", "-config", cfg))
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: e.clients, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	testwait.Poll(t, 60*time.Second, "etcd members serve", func() (bool, string) {
		for _, u := range e.clients {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_, err := cli.Status(ctx, strings.TrimPrefix(u, "http://"))
			cancel()
			if err != nil {
				return false, u + ": " + err.Error()
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := cli.Get(ctx, "/berth/")
		return err == nil, fmt.Sprint(err)
	})
	return e
}

func (e *etcdProcs) stop(t *testing.T) {
	for _, p := range e.procs {
		_ = p.stop(t, 20*time.Second)
	}
}

// backupState is what a restore must bring back, read through the APIs
// and Placement's records.
type backupState struct {
	servers   map[string]serverFacts
	consumers map[string]*etcdschema.Consumer
	flavors   string // `berth flavor list -o json`
	groups    map[string]api.ServerGroupView
	usageMB   int64
}

// serverFacts are a server's facts a restore must keep (not its update
// time, which an agent's re-sync may touch).
type serverFacts struct {
	Name, Status, Host, Cell, Flavor, Project string
	Created                                   time.Time
}

func (c *cluster) backupState(ids []string) backupState {
	c.t.Helper()
	ctx := context.Background()
	s := backupState{servers: map[string]serverFacts{}, consumers: map[string]*etcdschema.Consumer{}, groups: map[string]api.ServerGroupView{}}
	all, err := c.api.ListServers(ctx)
	if err != nil {
		c.t.Fatal(err)
	}
	for _, v := range all {
		s.servers[v.ID] = serverFacts{Name: v.Name, Status: v.Status, Host: v.Host, Cell: v.Cell, Flavor: v.Flavor.Name,
			Project: v.ProjectID, Created: v.Created.UTC()}
	}
	for _, id := range ids {
		s.consumers[id] = c.consumer(id)
	}
	s.flavors = c.cliOK("flavor", "list", "-o", "json")
	groups, err := c.api.ListServerGroups(ctx, true)
	if err != nil {
		c.t.Fatal(err)
	}
	for _, g := range groups {
		slices.Sort(g.Members)
		s.groups[g.ID] = g
	}
	s.usageMB = c.totalUsage("MEMORY_MB")
	return s
}

// TestBackupRestoreIntoNewCluster takes a snapshot of a running 3-member
// cluster with servers, allocations, flavors and a group, stops every
// process, restores the snapshot into a NEW 3-member cluster (new data
// dirs, new ports), starts Berth against it, finds everything again, and
// boots one more server.
func TestBackupRestoreIntoNewCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: starts real processes")
	}
	root := t.TempDir()
	oldDir, newDir := filepath.Join(root, "old"), filepath.Join(root, "new")
	for _, d := range []string{oldDir, newDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	old := startEtcdProcs(t, oldDir, "")
	c := &cluster{t: t, etcdURL: old.clients[0], keys: etcdschema.New("/berth"), dir: oldDir,
		apiAddr:   freeAddr(t),
		placeAddr: freeAddr(t)}
	c.apiURL = "http://" + c.apiAddr
	c.api = api.NewClient(c.apiURL)
	c.cli = etcdClient(t, old.clients)

	hosts := []agentSpec{{host: "bk-1", memoryMB: 8192}, {host: "bk-2", memoryMB: 8192}}
	start := func() []*proc {
		procs := []*proc{c.startConductor("conductor", "cell1", nil), c.startServer("server", allRoles, nil)}
		for _, p := range c.startAgents(hosts...) {
			procs = append(procs, p)
		}
		return procs
	}
	procs := start()

	c.cliOK("flavor", "create", "bk.custom", "--vcpus", "2", "--ram", "1024", "--disk", "5", "--property", "hw:cpu_policy=shared")
	group, err := c.api.CreateServerGroup(context.Background(), "bk-group", "anti-affinity", 0)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i, flavor := range []string{"m1.small", "bk.custom"} {
		resp, err := c.api.CreateServers(context.Background(), api.CreateRequest{Name: fmt.Sprintf("bk-g%d", i), Flavor: flavor, Count: 1,
			Hints: map[string]any{"group": group.ID}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, resp.Servers[0].ID)
	}
	ids = append(ids, c.create("bk-plain"))
	for _, id := range ids {
		if v := c.settle(id); v.Status != "ACTIVE" {
			t.Fatalf("server %s: %+v", id, v)
		}
		if c.consumer(id) == nil {
			t.Fatalf("server %s is ACTIVE without allocations", id)
		}
	}
	before := c.backupState(ids)

	// The admin's config reaches the cluster; save asks one member.
	admin := writeFile(t, root, "admin.hcl", etcdBlock(old.clients[1]))
	snap := filepath.Join(root, "berth.snap")
	out := c.cliOK("etcd", "snapshot", "save", "--config", admin, snap)
	if !strings.Contains(out, "revision ") {
		t.Fatalf("save printed %q", out)
	}
	t.Log(strings.TrimSpace(out))

	// Restore means: every berth process stopped, then the new cluster.
	for _, p := range procs {
		_ = p.stop(t, 20*time.Second)
	}
	old.stop(t)

	fresh := startEtcdProcs(t, newDir, snap)
	c.etcdURL, c.dir = fresh.clients[2], newDir
	c.cli = etcdClient(t, fresh.clients)
	start()

	// Every server, its allocations, the flavors and the group came back.
	testwait.Poll(t, 60*time.Second, "servers as before the backup", func() (bool, string) {
		after := c.backupState(ids)
		if !reflect.DeepEqual(after.servers, before.servers) {
			return false, fmt.Sprintf("servers %+v, want %+v", after.servers, before.servers)
		}
		return true, ""
	})
	after := c.backupState(ids)
	for _, id := range ids {
		if !reflect.DeepEqual(after.consumers[id], before.consumers[id]) {
			t.Errorf("consumer %s: %+v, want %+v", id, after.consumers[id], before.consumers[id])
		}
	}
	if after.flavors != before.flavors || !strings.Contains(after.flavors, "bk.custom") {
		t.Errorf("flavors:\n%s\nwant:\n%s", after.flavors, before.flavors)
	}
	if !reflect.DeepEqual(after.groups, before.groups) || len(after.groups[group.ID].Members) != 2 {
		t.Errorf("groups %+v, want %+v", after.groups, before.groups)
	}
	if after.usageMB != before.usageMB || after.usageMB == 0 {
		t.Errorf("MEMORY_MB used %d, want %d", after.usageMB, before.usageMB)
	}

	// The restored cluster keeps working: a new server boots, and the
	// group's anti-affinity still knows its members (both hosts hold one,
	// so a third member has nowhere to go).
	id := c.create("bk-after")
	if v := c.settle(id); v.Status != "ACTIVE" || c.consumer(id) == nil {
		t.Fatalf("server created after the restore: %+v", v)
	}
	resp, err := c.api.CreateServers(context.Background(), api.CreateRequest{Name: "bk-g3", Flavor: "m1.small", Count: 1,
		Hints: map[string]any{"group": group.ID}})
	if err != nil {
		t.Fatal(err)
	}
	if v := c.settle(resp.Servers[0].ID); v.Status != "ERROR" {
		t.Errorf("a third anti-affinity member on two hosts: %+v, want ERROR", v)
	}
}

func etcdClient(t *testing.T, endpoints []string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}
