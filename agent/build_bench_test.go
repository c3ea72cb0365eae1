package agent

import (
	"context"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/internal/informer"
)

// BenchmarkWorkBuild is one build cast worked to ACTIVE, as a fleet's
// host works it: a cast carrying its instance and alternates (as the
// hand-off writes them), decoded, built by the fake driver and recorded
// in the outcome transaction, over a networked client to an embedded
// etcd in this process. The cast's write is outside the timer; ns/op and
// allocs/op are the agent's work with both sides of its transaction.
func BenchmarkWorkBuild(b *testing.B) {
	_, cli := etcdtest.NetClient(b)
	a := syncedHost(b, cli, 0)
	ctx := context.Background()
	k := a.keys
	f := etcdschema.Flavor{ID: "2", Name: "m1.small", VCPUs: 1, RAMMB: 2048, DiskGB: 20}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		b.StopTimer()
		i++
		uuid := fmt.Sprintf("6a0c9b1e-0000-4000-8000-%012d", i)
		now := time.Now().UTC()
		// As the hand-off writes them (EncodeCast).
		castBytes, instBytes, err := etcdschema.EncodeCast(&etcdschema.Build{Op: etcdschema.OpBuild, InstanceUUID: uuid, Name: "bench-1",
			Cell: "cell1", Flavor: f, ProjectID: "p", UserID: "u", Attempt: 1, RequestID: "req-" + uuid, CastAt: now,
			Image: &etcdschema.BootImage{ID: "img"}},
			&etcdschema.Instance{UUID: uuid, Name: "bench-1", Status: etcdschema.StatusBuild,
				TaskState: etcdschema.TaskSpawning, Host: "h1", Node: "h1", Cell: "cell1", Flavor: f, ProjectID: "p", UserID: "u",
				Image: &etcdschema.BootImage{ID: "img"}, CreatedAt: now, UpdatedAt: now, RequestID: "req-" + uuid},
			&etcdschema.Alternates{InstanceUUID: uuid, Cell: "cell1", MaxAttempts: 3,
				Attempts:  []etcdschema.Attempt{{Host: "h1", At: now}},
				Remaining: []etcdschema.Selection{{ServiceHost: "h2", Nodename: "h2", Cell: "cell1"}}})
		if err != nil {
			b.Fatal(err)
		}
		inst, cast := string(instBytes), string(castBytes)
		key := k.Build("h1", uuid)
		resp, err := cli.Txn(ctx).Then(clientv3.OpPut(k.CellInstance("cell1", uuid), inst), clientv3.OpPut(key, cast)).Commit()
		if err != nil {
			b.Fatal(err)
		}
		ev := informer.Event{Key: key, Value: []byte(cast), Revision: resp.Header.Revision}
		b.StartTimer()
		a.Work(ctx, ev)
	}
	b.StopTimer()
	got, err := cli.Get(ctx, k.Builds("h1"), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || got.Count != 0 {
		b.Fatalf("%v casts left unworked (%v)", got.Count, err)
	}
}
