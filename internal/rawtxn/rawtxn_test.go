package rawtxn_test

import (
	"context"
	"errors"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/internal/rawtxn"
)

// requests are transactions using every field Berth's builders and the
// fallback's conversion know.
var requests = []struct {
	desc string
	r    *pb.TxnRequest
}{
	{"compares of each kind, a put with a lease, a delete", &pb.TxnRequest{
		Compare: []*pb.Compare{rawtxn.Absent("/a"), rawtxn.Present("/b"), rawtxn.ModRevisionIs("/c", 7), rawtxn.LeaseIs("/d", 9),
			{Key: []byte("/e"), RangeEnd: []byte("/f"), Target: pb.Compare_VALUE, Result: pb.Compare_NOT_EQUAL,
				TargetUnion: &pb.Compare_Value{Value: []byte("v")}}},
		Success: []*pb.RequestOp{rawtxn.Put("/a", "1"), rawtxn.PutWithLease("/b", "2", 5), rawtxn.Delete("/c")},
		Failure: []*pb.RequestOp{rawtxn.Get("/a")},
	}},
	{"every range and put and delete option", &pb.TxnRequest{
		Success: []*pb.RequestOp{
			rawtxn.Range(&pb.RangeRequest{Key: []byte("/p/"), RangeEnd: rawtxn.PrefixEnd("/p/"), Limit: 3, Revision: 11,
				SortOrder: pb.RangeRequest_DESCEND, SortTarget: pb.RangeRequest_MOD, Serializable: true, KeysOnly: true,
				MinModRevision: 1, MaxModRevision: 2, MinCreateRevision: 3, MaxCreateRevision: 4}),
			rawtxn.Range(&pb.RangeRequest{Key: []byte("/q"), CountOnly: true}),
			{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte("/r"), PrevKv: true, IgnoreValue: true, IgnoreLease: true}}},
			{Request: &pb.RequestOp_RequestDeleteRange{RequestDeleteRange: &pb.DeleteRangeRequest{Key: []byte("/s/"), RangeEnd: []byte("/s0"), PrevKv: true}}},
		},
	}},
	{"nested transactions, two levels", &pb.TxnRequest{
		Success: []*pb.RequestOp{
			rawtxn.Nested(&pb.TxnRequest{Compare: []*pb.Compare{rawtxn.Absent("/n1")},
				Success: []*pb.RequestOp{rawtxn.Put("/n1", "x"), rawtxn.Nested(&pb.TxnRequest{
					Compare: []*pb.Compare{rawtxn.Present("/g")}, Success: []*pb.RequestOp{rawtxn.Delete("/g")}})},
				Failure: []*pb.RequestOp{rawtxn.Get("/n1")}}),
			rawtxn.Nested(&pb.TxnRequest{Success: []*pb.RequestOp{rawtxn.Put("/n2", "y")}}),
		},
	}},
}

// capture is the pb.KVClient under a clientv3 KV: it keeps the request
// clientv3 built, to be compared with the one given to Commit.
type capture struct {
	pb.KVClient
	got *pb.TxnRequest
}

func (c *capture) Txn(_ context.Context, r *pb.TxnRequest, _ ...grpc.CallOption) (*pb.TxnResponse, error) {
	c.got = r
	return &pb.TxnResponse{Header: &pb.ResponseHeader{}}, nil
}

// TestFallbackSendsTheRequestAsBuilt: through a KV that is not a Sender
// (clientv3's own), the request that reaches the wire is the one built.
func TestFallbackSendsTheRequestAsBuilt(t *testing.T) {
	for _, tc := range requests {
		t.Run(tc.desc, func(t *testing.T) {
			c := &capture{}
			kv := clientv3.NewKVFromKVClient(c, nil)
			if _, ok := kv.(rawtxn.Sender); ok {
				t.Fatal("clientv3's KV is a Sender: the test would not reach the fallback")
			}
			if _, err := rawtxn.Commit(context.Background(), kv, tc.r); err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(c.got, tc.r) {
				t.Errorf("sent\n%v\nwant\n%v", c.got, tc.r)
			}
		})
	}
}

// TestPrefixEndIsClientv3s: the range end of a prefix is clientv3's.
func TestPrefixEndIsClientv3s(t *testing.T) {
	for _, key := range []string{"/berth/hosts/", "a", "a\xff", "\xff\xff", "/x\xff\xffz"} {
		if got, want := string(rawtxn.PrefixEnd(key)), clientv3.GetPrefixRangeEnd(key); got != want {
			t.Errorf("PrefixEnd(%q) = %q, want %q", key, got, want)
		}
	}
}

// notSender hides a KV's SendTxn: what a test's fault injector is.
type notSender struct{ clientv3.KV }

