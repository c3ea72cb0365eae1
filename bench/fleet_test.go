package bench

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/placement"
)

// TestFleetWorksEachCastWithItsOwnHost: an instance's cast moves to
// another host (taken back from the first and cast anew, as a reschedule
// does) while the first host is still building it. The new cast must be
// built by the new host, at once. The fleet once queued casts by
// instance alone: the new cast waited behind the old one and was then
// worked by the first host's agent, which ended it unbuilt as stale and
// left the server in BUILD forever.
func TestFleetWorksEachCastWithItsOwnHost(t *testing.T) {
	_, cli := etcdtest.NetClient(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	keys := etcdschema.New(etcdschema.DefaultPrefix)
	log := hclog.NewNullLogger()
	f, err := NewFleet(cli, keys, placement.New(cli, keys, log),
		FleetConfig{Hosts: 2, Cells: 1, BuildTime: 2 * time.Second}, log)
	if err != nil {
		t.Fatal(err)
	}
	hostA, hostB, cell, uuid := f.HostName(1), f.HostName(2), CellName(1), "6f1c2a44-0000-4000-8000-000000000001"
	resp, err := cli.Get(ctx, "/")
	if err != nil {
		t.Fatal(err)
	}
	runErr := make(chan error, 1)
	go func() { runErr <- f.Run(ctx, resp.Header.Revision+1) }()

	now := time.Now().UTC()
	inst := &etcdschema.Instance{UUID: uuid, Name: "s", Status: etcdschema.StatusBuild, TaskState: etcdschema.TaskSpawning,
		Host: hostA, Node: hostA, Cell: cell, Flavor: etcdschema.Flavor{ID: "1", Name: "m1.tiny", VCPUs: 1, RAMMB: 512},
		Attempts: 1, CreatedAt: now, UpdatedAt: now}
	cast := &etcdschema.Build{Op: etcdschema.OpBuild, InstanceUUID: uuid, Name: "s", Cell: cell, Flavor: inst.Flavor,
		Attempt: 1, CastAt: now}
	instKey, castA, castB := keys.CellInstance(cell, uuid), keys.Build(hostA, uuid), keys.Build(hostB, uuid)
	if _, err := cli.Txn(ctx).Then(clientv3.OpPut(instKey, etcdschema.MustEncode(inst)),
		clientv3.OpPut(castA, etcdschema.MustEncode(cast))).Commit(); err != nil {
		t.Fatal(err)
	}
	// Wait until host A works its cast (its build takes 2 s).
	deadline := time.Now().Add(20 * time.Second)
	for {
		f.mu.Lock()
		n := len(f.casts)
		f.mu.Unlock()
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("host A never started on its cast")
		}
		time.Sleep(5 * time.Millisecond) // polling with a deadline
	}
	// The cast moves to host B in one transaction while A builds.
	inst.Host, inst.Node, inst.Attempts = hostB, hostB, 2
	cast.Attempt = 2
	if _, err := cli.Txn(ctx).Then(clientv3.OpPut(instKey, etcdschema.MustEncode(inst)),
		clientv3.OpDelete(castA), clientv3.OpPut(castB, etcdschema.MustEncode(cast))).Commit(); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(30 * time.Second)
	for {
		got, err := cli.Txn(ctx).Then(clientv3.OpGet(instKey), clientv3.OpGet(castB, clientv3.WithCountOnly())).Commit()
		if err != nil {
			t.Fatal(err)
		}
		var cur etcdschema.Instance
		if err := etcdschema.Decode(instKey, got.Responses[0].GetResponseRange().Kvs[0].Value, &cur); err != nil {
			t.Fatal(err)
		}
		castLeft := got.Responses[1].GetResponseRange().Count
		if cur.Status == etcdschema.StatusActive {
			if cur.Host != hostB || castLeft != 0 {
				t.Fatalf("instance ACTIVE on %q with %d cast left on %s; want ACTIVE on %s, cast ended", cur.Host, castLeft, hostB, hostB)
			}
			break
		}
		if castLeft == 0 {
			t.Fatalf("the cast on %s ended with the instance %s on %q: worked by the wrong host's agent and dropped",
				hostB, cur.Status, cur.Host)
		}
		if time.Now().After(deadline) {
			t.Fatalf("instance still %s on %q after 30 s", cur.Status, cur.Host)
		}
		time.Sleep(20 * time.Millisecond) // polling with a deadline
	}
	cancel()
	if err := <-runErr; err != nil {
		t.Fatal(err)
	}
}
