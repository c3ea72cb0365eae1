package informer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/berth-project/berth/internal/etcdtest"
)

// ListKVs hands over what etcd holds at the revision asked for — keys,
// values (empty ones too), create and mod revisions, versions and leases
// — streamed and read as raw chunks over the network, and through the
// in-process client's fallback alike; an error of fn ends the list.
func TestListKVsKeepsWhatEtcdSent(t *testing.T) {
	for _, tc := range []struct {
		desc string
		cli  func(t *testing.T) *clientv3.Client
	}{
		{"networked: raw chunks", func(t *testing.T) *clientv3.Client { _, cli := etcdtest.NetClient(t); return cli }},
		{"in-process: ListRaw's fallback", func(t *testing.T) *clientv3.Client { return etcdtest.Client(t) }},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			cli := tc.cli(t)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			lease, err := cli.Grant(ctx, 60)
			if err != nil {
				t.Fatal(err)
			}
			// Enough keys for several of etcd's chunks (it sizes them
			// to about 1.5 MB), values of many sizes, one empty.
			const n = 3000
			val := func(i int) string { return string(bytes.Repeat([]byte{byte('a' + i%26)}, i%1000)) }
			for i := 0; i < n; i += 100 {
				var ops []clientv3.Op
				for j := i; j < i+100; j++ {
					var opts []clientv3.OpOption
					if j%7 == 0 {
						opts = append(opts, clientv3.WithLease(lease.ID))
					}
					ops = append(ops, clientv3.OpPut(fmt.Sprintf("/kv/%05d", j), val(j), opts...))
				}
				if _, err := cli.Txn(ctx).Then(ops...).Commit(); err != nil {
					t.Fatal(err)
				}
			}
			pinned, err := cli.Put(ctx, "/kv/00001", "changed") // a second version
			if err != nil {
				t.Fatal(err)
			}
			if _, err := cli.Put(ctx, "/kv/00002", "after the pin"); err != nil {
				t.Fatal(err)
			}
			want, err := cli.Get(ctx, "/kv/", clientv3.WithPrefix(), clientv3.WithRev(pinned.Header.Revision))
			if err != nil {
				t.Fatal(err)
			}
			var got []*mvccpb.KeyValue
			chunks := 0
			rev, err := ListKVs(ctx, cli, "/kv/", pinned.Header.Revision, func(kvs []KV) error {
				chunks++
				for _, kv := range kvs {
					got = append(got, &mvccpb.KeyValue{Key: bytes.Clone(kv.Key), Value: bytes.Clone(kv.Value),
						CreateRevision: kv.CreateRevision, ModRevision: kv.ModRevision, Version: kv.Version, Lease: kv.Lease})
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if rev != pinned.Header.Revision || len(got) != n {
				t.Fatalf("ListKVs at %d: revision %d, %d keys (want %d)", pinned.Header.Revision, rev, len(got), n)
			}
			for i, kv := range got {
				w := want.Kvs[i]
				if !bytes.Equal(kv.Key, w.Key) || !bytes.Equal(kv.Value, w.Value) || kv.CreateRevision != w.CreateRevision ||
					kv.ModRevision != w.ModRevision || kv.Version != w.Version || kv.Lease != w.Lease {
					t.Fatalf("key %d: got %v, etcd's Get %v", i, kv, w)
				}
			}
			if got[2].Lease == 0 && got[0].Lease == 0 {
				t.Fatal("no listed key kept its lease")
			}
			t.Logf("%d keys in %d chunks", len(got), chunks)
			stop := errors.New("stop")
			if _, err := ListKVs(ctx, cli, "/kv/", 0, func([]KV) error { return stop }); !errors.Is(err, stop) {
				t.Fatalf("ListKVs with a failing fn: %v", err)
			}
		})
	}
}

// parseRangeStreamResponse reads what protobuf reads from a
// RangeStreamResponse's bytes, whatever else the message carries
// (header, more, count), and refuses truncated bytes with an error.
func TestParseRangeStreamResponseMatchesProtobuf(t *testing.T) {
	rnd := rand.New(rand.NewSource(1))
	randBytes := func(max int) []byte {
		if rnd.Intn(5) == 0 {
			return nil
		}
		b := make([]byte, rnd.Intn(max))
		rnd.Read(b)
		return b
	}
	randInt := func() int64 {
		switch rnd.Intn(4) {
		case 0:
			return 0
		case 1:
			return rnd.Int63()
		default:
			return rnd.Int63n(1 << 20)
		}
	}
	for round := 0; round < 200; round++ {
		msg := &pb.RangeStreamResponse{}
		if round%10 != 0 { // some without a range response
			rr := &pb.RangeResponse{More: rnd.Intn(2) == 0, Count: randInt()}
			if rnd.Intn(2) == 0 {
				rr.Header = &pb.ResponseHeader{ClusterId: uint64(randInt()), Revision: randInt(), RaftTerm: 7}
			}
			for i := rnd.Intn(50); i > 0; i-- {
				rr.Kvs = append(rr.Kvs, &mvccpb.KeyValue{Key: append([]byte("/k/"), randBytes(40)...), Value: randBytes(600),
					CreateRevision: randInt(), ModRevision: randInt(), Version: randInt(), Lease: randInt()})
			}
			msg.RangeResponse = rr
		}
		b, err := proto.Marshal(msg)
		if err != nil {
			t.Fatal(err)
		}
		if round%3 == 0 {
			// A field a newer etcd might add: skipped, as protobuf does.
			b = protowire.AppendTag(b, 15, protowire.BytesType)
			b = protowire.AppendBytes(b, []byte("future"))
		}
		var want pb.RangeStreamResponse
		if err := proto.Unmarshal(b, &want); err != nil {
			t.Fatal(err)
		}
		got, ok, err := parseRangeStreamResponse(b, nil)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if ok != (want.RangeResponse != nil) {
			t.Fatalf("round %d: range response present %v, protobuf says %v", round, ok, want.RangeResponse != nil)
		}
		if want.RangeResponse == nil {
			continue
		}
		if len(got) != len(want.RangeResponse.Kvs) {
			t.Fatalf("round %d: %d key-values, protobuf %d", round, len(got), len(want.RangeResponse.Kvs))
		}
		for i, kv := range got {
			w := want.RangeResponse.Kvs[i]
			if !bytes.Equal(kv.Key, w.Key) || !bytes.Equal(kv.Value, w.Value) || kv.CreateRevision != w.CreateRevision ||
				kv.ModRevision != w.ModRevision || kv.Version != w.Version || kv.Lease != w.Lease {
				t.Fatalf("round %d, key %d: got %+v, protobuf %v", round, i, kv, w)
			}
		}
		if len(b) > 1 {
			cut := b[:1+rnd.Intn(len(b)-1)]
			if _, _, err := parseRangeStreamResponse(cut, nil); err == nil && proto.Unmarshal(cut, &pb.RangeStreamResponse{}) != nil {
				t.Fatalf("round %d: truncated at %d of %d bytes: no error, protobuf refuses it", round, len(cut), len(b))
			}
		}
	}
}
