package etcdauth

import (
	"errors"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/rawtxn"
)

var (
	keys    = etcdschema.New("/berth")
	compute = []Host{{Name: "compute-1", Cell: "cell1", ProviderUUID: "11111111-1111-4111-8111-111111111111"},
		{Name: "compute-2", Cell: "cell1", ProviderUUID: "22222222-2222-4222-8222-222222222222"},
		{Name: "compute-3", Cell: "cell2", ProviderUUID: "33333333-3333-4333-8333-333333333333"}}
	lab = Machines{Servers: []string{"ctl-1"}, Conductors: map[string]string{"ctl-2": "cell1", "ctl-3": "cell2"},
		Agents: compute, Members: []string{"etcd-9"}}
)

// TestRolesAllowOnlyTheirKeys: with the plan applied and auth on, each
// machine's certificate may write what its roles say and nothing else:
// an agent its own host's keys but not another's, a conductor its cell
// but not another; nobody but a server reads the signing key; an
// anonymous client nothing.
func TestRolesAllowOnlyTheirKeys(t *testing.T) {
	c := startAuthCluster(t, "ctl-1")
	roles, users := Plan(keys, lab)
	if err := Apply(ctx(t), c.srv.Client(), roles, users, "root-pw"); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	// The member's in-process client is ctl-1, a server: it may still
	// write the signing key (a server makes it) and anything else.
	if _, err := c.srv.Client().Put(ctx(t), keys.IdentitySigningKey(), "secret"); err != nil {
		t.Fatalf("the server machine's in-process client after auth: %v", err)
	}
	// A transaction sent as built (package rawtxn) carries the identity too.
	if _, err := rawtxn.Commit(ctx(t), c.srv.Client().KV, &pb.TxnRequest{
		Compare: []*pb.Compare{rawtxn.Present(keys.IdentitySigningKey())},
		Success: []*pb.RequestOp{rawtxn.Get(keys.IdentitySigningKey())}}); err != nil {
		t.Fatalf("a raw transaction of the server machine's in-process client after auth: %v", err)
	}
	for _, tc := range []struct {
		machine, key string
		write        bool // else read
		ok           bool
	}{
		{"compute-1", keys.Service("compute-1"), true, true},
		{"compute-1", keys.Alive("compute-1"), true, true},
		{"compute-1", keys.HostMapping("compute-1"), true, true},
		{"compute-1", keys.Provider(compute[0].ProviderUUID), true, true},
		{"compute-1", keys.CellInstance("cell1", "6d4f2f8e-3c1a-4e5b-9a57-0c2f1d7b8a11"), true, true},
		{"compute-1", keys.Retry("cell1", "6d4f2f8e-3c1a-4e5b-9a57-0c2f1d7b8a11"), true, true},
		{"compute-1", keys.Migration("cell1", "7e5a3f9f-4d2b-4f6c-8b68-1d3e2f8c9b22"), true, true},
		{"compute-1", keys.MigrationMapping("7e5a3f9f-4d2b-4f6c-8b68-1d3e2f8c9b22"), true, true},
		{"compute-1", keys.ServerGroupMember("8f6b4a0a-5e3c-4a7d-9c79-2e4f3a9d0c33", "6d4f2f8e-3c1a-4e5b-9a57-0c2f1d7b8a11"), true, true},
		// A cold move's steps, between two hosts of one cell: the next
		// step's cast, the other host's instance info and allocations.
		{"compute-1", keys.Build("compute-2", "6d4f2f8e-3c1a-4e5b-9a57-0c2f1d7b8a11"), true, true},
		{"compute-1", keys.HostInstance("compute-2", "6d4f2f8e-3c1a-4e5b-9a57-0c2f1d7b8a11"), true, true},
		{"compute-1", keys.Provider(compute[1].ProviderUUID), true, true},
		{"compute-1", keys.Service("compute-2"), true, false},
		{"compute-1", keys.Alive("compute-2"), true, false},
		{"compute-1", keys.HostMapping("compute-2"), true, false},
		{"compute-1", keys.Build("compute-3", "6d4f2f8e-3c1a-4e5b-9a57-0c2f1d7b8a11"), true, false},
		{"compute-1", keys.Provider(compute[2].ProviderUUID), true, false},
		{"compute-1", keys.Migration("cell2", "7e5a3f9f-4d2b-4f6c-8b68-1d3e2f8c9b22"), true, false},
		{"compute-1", keys.CellInstance("cell2", "6d4f2f8e-3c1a-4e5b-9a57-0c2f1d7b8a11"), true, false},
		{"compute-1", keys.Flavor("m1.tiny"), true, false},
		{"compute-1", keys.Flavor("m1.tiny"), false, true},
		{"compute-1", keys.Service("compute-2"), false, true},
		{"compute-1", keys.IdentitySigningKey(), false, false},
		{"ctl-2", keys.Cell("cell1"), true, true},
		{"ctl-2", keys.RetryLease("cell1", "6d4f2f8e-3c1a-4e5b-9a57-0c2f1d7b8a11"), true, true},
		{"ctl-2", keys.Build("compute-2", "6d4f2f8e-3c1a-4e5b-9a57-0c2f1d7b8a11"), true, true},
		{"ctl-2", keys.Build("compute-3", "6d4f2f8e-3c1a-4e5b-9a57-0c2f1d7b8a11"), true, false},
		{"ctl-2", keys.MigrationMapping("7e5a3f9f-4d2b-4f6c-8b68-1d3e2f8c9b22"), true, true},
		{"ctl-2", keys.Cell("cell2"), true, false},
		{"ctl-2", keys.Retry("cell2", "6d4f2f8e-3c1a-4e5b-9a57-0c2f1d7b8a11"), true, false},
		{"ctl-2", keys.Service("compute-1"), true, false},
		{"ctl-2", keys.IdentitySigningKey(), false, false},
		{"etcd-9", keys.Cell("health-check"), false, true},
		{"etcd-9", keys.Cell("health-check"), true, false},
		{"ctl-1", keys.IdentitySigningKey(), false, true},
		{"ctl-1", keys.BuildRequest("6d4f2f8e-3c1a-4e5b-9a57-0c2f1d7b8a11"), true, true},
		{"stranger", keys.Flavor("m1.tiny"), false, false},
	} {
		cli := c.client(tc.machine)
		var err error
		if tc.write {
			_, err = cli.Put(ctx(t), tc.key, "x")
		} else {
			_, err = cli.Get(ctx(t), tc.key)
		}
		if tc.ok && err != nil {
			t.Errorf("%s write=%v %s: %v, want allowed", tc.machine, tc.write, tc.key, err)
		}
		if !tc.ok && !errors.Is(err, rpctypes.ErrPermissionDenied) && !errors.Is(err, rpctypes.ErrUserNotFound) {
			t.Errorf("%s write=%v %s: %v, want permission denied", tc.machine, tc.write, tc.key, err)
		}
	}
	// A transaction that writes its own key and another host's is refused
	// whole: the claim transactions cannot be used to slip a write in.
	_, err := c.client("compute-1").Txn(ctx(t)).Then(
		clientv3.OpPut(keys.Service("compute-1"), "x"), clientv3.OpPut(keys.Service("compute-2"), "x")).Commit()
	if !errors.Is(err, rpctypes.ErrPermissionDenied) {
		t.Errorf("a transaction writing another host's key: %v, want permission denied", err)
	}
}

