package agent

import (
	"context"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/testwait"
)

// A destination whose prep fails for good (not reschedulable) ends the
// move at once: the migration in error, the server ACTIVE on its source
// with no task, and its server group place on the source alone, not on
// the destination the move's claim had added.
func TestMovePrepFinalFailureKeepsTheGroupPlaceOnTheSource(t *testing.T) {
	cli, keys, _, _ := startAgent(t, FakeConfig{Fail: true, FailReschedulable: false})
	ctx := context.Background()
	put := func(key string, v etcdschema.Versioned) clientv3.Op {
		return clientv3.OpPut(key, etcdschema.MustEncode(v))
	}
	inst := &etcdschema.Instance{UUID: "i", Name: "x", Status: etcdschema.StatusActive, Host: "src", Cell: "cell1",
		Group: "g", TaskState: etcdschema.TaskResizePrep, MigrationUUID: "m"}
	mig := &etcdschema.Migration{UUID: "m", InstanceUUID: "i", Cell: "cell1", Status: etcdschema.MigrationPreMigrating,
		MigrationType: etcdschema.MigrationTypeMigration, SourceHost: "src", DestHost: "h1",
		Attempts: []etcdschema.Attempt{{Host: "h1"}}, MaxAttempts: 3}
	cast := &etcdschema.Build{Op: etcdschema.OpMove, InstanceUUID: "i", Cell: "cell1",
		Move: &etcdschema.MoveStep{MigrationUUID: "m", Step: etcdschema.MovePrep}}
	if _, err := cli.Txn(ctx).Then(
		put(keys.ServerGroup("g"), &etcdschema.ServerGroup{UUID: "g", Name: "g", Policy: etcdschema.PolicyAntiAffinity}),
		// The move's claim on h1 added it there, keeping src.
		put(keys.ServerGroupMember("g", "i"), &etcdschema.ServerGroupMember{InstanceUUID: "i", Host: "h1", MoveSource: "src"}),
		put(keys.CellInstance("cell1", "i"), inst),
		put(keys.Migration("cell1", "m"), mig),
		put(keys.Build("h1", "i"), cast),
	).Commit(); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, "the prep cast worked", func() bool {
		resp, err := cli.Get(ctx, keys.Build("h1", "i"), clientv3.WithCountOnly())
		return err == nil && resp.Count == 0
	})
	got := instance(t, cli, keys, "i")
	if got.Host != "src" || got.TaskState != "" || got.MigrationUUID != "" || got.Status != etcdschema.StatusActive {
		t.Fatalf("server after the failed prep: %+v", got)
	}
	var m etcdschema.Migration
	resp, err := cli.Get(ctx, keys.Migration("cell1", "m"))
	if err != nil || len(resp.Kvs) != 1 || etcdschema.Decode("m", resp.Kvs[0].Value, &m) != nil {
		t.Fatalf("read migration: %v", err)
	}
	if m.Status != etcdschema.MigrationError || m.Error == "" {
		t.Errorf("migration after the failed prep: %s %q", m.Status, m.Error)
	}
	var gm etcdschema.ServerGroupMember
	resp, err = cli.Get(ctx, keys.ServerGroupMember("g", "i"))
	if err != nil || len(resp.Kvs) != 1 || etcdschema.Decode("gm", resp.Kvs[0].Value, &gm) != nil {
		t.Fatalf("read member: %v", err)
	}
	if gm.Host != "src" || gm.MoveSource != "" {
		t.Fatalf("group member after the failed prep: on %q, move source %q; want src alone", gm.Host, gm.MoveSource)
	}
}
