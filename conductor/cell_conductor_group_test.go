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
// skip it, build on the next one, and move the member's place there.
func TestRetryKeepsAntiAffinity(t *testing.T) {
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
	build := etcdschema.Build{Op: etcdschema.OpBuild, InstanceUUID: "i", Cell: "cell1", ProjectID: "p", UserID: "u"}
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
		put(k.Alternates("i"), &etcdschema.Alternates{InstanceUUID: "i", Cell: "cell1", MaxAttempts: 3, Group: "g",
			Remaining: []etcdschema.Selection{sel("b"), sel("c")}, Attempts: []etcdschema.Attempt{{Host: "a"}}}),
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
