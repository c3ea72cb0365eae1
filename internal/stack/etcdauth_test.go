package stack

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/berth-project/berth/agent"
	"github.com/berth-project/berth/api"
	"github.com/berth-project/berth/configs"
	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/embedetcd"
	"github.com/berth-project/berth/internal/etcdauth"
	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/internal/testwait"
	"github.com/berth-project/berth/internal/tlsgen"
)

// TestRolesWorkUnderEtcdAuth: with etcd's auth on and each machine's
// etcd user limited to its roles (etcdauth), every role still does its
// job: a server (the member's in-process client, the server machine's
// certificate) accepts and schedules servers, cell1's conductor (its own
// machine) retries the builds that fail on compute-1, whose agent files
// the retries, and compute-2's agent builds them; deleting them ends
// every server. And the agents' credentials do not reach another host.
func TestRolesWorkUnderEtcdAuth(t *testing.T) {
	dir := t.TempDir()
	ca, err := tlsgen.WriteCA(dir, "lab", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(dir, tlsgen.CACertFile)
	for _, m := range []string{"ctl-1", "ctl-2", "compute-1", "compute-2"} {
		if err := ca.WriteCert(dir, m, nil, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	member := etcdtest.StartWith(t, func(c *embedetcd.Config) {
		c.ClientURL = strings.Replace(c.ClientURL, "http:", "https:", 1)
		c.PeerURL = strings.Replace(c.PeerURL, "http:", "https:", 1)
		c.TLS = embedetcd.TLSFiles{CertFile: tlsgen.CertFile(dir, "ctl-1"), KeyFile: tlsgen.KeyFile(dir, "ctl-1"), TrustedCAFile: caFile}
	})
	keys := etcdschema.New("/berth")
	var hosts []etcdauth.Host
	for _, h := range []string{"compute-1", "compute-2"} {
		hosts = append(hosts, etcdauth.Host{Name: h, Cell: "cell1", ProviderUUID: agent.ProviderUUIDForHost(h)})
	}
	roles, users := etcdauth.Plan(keys, etcdauth.Machines{Servers: []string{"ctl-1"},
		Conductors: map[string]string{"ctl-2": "cell1"}, Agents: hosts})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := etcdauth.Apply(ctx, member.Client(), roles, users, ""); err != nil {
		t.Fatalf("apply the etcd users: %v", err)
	}
	netClient := func(machine string) *clientv3.Client {
		info := transport.TLSInfo{CertFile: tlsgen.CertFile(dir, machine), KeyFile: tlsgen.KeyFile(dir, machine), TrustedCAFile: caFile}
		tc, err := info.ClientConfig()
		if err != nil {
			t.Fatal(err)
		}
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{member.ClientURL()}, DialTimeout: 5 * time.Second, TLS: tc, Logger: zap.NewNop()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cli.Close() })
		return cli
	}

	server := startServerFromHCL(t, member.Client(), `
api {
  bind = "127.0.0.1:0"
  auth = "noauth"
}
placement {
  bind = "127.0.0.1:0"
}
scheduler {
  bind = "127.0.0.1:0"
}
superconductor {}
`, nil)
	start := func(s *Stack, f func(context.Context) error) {
		t.Helper()
		t.Cleanup(s.Stop)
		if err := f(ctx); err != nil {
			t.Fatal(err)
		}
	}
	cfg := configs.Defaults()
	conductor := New(cfg, hclog.NewNullLogger())
	conductor.Attach(netClient("ctl-2"))
	cc := *cfg.Conductor
	cc.Cell = "cell1"
	start(conductor, func(ctx context.Context) error { return conductor.StartConductor(ctx, &cc) })
	for _, h := range hosts {
		s := New(cfg, hclog.NewNullLogger())
		s.Attach(netClient(h.Name))
		a := *cfg.Agent
		a.Host, a.Cell = h.Name, h.Cell
		a.Inventory.VCPUs, a.Inventory.MemoryMB, a.Inventory.DiskGB = 8, 16384, 100
		a.Fake.BuildTime = 50 * time.Millisecond
		if h.Name == "compute-1" {
			a.Fake.Fail, a.Fake.FailReschedulable = true, true
		}
		start(s, func(ctx context.Context) error { return s.StartAgent(ctx, &a, t.TempDir()) })
	}

	c := api.NewClient(server.Endpoint("compute API"))
	testwait.Poll(t, 30*time.Second, "both hosts up", func() (bool, string) {
		svcs, err := c.ListServices(ctx)
		up := 0
		for _, s := range svcs {
			if s.State == "up" {
				up++
			}
		}
		return err == nil && up == 2, fmt.Sprintf("%+v %v", svcs, err)
	})
	// One request at a time: a request's alternates are the hosts none of
	// its instances took, so one placed on compute-1 is retried on
	// compute-2 by the conductor. The weighers spread servers over the
	// empty hosts, so one of the first two lands on compute-1 (whose
	// failures then weigh it down); at least three more follow.
	var ids []string
	retried := 0
	for i := 0; i < 10 && (retried == 0 || i < 4); i++ {
		resp, err := c.CreateServers(ctx, api.CreateRequest{Name: fmt.Sprintf("auth-%d", i), Flavor: "m1.tiny", Count: 1})
		if err != nil {
			t.Fatal(err)
		}
		id := serverIDs(resp)[0]
		ids = append(ids, id)
		testwait.Poll(t, 30*time.Second, "server "+id+" ACTIVE on compute-2", func() (bool, string) {
			s, err := c.GetServer(ctx, id)
			if err != nil {
				return false, err.Error()
			}
			if s.Status == "ACTIVE" && s.Attempts > 1 {
				retried++
			}
			return s.Status == "ACTIVE" && s.Host == "compute-2", fmt.Sprintf("%s on %q after %d attempts", s.Status, s.Host, s.Attempts)
		})
	}
	if retried == 0 {
		t.Errorf("no server was retried: the conductor's writes went untested")
	}
	t.Logf("%d of %d servers retried by cell1's conductor", retried, len(ids))
	for _, id := range ids {
		if err := c.DeleteServer(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	testwait.Poll(t, 30*time.Second, "every server gone", func() (bool, string) {
		list, err := c.ListServers(ctx)
		return err == nil && len(list) == 0, fmt.Sprintf("%d left, %v", len(list), err)
	})

	// And compute-1's credentials stop at its own host.
	if _, err := netClient("compute-1").Put(ctx, keys.Service("compute-2"), "{}"); err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Errorf("compute-1 wrote compute-2's service record: %v", err)
	}
}

func serverIDs(resp *api.CreateResponse) []string {
	var ids []string
	for _, s := range resp.Servers {
		ids = append(ids, s.ID)
	}
	return ids
}
