package rawtxn_test

import (
	"context"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/internal/rawtxn"
)

// BenchmarkProviderTickRead builds and commits an agent's provider-tick
// read (two compares, two reads in each branch) on the in-process
// client: clientv3's builders against one built as messages.
//
//	go test -run '^$' -bench ProviderTickRead -benchmem ./internal/rawtxn
func BenchmarkProviderTickRead(b *testing.B) {
	cli := etcdtest.Client(b)
	ctx := context.Background()
	if _, err := cli.Put(ctx, "/cell", "c"); err != nil {
		b.Fatal(err)
	}
	benchTickRead(b, ctx, cli.KV)
}

// BenchmarkProviderTickReadClientSide is BenchmarkProviderTickRead's
// build and send with no server: the request goes to a pb.KVClient that
// keeps it, so ns/op and allocs/op are the client's side alone.
func BenchmarkProviderTickReadClientSide(b *testing.B) {
	ctx := context.Background()
	c := &capture{}
	kv := rawtxn.NewKV(clientv3.NewKVFromKVClient(c, nil), c)
	benchTickRead(b, ctx, kv)
}

// benchTickRead runs the provider-tick read on kv, built by clientv3's
// builders and as messages.
func benchTickRead(b *testing.B, ctx context.Context, kv clientv3.KV) {
	b.Run("clientv3", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			reads := []clientv3.Op{clientv3.OpGet("/svc"), clientv3.OpGet("/info/", clientv3.WithPrefix(), clientv3.WithKeysOnly())}
			if _, err := kv.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision("/cell"), ">", 0),
				clientv3.Compare(clientv3.CreateRevision("/mapping"), ">", 0)).Then(reads...).Else(reads...).Commit(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("raw", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			reads := []*pb.RequestOp{rawtxn.Get("/svc"),
				rawtxn.Range(&pb.RangeRequest{Key: []byte("/info/"), RangeEnd: rawtxn.PrefixEnd("/info/"), KeysOnly: true})}
			if _, err := rawtxn.Commit(ctx, kv, &pb.TxnRequest{
				Compare: []*pb.Compare{rawtxn.Present("/cell"), rawtxn.Present("/mapping")},
				Success: reads, Failure: reads}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
