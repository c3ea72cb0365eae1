package txnbatch

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/internal/rawtxn"
)

// BenchmarkHandOffBatch builds and commits one batch of 16 hand-off
// shaped members (3 compares, 3 puts and 2 deletes each, as W4's) on
// the in-process client: as the batcher built it with clientv3's OpTxn
// before, and as it builds it now (package rawtxn). allocs/op include
// etcd's side of the request.
//
//	go test -run '^$' -bench HandOffBatch -benchmem ./internal/txnbatch
func BenchmarkHandOffBatch(b *testing.B) {
	cli := etcdtest.Client(b)
	ctx := context.Background()
	if _, err := cli.Put(ctx, "/present", "x"); err != nil {
		b.Fatal(err)
	}
	const members = 16
	val := string(make([]byte, 600)) // a cast's size
	key := func(i int, what string) string { return fmt.Sprintf("/hb/%s/%02d", what, i) }
	b.Run("clientv3", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			subs := make([]clientv3.Op, members)
			for i := range members {
				cmps := []clientv3.Cmp{clientv3.Compare(clientv3.LeaseValue(key(i, "lease")), "=", 0),
					clientv3.Compare(clientv3.CreateRevision(key(i, "br")), "=", 0),
					clientv3.Compare(clientv3.CreateRevision("/present"), ">", 0)}
				ops := []clientv3.Op{clientv3.OpPut(key(i, "inst"), val), clientv3.OpPut(key(i, "map"), "m"),
					clientv3.OpPut(key(i, "cast"), val), clientv3.OpDelete(key(i, "br")), clientv3.OpDelete(key(i, "lease"))}
				subs[i] = clientv3.OpTxn(cmps, ops, nil)
			}
			if _, err := cli.Txn(ctx).Then(subs...).Commit(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("raw", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			subs := make([]*pb.RequestOp, members)
			for i := range members {
				cmps := []*pb.Compare{rawtxn.LeaseIs(key(i, "lease"), 0), rawtxn.Absent(key(i, "br")), rawtxn.Present("/present")}
				ops := []*pb.RequestOp{rawtxn.Put(key(i, "inst"), val), rawtxn.Put(key(i, "map"), "m"),
					rawtxn.Put(key(i, "cast"), val), rawtxn.Delete(key(i, "br")), rawtxn.Delete(key(i, "lease"))}
				subs[i] = rawtxn.Nested(&pb.TxnRequest{Compare: cmps, Success: ops})
			}
			if _, err := rawtxn.Commit(ctx, cli.KV, &pb.TxnRequest{Success: subs}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkCommitHandOff commits hand-off shaped members (3 compares, 3
// puts and 2 deletes each) through a Batcher from 16 goroutines per
// core, as a superconductor's workers do: allocs/op are one member's
// share of the batches, etcd's side of the request included.
//
//	go test -run '^$' -bench CommitHandOff -benchmem -count 5 ./internal/txnbatch
func BenchmarkCommitHandOff(b *testing.B) {
	cli := etcdtest.Client(b)
	ctx := context.Background()
	if _, err := cli.Put(ctx, "/present", "x"); err != nil {
		b.Fatal(err)
	}
	bt := New(cli.KV)
	val := make([]byte, 600) // a cast's size
	var seq atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(16)
	b.RunParallel(func(next *testing.PB) {
		for next.Next() {
			i := seq.Add(1)
			key := func(what string) string { return fmt.Sprintf("/hb/%s/%d", what, i) }
			cmps := []*pb.Compare{rawtxn.LeaseIs(key("lease"), 0), rawtxn.Absent(key("br")), rawtxn.Present("/present")}
			ops := []*pb.RequestOp{rawtxn.PutBytes(key("inst"), val), rawtxn.Put(key("map"), "m"),
				rawtxn.PutBytes(key("cast"), val), rawtxn.Delete(key("br")), rawtxn.Delete(key("lease"))}
			out, err := bt.Commit(ctx, cmps, ops)
			if err != nil || !out.Succeeded {
				b.Errorf("commit: %v (succeeded %v)", err, out.Succeeded)
				return
			}
		}
	})
}
