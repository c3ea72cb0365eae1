package conductor

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/internal/testwait"
	"github.com/berth-project/berth/placement"
)

// TestRetryKeepsAntiAffinity retries a member of an anti-affinity group
// whose first alternate has since taken another member: the conductor must
// skip it, build on the next one, and move the member's place there. The
// alternates come from the failed cast (carried into the retry) or from
// an older Berth's key; either way the next cast carries what is left and
// the instance as written, and no key is left.
func TestRetryKeepsAntiAffinity(t *testing.T) {
	for _, tc := range []struct {
		desc  string
		inKey bool
	}{
		{"alternates carried in the retry's cast", false},
		{"alternates in an older Berth's key", true},
	} {
		t.Run(tc.desc, func(t *testing.T) { testRetryKeepsAntiAffinity(t, tc.inKey) })
	}
}

func testRetryKeepsAntiAffinity(t *testing.T, inKey bool) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cli := etcdtest.Client(t)
	k := etcdschema.New("/t")
	p := placement.New(cli, k, hclog.NewNullLogger())
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"a", "b", "c"} {
		if err := p.EnsureProvider(ctx, "rp-"+h, h, ""); err != nil {
			t.Fatal(err)
		}
		err := p.UpdateProvider(ctx, "rp-"+h, func(pr *etcdschema.Provider) error {
			pr.Inventories = map[string]etcdschema.Inventory{
				placement.VCPU: {Total: 8, MinUnit: 1, MaxUnit: 8, StepSize: 1, AllocationRatio: 1}}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	sel := func(h string) etcdschema.Selection {
		ar, _ := json.Marshal(placement.AllocationRequest{Allocations: map[string]placement.ProviderAllocation{
			"rp-" + h: {Resources: map[string]int64{placement.VCPU: 1}}}})
		return etcdschema.Selection{ServiceHost: h, Nodename: h, Cell: "cell1", ComputeNodeUUID: "rp-" + h,
			AllocationRequest: string(ar)}
	}
	put := func(key string, v etcdschema.Versioned) clientv3.Op {
		return clientv3.OpPut(key, etcdschema.MustEncode(v))
	}
	group := &etcdschema.ServerGroup{UUID: "g", Name: "g", Policy: etcdschema.PolicyAntiAffinity}
	alts := &etcdschema.Alternates{InstanceUUID: "i", Cell: "cell1", MaxAttempts: 3, Group: "g",
		Remaining: []etcdschema.Selection{sel("b"), sel("c")}, Attempts: []etcdschema.Attempt{{Host: "a"}}}
	build := etcdschema.Build{Op: etcdschema.OpBuild, InstanceUUID: "i", Cell: "cell1", ProjectID: "p", UserID: "u"}
	altsOp := put(k.Alternates("i"), alts)
	if !inKey {
		build.Alternates = json.RawMessage(etcdschema.MustEncode(alts))
		altsOp = clientv3.OpGet(k.Alternates("i")) // no key
	}
	_, err := cli.Txn(ctx).Then(
		put(k.ServerGroup("g"), group),
		// "other" was placed on b after i was scheduled with b as an alternate.
		put(k.InstanceMapping("other"), &etcdschema.InstanceMapping{InstanceUUID: "other", Cell: "cell1"}),
		put(k.ServerGroupMember("g", "other"), &etcdschema.ServerGroupMember{InstanceUUID: "other", Host: "b"}),
		put(k.ServerGroupSlot("g", "b", 0), &etcdschema.ServerGroupSlot{InstanceUUID: "other", Host: "b"}),
		// i failed on a and waits for its retry.
		put(k.InstanceMapping("i"), &etcdschema.InstanceMapping{InstanceUUID: "i", Cell: "cell1"}),
		put(k.ServerGroupMember("g", "i"), &etcdschema.ServerGroupMember{InstanceUUID: "i", Host: "a"}),
		put(k.ServerGroupSlot("g", "a", 0), &etcdschema.ServerGroupSlot{InstanceUUID: "i", Host: "a"}),
		put(k.CellInstance("cell1", "i"), &etcdschema.Instance{UUID: "i", Cell: "cell1", Status: etcdschema.StatusBuild,
			TaskState: etcdschema.TaskScheduling, ProjectID: "p", UserID: "u"}),
		altsOp,
		put(k.Retry("cell1", "i"), &etcdschema.Retry{InstanceUUID: "i", Cell: "cell1", FailedHost: "a",
			Reason: "spawn failed", Build: build}),
	).Commit()
	if err != nil {
		t.Fatal(err)
	}
	cc := NewCellConductor(CellConductorConfig{Client: cli, Keys: k, Cell: "cell1", Placement: p, Holder: "t",
		Workers: 1, LeaseTTL: 5 * time.Second, Log: hclog.NewNullLogger()})
	go func() { _ = cc.Run(ctx) }()

	testwait.Until(t, "the retry worked", func() bool {
		resp, err := cli.Get(ctx, k.Retry("cell1", "i"), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		return resp.Count == 0
	})
	var inst etcdschema.Instance
	resp, err := cli.Get(ctx, k.CellInstance("cell1", "i"))
	if err != nil || len(resp.Kvs) != 1 || etcdschema.Decode("i", resp.Kvs[0].Value, &inst) != nil {
		t.Fatalf("read instance: %v", err)
	}
	if inst.Host != "c" {
		t.Fatalf("retried on %q, want c (b holds another member)", inst.Host)
	}
	var next etcdschema.Build
	resp, err = cli.Get(ctx, k.Build("c", "i"))
	if err != nil || len(resp.Kvs) != 1 || etcdschema.Decode("cast", resp.Kvs[0].Value, &next) != nil {
		t.Fatalf("read the cast to c: %v", err)
	}
	if got, _ := cli.Get(ctx, k.CellInstance("cell1", "i")); string(next.Instance) != string(got.Kvs[0].Value) ||
		resp.Kvs[0].ModRevision != got.Kvs[0].ModRevision {
		t.Errorf("the cast to c carries the instance\n %s\nnot the record written with it\n %s", next.Instance, got.Kvs[0].Value)
	}
	left, ok, err := next.CarriedAlternates("cast")
	if err != nil || !ok || len(left.Remaining) != 0 || left.Group != "g" || len(left.Attempts) != 2 ||
		left.Attempts[0].Reason != "spawn failed" || left.Attempts[1].Host != "c" {
		t.Errorf("alternates carried to c: %+v (%v, %v), want none left and attempts a (spawn failed), c", left, ok, err)
	}
	if resp, _ := cli.Get(ctx, k.Alternates("i"), clientv3.WithCountOnly()); resp.Count != 0 {
		t.Error("an alternates key outlived the retry")
	}
	cons, err := p.GetAllocations(ctx, "i")
	if err != nil || cons.Allocations["rp-c"].Resources[placement.VCPU] != 1 || len(cons.Allocations) != 1 {
		t.Fatalf("allocations %+v (%v), want one VCPU on rp-c", cons, err)
	}
	var m etcdschema.ServerGroupMember
	resp, err = cli.Get(ctx, k.ServerGroupMember("g", "i"))
	if err != nil || etcdschema.Decode("m", resp.Kvs[0].Value, &m) != nil || m.Host != "c" {
		t.Fatalf("member host %q, want c", m.Host)
	}
	for key, want := range map[string]int64{k.ServerGroupSlot("g", "a", 0): 0, k.ServerGroupSlot("g", "c", 0): 1} {
		resp, err := cli.Get(ctx, key, clientv3.WithCountOnly())
		if err != nil || resp.Count != want {
			t.Errorf("%s: count %d, want %d", key, resp.Count, want)
		}
	}
}