// TestRawAndClientv3AgreeOnEtcd runs one scenario of transactions on a
// real member three ways, each on fresh keys: as built through the
// in-process and the networked clients (both Senders), and through the
// fallback. Each must answer alike: compares, branches, nested outcomes,
// reads, and etcd's refusals with clientv3's errors.
func TestRawAndClientv3AgreeOnEtcd(t *testing.T) {
	srv, netCli := etcdtest.NetClient(t)
	kvs := []struct {
		name   string
		kv     clientv3.KV
		sender bool // kv, or the client's KV, is a Sender
	}{
		{"in-process", srv.Client().KV, true},
		{"networked", netCli.KV, true},
		{"client standing for its KV", netCli, true},
		{"fallback", notSender{srv.Client().KV}, false},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i, c := range kvs {
		t.Run(c.name, func(t *testing.T) {
			kv := c.kv
			if cli, ok := kv.(*clientv3.Client); ok {
				kv = cli.KV
			}
			if _, ok := kv.(rawtxn.Sender); ok != c.sender {
				t.Fatalf("Sender: %v, want %v", ok, c.sender)
			}
			p := "/" + string(rune('a'+i)) + "/"
			commit := func(r *pb.TxnRequest) *clientv3.TxnResponse {
				t.Helper()
				resp, err := rawtxn.Commit(ctx, c.kv, r)
				if err != nil {
					t.Fatal(err)
				}
				return resp
			}
			first := commit(&pb.TxnRequest{Compare: []*pb.Compare{rawtxn.Absent(p + "k")},
				Success: []*pb.RequestOp{rawtxn.Put(p+"k", "1"), rawtxn.Put(p+"l", "2")}})
			if !first.Succeeded {
				t.Fatal("create of an absent key failed")
			}
			again := commit(&pb.TxnRequest{Compare: []*pb.Compare{rawtxn.Absent(p + "k")},
				Success: []*pb.RequestOp{rawtxn.Put(p+"k", "x")},
				Failure: []*pb.RequestOp{rawtxn.Get(p + "k")}})
			if again.Succeeded || string(again.Responses[0].GetResponseRange().Kvs[0].Value) != "1" {
				t.Fatalf("second create: %v", again)
			}
			rev := first.Header.Revision
			nested := commit(&pb.TxnRequest{Success: []*pb.RequestOp{
				rawtxn.Nested(&pb.TxnRequest{Compare: []*pb.Compare{rawtxn.ModRevisionIs(p+"k", rev)},
					Success: []*pb.RequestOp{rawtxn.Delete(p + "k")}}),
				rawtxn.Nested(&pb.TxnRequest{Compare: []*pb.Compare{rawtxn.ModRevisionIs(p+"l", rev-1)},
					Success: []*pb.RequestOp{rawtxn.Delete(p + "l")}}),
				rawtxn.Range(&pb.RangeRequest{Key: []byte(p), RangeEnd: rawtxn.PrefixEnd(p), KeysOnly: true}),
			}})
			if a, b := nested.Responses[0].GetResponseTxn(), nested.Responses[1].GetResponseTxn(); !a.Succeeded || b.Succeeded {
				t.Errorf("nested: first %v, second %v; want the first alone to hold", a.Succeeded, b.Succeeded)
			}
			if kvs := nested.Responses[2].GetResponseRange().Kvs; len(kvs) != 1 || string(kvs[0].Key) != p+"l" || len(kvs[0].Value) != 0 {
				t.Errorf("keys left: %v, want %sl alone, keys only", kvs, p)
			}
			_, err := rawtxn.Commit(ctx, c.kv, &pb.TxnRequest{Success: []*pb.RequestOp{rawtxn.Put(p+"d", "1"), rawtxn.Put(p+"d", "2")}})
			if !errors.Is(err, rpctypes.ErrDuplicateKey) {
				t.Errorf("two puts of one key: %v, want %v", err, rpctypes.ErrDuplicateKey)
			}
			done, stop := context.WithCancel(ctx)
			stop()
			if _, err := rawtxn.Commit(done, c.kv, &pb.TxnRequest{Success: []*pb.RequestOp{rawtxn.Put(p+"c", "1")}}); !errors.Is(err, context.Canceled) {
				t.Errorf("cancelled: %v, want %v", err, context.Canceled)
			}
		})
	}
}

// TestBuildersAreClientv3s: each builder makes the message clientv3's
// builders put on the wire for the same compare or operation.
func TestBuildersAreClientv3s(t *testing.T) {
	for _, key := range []string{"/berth/consumers/c1", "/k"} {
		for _, rev := range []int64{0, 7, 1 << 40} {
			want := &capture{}
			if _, err := clientv3.NewKVFromKVClient(want, nil).Txn(context.Background()).If(
				clientv3.Compare(clientv3.CreateRevision(key), "=", 0),
				clientv3.Compare(clientv3.CreateRevision(key), ">", 0),
				clientv3.Compare(clientv3.ModRevision(key), "=", rev),
				clientv3.Compare(clientv3.LeaseValue(key), "=", rev),
			).Then(
				clientv3.OpPut(key, "v"),
				clientv3.OpPut(key, "v", clientv3.WithLease(clientv3.LeaseID(rev))),
				clientv3.OpDelete(key),
				clientv3.OpGet(key),
				clientv3.OpGet(key, clientv3.WithPrefix(), clientv3.WithKeysOnly()),
				clientv3.OpTxn(nil, []clientv3.Op{clientv3.OpGet(key)}, nil),
			).Commit(); err != nil {
				t.Fatal(err)
			}
			got := &pb.TxnRequest{
				Compare: []*pb.Compare{rawtxn.Absent(key), rawtxn.Present(key), rawtxn.ModRevisionIs(key, rev), rawtxn.LeaseIs(key, rev)},
				Success: []*pb.RequestOp{
					rawtxn.Put(key, "v"),
					rawtxn.PutWithLease(key, "v", rev),
					rawtxn.Delete(key),
					rawtxn.Get(key),
					rawtxn.Range(&pb.RangeRequest{Key: []byte(key), RangeEnd: rawtxn.PrefixEnd(key), KeysOnly: true}),
					rawtxn.Nested(&pb.TxnRequest{Success: []*pb.RequestOp{rawtxn.Get(key)}}),
				},
			}
			if !proto.Equal(got, want.got) {
				t.Errorf("key %q rev %d: built\n%v\nclientv3 sends\n%v", key, rev, got, want.got)
			}
		}
	}
}
