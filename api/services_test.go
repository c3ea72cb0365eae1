package api

import (
	"context"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/agent"
	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/internal/testwait"
	"github.com/berth-project/berth/placement"
)

// opsStack is an API in front of real etcd, real placement and real agents.
type opsStack struct {
	cli  *clientv3.Client
	keys etcdschema.Keys
	p    *placement.Service
	srv  *httptest.Server
	c    *Client
}

func newOpsStack(t *testing.T) *opsStack {
	t.Helper()
	cli := etcdtest.Client(t)
	keys := etcdschema.New("/t")
	p := placement.New(cli, keys, hclog.NewNullLogger())
	a := New(cli, keys, p, hclog.NewNullLogger())
	a.TraitSyncTimeout = 5 * time.Second
	srv := httptest.NewServer(a)
	t.Cleanup(srv.Close)
	return &opsStack{cli: cli, keys: keys, p: p, srv: srv, c: NewClient(srv.URL)}
}

// startAgent runs a fake-driver agent for host until the returned stop.
func (o *opsStack) startAgent(t *testing.T, host, cell string) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ag, err := agent.New(agent.Config{Host: host, Cell: cell, ReportInterval: time.Second,
		Inventory: agent.Inventory{VCPUs: 4, MemoryMB: 4096, DiskGB: 10}},
		o.cli, o.keys, o.p, agent.NewFakeDriver(host, agent.FakeConfig{}), hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = ag.Run(ctx); close(done) }()
	stop = func() { cancel(); <-done }
	t.Cleanup(stop)
	if err := ag.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, "agent "+host+" up", func() bool { return o.service(t, host).State == "up" })
	return stop
}

