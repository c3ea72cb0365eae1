package conductor

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/internal/rawtxn"
	"github.com/berth-project/berth/internal/workqueue"
)

// TestHandOffGuards commits the hand-off (W4) a superconductor builds,
// on a real member, after each way its BuildRequest can leave it between
// the lease (W2) and the hand-off: it commits only when nothing did.
// Each refusal is the work of one of the two compares W4 keeps (our
// lease key is ours; the instance mapping exists), so removing either
// fails a case here. A BuildRequest is put once and only deleted, by a
// writer that holds its lease key (a hand-off, a bury) or deletes its
// mapping with it (a user's delete): the compare of its mod revision
// that W4 also made refused nothing the other two did not.
func TestHandOffGuards(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cli := etcdtest.Client(t)
	keys := etcdschema.New("/t")
	s := NewSuperconductor(SuperconductorConfig{Client: cli, Keys: keys, Holder: "sc-test",
		LeaseTTL: time.Minute, MaxAttempts: 3, Log: hclog.NewNullLogger()})
	other, err := cli.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	sels := []etcdschema.Selection{{ServiceHost: "h1", Nodename: "h1", Cell: "cell1"}}
	tests := []struct {
		desc string
		// change is what happens to the request after our lease.
		change func(t *testing.T, it workqueue.Item, uuid string)
		want   bool
	}{
		{desc: "nothing changed", want: true},
		{desc: "the user deleted the server (request, mapping)", want: false,
			change: func(t *testing.T, it workqueue.Item, uuid string) {
				commit(t, ctx, cli, rawtxn.Delete(it.Key), rawtxn.Delete(keys.InstanceMapping(uuid)))
			}},
		{desc: "our lease key expired and another holder leased the request", want: false,
			change: func(t *testing.T, it workqueue.Item, uuid string) {
				commit(t, ctx, cli, rawtxn.PutWithLease(it.LeaseKey, "other", int64(other.ID)))
			}},
		{desc: "another holder then handed it off (request, lease key deleted; mapping with its cell)", want: false,
			change: func(t *testing.T, it workqueue.Item, uuid string) {
				commit(t, ctx, cli, rawtxn.Delete(it.Key), rawtxn.Delete(it.LeaseKey),
					rawtxn.Put(keys.InstanceMapping(uuid), etcdschema.MustEncode(&etcdschema.InstanceMapping{InstanceUUID: uuid, Cell: "cell2"})))
			}},
		{desc: "our lease key expired and the leader buried the request in cell0 (mapping kept)", want: false,
			change: func(t *testing.T, it workqueue.Item, uuid string) {
				commit(t, ctx, cli, rawtxn.Delete(it.Key), rawtxn.Delete(it.LeaseKey),
					rawtxn.Put(keys.InstanceMapping(uuid), etcdschema.MustEncode(&etcdschema.InstanceMapping{InstanceUUID: uuid, Cell: "cell0"})))
			}},
	}
	for i, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			uuid := fmt.Sprintf("00000000-0000-4000-8000-%012d", i)
			br := etcdschema.BuildRequest{InstanceUUID: uuid, Name: "s", ProjectID: "p", UserID: "u",
				Flavor: etcdschema.Flavor{ID: "1", Name: "m1", VCPUs: 1, RAMMB: 512}, CreatedAt: time.Now().UTC()}
			put := commit(t, ctx, cli, rawtxn.Put(keys.BuildRequest(uuid), etcdschema.MustEncode(&br)),
				rawtxn.Put(keys.InstanceMapping(uuid), etcdschema.MustEncode(&etcdschema.InstanceMapping{InstanceUUID: uuid})))
			// Our lease (W2) as the queue takes it.
			lease, err := s.queue.LeaseID(ctx)
			if err != nil {
				t.Fatal(err)
			}
			it := workqueue.Item{ID: uuid, Key: keys.BuildRequest(uuid), LeaseKey: keys.BuildRequestLease(uuid), ModRev: put}
			commit(t, ctx, cli, rawtxn.PutWithLease(it.LeaseKey, "ours", int64(lease)))
			if tc.change != nil {
				tc.change(t, it, uuid)
			}
			cmps, ops, err := s.handOffOps(ctx, leasedRequest{item: it, br: br}, sels)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := rawtxn.Commit(ctx, cli, &pb.TxnRequest{Compare: cmps, Success: ops})
			if err != nil {
				t.Fatal(err)
			}
			if resp.Succeeded != tc.want {
				t.Fatalf("hand-off committed: %v, want %v", resp.Succeeded, tc.want)
			}
			got, err := cli.Get(ctx, keys.Build("h1", uuid), clientv3.WithCountOnly())
			if err != nil || (got.Count == 1) != tc.want {
				t.Fatalf("%d casts (%v), want one only if the hand-off committed", got.Count, err)
			}
		})
	}
}

// commit runs ops in one transaction and returns its revision.
func commit(t *testing.T, ctx context.Context, cli *clientv3.Client, ops ...*pb.RequestOp) int64 {
	t.Helper()
	resp, err := rawtxn.Commit(ctx, cli, &pb.TxnRequest{Success: ops})
	if err != nil {
		t.Fatal(err)
	}
	return resp.Header.Revision
}
