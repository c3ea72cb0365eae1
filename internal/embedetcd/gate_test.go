package embedetcd

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/internal/rawtxn"
)

// TestGateRefusesDoneContext: every KV call of the in-process client whose
// context is already cancelled or past its deadline fails with that
// context's error and changes nothing, as the networked client's would.
// Before the gate checked, a linearizable read here succeeded or failed at
// Go's choice between two ready select cases (TestInstrumentKV's flake).
func TestGateRefusesDoneContext(t *testing.T) {
	srv, err := Start(Config{DataDir: t.TempDir(),
		ClientURL: fmt.Sprintf("http://127.0.0.1:%d", freePort(t)),
		PeerURL:   fmt.Sprintf("http://127.0.0.1:%d", freePort(t))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	kv := srv.Client().KV
	if _, ok := kv.(rawtxn.Sender); !ok {
		t.Fatal("the in-process client's KV sends no transaction as built")
	}
	bg := context.Background()
	put, err := kv.Put(bg, "k", "v")
	if err != nil {
		t.Fatal(err)
	}
	rev := put.Header.Revision

	cancelled, cancel := context.WithCancel(bg)
	cancel()
	expired, cancelExpired := context.WithDeadline(bg, time.Now().Add(-time.Second))
	defer cancelExpired()

	calls := []struct {
		desc string
		call func(ctx context.Context) error
	}{
		{"linearizable get", func(ctx context.Context) error { _, err := kv.Get(ctx, "k"); return err }},
		{"serializable get", func(ctx context.Context) error {
			_, err := kv.Get(ctx, "k", clientv3.WithSerializable())
			return err
		}},
		{"put", func(ctx context.Context) error { _, err := kv.Put(ctx, "k", "changed"); return err }},
		{"delete", func(ctx context.Context) error { _, err := kv.Delete(ctx, "k"); return err }},
		{"do", func(ctx context.Context) error { _, err := kv.Do(ctx, clientv3.OpPut("k", "changed")); return err }},
		{"txn", func(ctx context.Context) error {
			_, err := kv.Txn(ctx).If(clientv3.Compare(clientv3.Value("k"), "=", "v")).
				Then(clientv3.OpPut("k", "changed")).Commit()
			return err
		}},
		{"raw txn", func(ctx context.Context) error {
			_, err := rawtxn.Commit(ctx, kv, &pb.TxnRequest{Compare: []*pb.Compare{rawtxn.ModRevisionIs("k", rev)},
				Success: []*pb.RequestOp{rawtxn.Put("k", "changed")}})
			return err
		}},
		{"compact", func(ctx context.Context) error { _, err := kv.Compact(ctx, rev); return err }},
		{"get stream", func(ctx context.Context) error { _, err := kv.GetStream(ctx, "k"); return err }},
	}
	for _, done := range []struct {
		name string
		ctx  context.Context
		want error
	}{{"cancelled", cancelled, context.Canceled}, {"past deadline", expired, context.DeadlineExceeded}} {
		for _, c := range calls {
			if err := c.call(done.ctx); !errors.Is(err, done.want) {
				t.Errorf("%s with a %s context: %v, want %v", c.desc, done.name, err, done.want)
			}
		}
	}
	got, err := kv.Get(bg, "k")
	if err != nil {
		t.Fatal(err)
	}
	if got.Header.Revision != rev || len(got.Kvs) != 1 || string(got.Kvs[0].Value) != "v" {
		t.Errorf("after the refused calls: revision %d, %v; want revision %d and k=v unchanged",
			got.Header.Revision, got.Kvs, rev)
	}
	// A refused call never entered the gate, or Close would wait for it.
	srv.gate.mu.Lock()
	inFlight := srv.gate.n
	srv.gate.mu.Unlock()
	if inFlight != 0 {
		t.Errorf("%d calls in flight in the gate after the refused calls returned, want 0", inFlight)
	}
}