func (o *opsStack) service(t *testing.T, host string) ServiceView {
	t.Helper()
	svcs, err := o.c.ListServices(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range svcs {
		if s.Host == host {
			return s
		}
	}
	return ServiceView{}
}

func (o *opsStack) hasTrait(t *testing.T, host string) bool {
	t.Helper()
	prov, err := o.p.Provider(context.Background(), agent.ProviderUUIDForHost(host))
	if err != nil {
		t.Fatal(err)
	}
	return slices.Contains(prov.Traits, placement.TraitComputeStatusDisabled)
}

func ptr[T any](v T) *T { return &v }

func TestServiceDisableUpHostWaitsForTrait(t *testing.T) {
	o := newOpsStack(t)
	o.startAgent(t, "h1", "cell1")
	ctx := context.Background()

	v, err := o.c.UpdateService(ctx, "h1", ServiceUpdate{Status: ptr("disabled"), DisabledReason: ptr("maintenance")})
	if err != nil {
		t.Fatal(err)
	}
	if v.Status != "disabled" || v.DisabledReason != "maintenance" || v.State != "up" || v.Warning != "" {
		t.Fatalf("disable answered %+v", v)
	}
	// The answer came after the agent confirmed: no polling needed here.
	if !o.hasTrait(t, "h1") {
		t.Fatal("disable returned before COMPUTE_STATUS_DISABLED was on the provider")
	}
	v, err = o.c.UpdateService(ctx, "h1", ServiceUpdate{Status: ptr("enabled")})
	if err != nil || v.Status != "enabled" || v.DisabledReason != "" || v.Warning != "" {
		t.Fatalf("enable answered %+v, %v", v, err)
	}
	if o.hasTrait(t, "h1") {
		t.Fatal("enable returned before the trait was cleared")
	}
}

func TestServiceDisableDownHostOnlyMarks(t *testing.T) {
	o := newOpsStack(t)
	stop := o.startAgent(t, "h1", "cell1")
	stop() // a graceful stop revokes the liveness lease: down at once
	testwait.Until(t, "h1 down", func() bool { return o.service(t, "h1").State == "down" })

	ctx := context.Background()
	start := time.Now()
	v, err := o.c.UpdateService(ctx, "h1", ServiceUpdate{Status: ptr("disabled"), DisabledReason: ptr("dead disk")})
	if err != nil || v.Status != "disabled" || v.State != "down" {
		t.Fatalf("disable of a down host: %+v, %v", v, err)
	}
	if time.Since(start) > 3*time.Second {
		t.Fatalf("disabling a down host waited %s for an agent that is not there", time.Since(start))
	}
	if o.hasTrait(t, "h1") {
		t.Fatal("the trait was set with no agent running")
	}
	// The agent comes back: its start-up provider sync sets the trait.
	o.startAgent(t, "h1", "cell1")
	testwait.Until(t, "trait set by the returning agent", func() bool { return o.hasTrait(t, "h1") })
}

func TestServiceForcedDownOverridesLiveness(t *testing.T) {
	o := newOpsStack(t)
	o.startAgent(t, "h1", "cell1")
	ctx := context.Background()
	v, err := o.c.UpdateService(ctx, "h1", ServiceUpdate{ForcedDown: ptr(true)})
	if err != nil || v.State != "down" || !v.ForcedDown || v.Status != "enabled" {
		t.Fatalf("forced_down: %+v, %v", v, err)
	}
	// The agent's own writes keep the API's fields.
	if got := o.service(t, "h1"); got.State != "down" || !got.ForcedDown {
		t.Fatalf("list after forced_down: %+v", got)
	}
	v, err = o.c.UpdateService(ctx, "h1", ServiceUpdate{ForcedDown: ptr(false)})
	if err != nil || v.State != "up" {
		t.Fatalf("forced_down false: %+v, %v", v, err)
	}
}

func TestServiceUpdateValidation(t *testing.T) {
	o := newOpsStack(t)
	o.startAgent(t, "h1", "cell1")
	cases := []struct {
		desc, host, body string
		status           int
		msg              string
	}{
		{"malformed", "h1", `{"status":`, 400, "Malformed request body"},
		{"unknown field", "h1", `{"state":"down"}`, 400, "unknown field"},
		{"nothing to do", "h1", `{}`, 400, "at least one of"},
		{"bad status", "h1", `{"status":"off"}`, 400, `"enabled" or "disabled"`},
		{"reason without disable", "h1", `{"status":"enabled","disabled_reason":"x"}`, 400, "only accepted with"},
		{"reason too long", "h1", `{"status":"disabled","disabled_reason":"` + strings.Repeat("x", 256) + `"}`, 400, "255"},
		{"unknown host", "nope", `{"status":"disabled"}`, 404, "nope could not be found"},
		{"ok", "h1", `{"status":"disabled"}`, 200, ""},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			code, out := do(t, "PUT", o.srv.URL+"/v1/services/"+tc.host, tc.body)
			if code != tc.status {
				t.Fatalf("status %d, want %d: %v", code, tc.status, out)
			}
			if tc.msg != "" && !strings.Contains(errMessage(out), tc.msg) {
				t.Fatalf("message %q does not say %q", errMessage(out), tc.msg)
			}
		})
	}
}

func errMessage(out map[string]any) string {
	for _, v := range out {
		if m, ok := v.(map[string]any); ok {
			s, _ := m["message"].(string)
			return s
		}
	}
	return ""
}

func TestHostsShowUsageAndCapacity(t *testing.T) {
	o := newOpsStack(t)
	o.startAgent(t, "h1", "cell1")
	ctx := context.Background()
	if err := o.p.PutAllocations(ctx, "i1", placement.AllocationWrite{ProjectID: "p", UserID: "u",
		Allocations: map[string]placement.ProviderAllocation{agent.ProviderUUIDForHost("h1"): {Resources: map[string]int64{"VCPU": 3}}}}); err != nil {
		t.Fatal(err)
	}
	hosts, err := o.c.ListHosts(ctx)
	if err != nil || len(hosts) != 1 {
		t.Fatalf("hosts: %+v, %v", hosts, err)
	}
	h := hosts[0]
	// 4 VCPUs at the agent's default 4.0 ratio.
	if h.Host != "h1" || h.State != "up" || h.Status != "enabled" || h.Resources["VCPU"] != (ResourceUsage{Used: 3, Capacity: 16}) {
		t.Fatalf("host view: %+v", h)
	}
	if h.Mapped {
		t.Fatalf("h1 mapped to a cell that does not exist: %+v", h)
	}
}