// TestApplyAgain: a second Apply with a changed plan (a host moved to
// another cell, a machine no longer a server) revokes what is no longer
// planned and grants the rest, with auth already on (as root).
func TestApplyAgain(t *testing.T) {
	c := startAuthCluster(t, "ctl-1")
	roles, users := Plan(keys, lab)
	if err := Apply(ctx(t), c.srv.Client(), roles, users, ""); err != nil {
		t.Fatal(err)
	}
	moved := lab
	moved.Agents = []Host{compute[0], {Name: "compute-2", Cell: "cell2", ProviderUUID: compute[1].ProviderUUID}, compute[2]}
	roles, users = Plan(keys, moved)
	// root: a certificate-only root user authenticates by a certificate
	// named root.
	if err := Apply(ctx(t), c.client("root"), roles, users, ""); err != nil {
		t.Fatalf("Apply again as root: %v", err)
	}
	cli := c.client("compute-2")
	if _, err := cli.Put(ctx(t), keys.CellInstance("cell2", "6d4f2f8e-3c1a-4e5b-9a57-0c2f1d7b8a11"), "x"); err != nil {
		t.Errorf("compute-2 moved to cell2 cannot write there: %v", err)
	}
	if _, err := cli.Put(ctx(t), keys.CellInstance("cell1", "6d4f2f8e-3c1a-4e5b-9a57-0c2f1d7b8a11"), "x"); !errors.Is(err, rpctypes.ErrPermissionDenied) {
		t.Errorf("compute-2 can still write cell1 after moving: %v", err)
	}
	if _, err := c.client("ctl-2").Put(ctx(t), keys.Build("compute-2", "6d4f2f8e-3c1a-4e5b-9a57-0c2f1d7b8a11"), "x"); !errors.Is(err, rpctypes.ErrPermissionDenied) {
		t.Errorf("cell1's conductor still casts to compute-2 after it moved: %v", err)
	}
}
