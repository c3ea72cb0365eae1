package compute

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/agent"
	"github.com/berth-project/berth/api"
	"github.com/berth-project/berth/conductor"
	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/hosts"
	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/internal/members"
	"github.com/berth-project/berth/internal/testwait"
	"github.com/berth-project/berth/placement"
	"github.com/berth-project/berth/scheduler"
)

// hostsRig is Nova's API over real etcd, a real placement index and
// real agents on the fake driver, with a scheduler and a superconductor
// registered as running members (as internal/stack registers them).
type hostsRig struct {
	*testAPI
	cli    *clientv3.Client
	keys   etcdschema.Keys
	p      *placement.Service
	store  *hosts.Store
	agents map[string]func()
}

func newHostsRig(t *testing.T) *hostsRig {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	cli := etcdtest.Client(t)
	keys := etcdschema.New("/t")
	p := placement.New(cli, keys, hclog.NewNullLogger())
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := api.EnsureFlavors(ctx, cli, keys, api.DefaultFlavors()); err != nil {
		t.Fatal(err)
	}
	nova := New(cli, keys, hclog.NewNullLogger())
	store := hosts.New(cli, keys, hclog.NewNullLogger())
	nova.SetHosts(store, 10*time.Second)
	legacy := api.New(cli, keys, p, hclog.NewNullLogger())
	return &hostsRig{testAPI: &testAPI{t: t, h: nova.Beside(legacy)}, cli: cli, keys: keys, p: p, store: store,
		agents: map[string]func(){}}
}

// register runs a member registration (a control service) until the
// test ends.
func (r *hostsRig) register(role, id string) {
	r.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	reg := &members.Registration{Cli: r.cli, Keys: r.keys, Role: role, ID: id, TTL: 10 * time.Second, Log: hclog.NewNullLogger()}
	done := make(chan struct{})
	go func() { _ = reg.Run(ctx); close(done) }()
	r.t.Cleanup(func() { cancel(); <-done })
	<-reg.Registered()
}

// controls registers a scheduler and a superconductor on "controller".
func (r *hostsRig) controls() {
	r.register(scheduler.Role, "controller")
	r.register(conductor.SuperconductorRole, "controller")
}

// startAgent runs a fake-driver agent for host, sized as Nova's fake
// driver (1000 vCPUs, 800000 MB with Nova's default 512 reserved,
// 600000 GB), until stopAgent or the end of the test.
func (r *hostsRig) startAgent(host string) {
	r.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ag, err := agent.New(agent.Config{Host: host, Cell: "cell1", ReportInterval: time.Second, TrackInstanceChanges: true,
		Inventory: agent.Inventory{VCPUs: 1000, MemoryMB: 800000, DiskGB: 600000, ReservedHostMemoryMB: 512}},
		r.cli, r.keys, r.p, agent.NewFakeDriver(host, agent.FakeConfig{}), hclog.NewNullLogger())
	if err != nil {
		r.t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = ag.Run(ctx); close(done) }()
	stop := func() { cancel(); <-done }
	r.agents[host] = stop
	r.t.Cleanup(stop)
	if err := ag.WaitSynced(ctx); err != nil {
		r.t.Fatal(err)
	}
	testwait.Until(r.t, host+" up", func() bool {
		h, err := r.store.Get(context.Background(), host)
		return err == nil && h != nil && h.Up()
	})
}

func (r *hostsRig) stopAgent(host string) { r.agents[host]() }

// boot puts an instance on host as the scheduler and a cell conductor
// would: a claim in placement, the instance record naming the host and
// the build cast, in one transaction; the agent builds it.
func (r *hostsRig) boot(host, id, name string) {
	r.t.Helper()
	ctx := context.Background()
	f := etcdschema.Flavor{ID: "ht1", Name: "hosts.tiny", VCPUs: 1, RAMMB: 128, DiskGB: 1}
	err := r.p.PutAllocations(ctx, id, placement.AllocationWrite{ProjectID: "p1", UserID: "u1",
		Allocations: map[string]placement.ProviderAllocation{agent.ProviderUUIDForHost(host): {
			Resources: map[string]int64{"VCPU": 1, "MEMORY_MB": 128, "DISK_GB": 1}}}})
	if err != nil {
		r.t.Fatal(err)
	}
	now := time.Now().UTC()
	inst := &etcdschema.Instance{UUID: id, Name: name, Status: etcdschema.StatusBuild, Host: host, Node: host,
		Cell: "cell1", Flavor: f, ProjectID: "p1", UserID: "u1", CreatedAt: now, UpdatedAt: now}
	b := &etcdschema.Build{Op: "build", InstanceUUID: id, Name: name, Cell: "cell1", Flavor: f, ProjectID: "p1",
		UserID: "u1", Attempt: 1, CastAt: now}
	if _, err := r.cli.Txn(ctx).Then(clientv3.OpPut(r.keys.CellInstance("cell1", id), etcdschema.MustEncode(inst)),
		clientv3.OpPut(r.keys.Build(host, id), etcdschema.MustEncode(b))).Commit(); err != nil {
		r.t.Fatal(err)
	}
	testwait.Until(r.t, name+" running on "+host, func() bool {
		h, err := r.store.Get(ctx, host)
		return err == nil && h != nil && len(h.Instances) == 1 && h.Builds == 0
	})
}

// serve exposes the API on a loopback listener, for clients.
func (r *hostsRig) serve() string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) { r.h.ServeHTTP(w, req) }))
	r.t.Cleanup(srv.Close)
	return strings.TrimRight(srv.URL, "/")
}