func TestCellsCreateListDiscover(t *testing.T) {
	o := newOpsStack(t)
	o.startAgent(t, "h1", "cellx") // registers before its cell exists
	ctx := context.Background()
	if cells, err := o.c.ListCells(ctx); err != nil || len(cells) != 0 {
		t.Fatalf("cells before create: %+v, %v", cells, err)
	}
	for _, bad := range []string{"", "a/b", "cell0", "-x"} {
		if _, err := o.c.CreateCell(ctx, bad); err == nil || !strings.Contains(err.Error(), "400") {
			t.Errorf("create cell %q: want a 400, got %v", bad, err)
		}
	}
	if _, err := o.c.CreateCell(ctx, "cellx"); err != nil {
		t.Fatal(err)
	}
	if _, err := o.c.CreateCell(ctx, "cellx"); err == nil || !strings.Contains(err.Error(), "409") {
		t.Fatalf("second create: want 409, got %v", err)
	}
	// Names that sort between "cellx" and its subtree ("-" and "." come
	// before "/"), and after it.
	for _, n := range []string{"cellx-2", "cellx.b", "celly"} {
		if _, err := o.c.CreateCell(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	// An instance in cellx must not hide celly from the walk.
	for _, cell := range []string{"cellx", etcdschema.Cell0} { // cell0 has a subtree, no record
		if _, err := o.cli.Put(ctx, o.keys.CellInstance(cell, "i1"), "{}"); err != nil {
			t.Fatal(err)
		}
	}
	mapped, unmapped, err := o.c.DiscoverHosts(ctx)
	if err != nil || len(mapped) != 1 || mapped[0].Host != "h1" || len(unmapped) != 0 {
		t.Fatalf("discover: mapped %+v unmapped %+v, %v", mapped, unmapped, err)
	}
	if mapped, _, _ := o.c.DiscoverHosts(ctx); len(mapped) != 0 {
		t.Fatalf("second discover mapped again: %+v", mapped)
	}
	cells, err := o.c.ListCells(ctx)
	var names []string
	for _, c := range cells {
		names = append(names, c.Name)
	}
	if err != nil || strings.Join(names, ",") != "cellx,cellx-2,cellx.b,celly" || cells[0].Hosts != 1 {
		t.Fatalf("cells: %+v, %v", cells, err)
	}
}

func TestServiceDisableWarnsWhenAgentDoesNotConfirm(t *testing.T) {
	o := newOpsStack(t)
	ctx := context.Background()
	// A host that reads up (its alive key is there) but whose agent is hung:
	// nothing will set the trait.
	prov := agent.ProviderUUIDForHost("h1")
	if err := o.p.EnsureProvider(ctx, prov, "h1", ""); err != nil {
		t.Fatal(err)
	}
	svc := &etcdschema.Service{Host: "h1", Cell: "cell1", ProviderUUID: prov}
	if _, err := o.cli.Put(ctx, o.keys.Service("h1"), etcdschema.MustEncode(svc)); err != nil {
		t.Fatal(err)
	}
	if _, err := o.cli.Put(ctx, o.keys.Alive("h1"), etcdschema.MustEncode(&etcdschema.Alive{Host: "h1"})); err != nil {
		t.Fatal(err)
	}
	a := New(o.cli, o.keys, o.p, hclog.NewNullLogger())
	a.TraitSyncTimeout = 300 * time.Millisecond
	srv := httptest.NewServer(a)
	t.Cleanup(srv.Close)

	start := time.Now()
	v, err := NewClient(srv.URL).UpdateService(ctx, "h1", ServiceUpdate{Status: ptr("disabled")})
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < 300*time.Millisecond || took > 5*time.Second {
		t.Fatalf("answered after %s, want about the 300ms timeout", took)
	}
	if v.Status != "disabled" || v.State != "up" || !strings.Contains(v.Warning, "did not confirm") {
		t.Fatalf("want the disable recorded with a warning, got %+v", v)
	}
}
