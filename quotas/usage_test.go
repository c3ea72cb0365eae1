package quotas

import (
	"context"
	"strconv"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/etcdtest"
)

// TestCount counts a project's servers in every state a server record
// can be in, as Nova counts them: instances from mappings until a
// delete is accepted, cores and RAM from Placement allocations (or the
// flavor before there can be one).
func TestCount(t *testing.T) {
	cli := etcdtest.Client(t)
	for _, indexed := range []bool{false, true} {
		name := "every mapping read (no index: an older Berth's records)"
		if indexed {
			name = "from the per-project index the leader built"
		}
		t.Run(name, func(t *testing.T) { testCount(t, cli, indexed) })
	}
}

func testCount(t *testing.T, cli *clientv3.Client, indexed bool) {
	keys := etcdschema.New("/q" + strconv.FormatBool(indexed))
	ctx := context.Background()
	build := func() {
		t.Helper()
		if indexed {
			if _, err := BuildIndex(ctx, cli, keys, testFence(t, cli, keys), "test"); err != nil {
				t.Fatal(err)
			}
		}
	}
	put := func(key string, v etcdschema.Versioned) {
		t.Helper()
		if _, err := cli.Put(ctx, key, etcdschema.MustEncode(v)); err != nil {
			t.Fatal(err)
		}
	}
	small := etcdschema.Flavor{Name: "small", VCPUs: 2, RAMMB: 512}
	claim := func(uuid string, vcpu, mem int64) {
		put(keys.Consumer(uuid), &etcdschema.Consumer{UUID: uuid, ProjectID: "p", Allocations: map[string]etcdschema.ConsumerAllocation{
			"rp": {Resources: map[string]int64{"VCPU": vcpu, "MEMORY_MB": mem, "DISK_GB": 1}}}})
	}
	for _, s := range []struct {
		uuid, project, cell, status, task string
		built                             bool // a build request, not yet in a cell
		vcpu, mem                         int64
	}{
		{uuid: "a", project: "p", built: true},                                                     // 1 instance, flavor: 2 cores
		{uuid: "b", project: "p", cell: "c1", status: etcdschema.StatusActive, vcpu: 4, mem: 1024}, // its allocation
		{uuid: "c", project: "p", cell: "c1", status: etcdschema.StatusError},                      // no allocation: no cores
		{uuid: "d", project: "p", cell: "c1", status: etcdschema.StatusBuild},                      // between hosts: its flavor
		{uuid: "e", project: "p", cell: "c1", status: etcdschema.StatusActive, task: etcdschema.TaskDeleting, vcpu: 2, mem: 512},
		{uuid: "f", project: "p", cell: "c1", status: etcdschema.StatusDeleted},
		{uuid: "g", project: "other", cell: "c1", status: etcdschema.StatusActive, vcpu: 8, mem: 8192},
		{uuid: "h", project: "p", cell: "c1"}, // its record went: nothing
		// Shelving, as Nova's default counting from the database: an
		// offloaded server counts its flavor, once even while an
		// unshelve's claim is in place; a shelved one its allocation.
		{uuid: "i", project: "p", cell: "c1", status: etcdschema.StatusShelvedOffloaded},
		{uuid: "j", project: "p", cell: "c1", status: etcdschema.StatusShelved, vcpu: 2, mem: 512},
		{uuid: "k", project: "p", cell: "c1", status: etcdschema.StatusShelvedOffloaded, task: etcdschema.TaskSpawning, vcpu: 2, mem: 512},
	} {
		put(keys.InstanceMapping(s.uuid), &etcdschema.InstanceMapping{InstanceUUID: s.uuid, Cell: s.cell, ProjectID: s.project})
		switch {
		case s.built:
			put(keys.BuildRequest(s.uuid), &etcdschema.BuildRequest{InstanceUUID: s.uuid, Flavor: small, ProjectID: s.project})
		case s.status != "":
			put(keys.CellInstance(s.cell, s.uuid), &etcdschema.Instance{UUID: s.uuid, Cell: s.cell, Flavor: small,
				ProjectID: s.project, Status: s.status, TaskState: s.task})
		}
		if s.vcpu > 0 {
			claim(s.uuid, s.vcpu, s.mem)
		}
	}
	put(keys.ServerGroup("g1"), &etcdschema.ServerGroup{UUID: "g1", ProjectID: "p"})
	put(keys.ServerGroup("g2"), &etcdschema.ServerGroup{UUID: "g2", ProjectID: "other"})
	put(keys.ServerGroupMember("g1", "a"), &etcdschema.ServerGroupMember{InstanceUUID: "a"})
	put(keys.ServerGroupMember("g1", "gone"), &etcdschema.ServerGroupMember{InstanceUUID: "gone"}) // no mapping
	put(keys.ServerGroupMember("g1", "g"), &etcdschema.ServerGroupMember{InstanceUUID: "g"})       // another project's server

	build()
	s := New(cli, keys, nil, nil)
	got, rev, err := s.Count(ctx, "p", "g1")
	if err != nil {
		t.Fatal(err)
	}
	want := Usage{Instances: 4 + 3, Cores: 2 + 4 + 0 + 2 + 2 + 3*2, RAM: 512 + 1024 + 512 + 512 + 3*512, ServerGroups: 1, GroupMembers: 2}
	if got != want || rev == 0 {
		t.Errorf("usage %+v at %d, want %+v", got, rev, want)
	}
	// A project whose id an encoder may escape is counted too.
	odd := `p<&>"x`
	put(keys.InstanceMapping("o"), &etcdschema.InstanceMapping{InstanceUUID: "o", ProjectID: odd})
	put(keys.BuildRequest("o"), &etcdschema.BuildRequest{InstanceUUID: "o", Flavor: small, ProjectID: odd})
	build()
	if got, _, err := s.Count(ctx, odd, ""); err != nil || got.Instances != 1 || got.Cores != 2 {
		t.Errorf("project %q uses %+v (%v), want its one server", odd, got, err)
	}
	if got, _, _ := s.Count(ctx, "", ""); got != (Usage{}) {
		t.Errorf("no project uses %+v, want nothing", got)
	}
}

// TestGuardFencesTheCount: two creates checked against the same count
// cannot both commit; the loser counts again and sees the winner. A
// create into a group also fails once a member joined after its count,
// whichever project's create added it.
func TestGuardFencesTheCount(t *testing.T) {
	cli := etcdtest.Client(t)
	keys := etcdschema.New("/q")
	ctx := context.Background()
	s := New(cli, keys, Limits{Instances: 1, ServerGroupMembers: 5}, nil)
	if _, err := cli.Put(ctx, keys.ServerGroup("g"), etcdschema.MustEncode(&etcdschema.ServerGroup{UUID: "g", ProjectID: "p"})); err != nil {
		t.Fatal(err)
	}
	req := ServerRequest{Project: "p", Group: "g", Min: 1, Max: 1, VCPUs: 1, RAMMB: 1}
	n1, g1, err1 := s.ReserveServers(ctx, req)
	n2, g2, err2 := s.ReserveServers(ctx, req)
	if err1 != nil || err2 != nil || n1 != 1 || n2 != 1 {
		t.Fatalf("both checks should pass alone: %d %v, %d %v", n1, err1, n2, err2)
	}
	commit := func(g Guard, uuid string) bool {
		t.Helper()
		ops := append(g.Ops,
			clientv3.OpPut(keys.InstanceMapping(uuid), etcdschema.MustEncode(&etcdschema.InstanceMapping{InstanceUUID: uuid, ProjectID: "p"})),
			clientv3.OpPut(keys.BuildRequest(uuid), etcdschema.MustEncode(&etcdschema.BuildRequest{InstanceUUID: uuid, ProjectID: "p",
				Flavor: etcdschema.Flavor{VCPUs: 1, RAMMB: 1}})))
		resp, err := cli.Txn(ctx).If(g.Cmps...).Then(ops...).Commit()
		if err != nil {
			t.Fatal(err)
		}
		return resp.Succeeded
	}
	if !commit(g1, "s1") {
		t.Fatal("the first create's guard failed")
	}
	if commit(g2, "s2") {
		t.Fatal("the second create committed against the count the first changed")
	}
	if _, _, err := s.ReserveServers(ctx, req); err == nil || err.Error() != "Quota exceeded for instances: Requested 1, but already used 1 of 1 instances" {
		t.Errorf("counting again: %v", err)
	}

	// Another project's member joining the group moves no fence of p's,
	// but the member comparison catches it.
	_, g3, err := s.ReserveServers(ctx, ServerRequest{Project: "q", Group: "g", Min: 1, Max: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, keys.ServerGroupMember("g", "s9"), etcdschema.MustEncode(&etcdschema.ServerGroupMember{InstanceUUID: "s9"})); err != nil {
		t.Fatal(err)
	}
	if commit(g3, "s3") {
		t.Error("a create into a group committed though a member joined after its count")
	}
}
