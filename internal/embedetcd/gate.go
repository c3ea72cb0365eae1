package embedetcd

import (
	"context"
	"errors"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/internal/rawtxn"
)

// ErrClosed is what the in-process client's KV calls return once the
// member is closing.
var ErrClosed = errors.New("embedded etcd: closed")

// gate counts the in-process client's KV calls in flight so Close can wait
// for them. The in-process client (v3client) calls the server's functions
// directly, bypassing the gRPC server that etcd's own Close drains, and a
// serializable read that runs while the backend closes dereferences a nil
// bbolt transaction and crashes the whole process.
//
// The gate also refuses a call whose context is already done, with the
// context's error, as the networked client does (gRPC sends nothing on a
// done context). Without it the in-process client answered such a call by
// chance: a linearizable read selects between its read notice and ctx.Done,
// and when both are ready (the read loop ran while the caller was
// descheduled) Go picks either, so a read (or, the same way, a write) that
// its caller had already given up on could still succeed. A caller that
// cancels (a leader that lost its term, a stopping role) must be able to
// count on "cancelled before the call" meaning "nothing was done".
type gate struct {
	mu     sync.Mutex
	n      int
	closed bool
	idle   chan struct{} // closed when closed and n reaches 0
}

func newGate() *gate { return &gate{idle: make(chan struct{})} }

func (g *gate) enter(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return ErrClosed
	}
	g.n++
	return nil
}

func (g *gate) exit() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.n--
	if g.closed && g.n == 0 {
		close(g.idle)
	}
}

// close refuses new calls and waits, up to max, for those in flight. A call
// stuck longer (a linearizable read waiting on a member that is stopping)
// is not worth hanging shutdown for.
func (g *gate) close(max time.Duration) {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return
	}
	g.closed = true
	if g.n == 0 {
		close(g.idle)
	}
	g.mu.Unlock()
	select {
	case <-g.idle:
	case <-time.After(max):
	}
}

// gatedKV passes every KV call through the gate.
type gatedKV struct {
	kv clientv3.KV
	g  *gate
}

func (k gatedKV) Put(ctx context.Context, key, val string, opts ...clientv3.OpOption) (*clientv3.PutResponse, error) {
	if err := k.g.enter(ctx); err != nil {
		return nil, err
	}
	defer k.g.exit()
	return k.kv.Put(ctx, key, val, opts...)
}

func (k gatedKV) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	if err := k.g.enter(ctx); err != nil {
		return nil, err
	}
	defer k.g.exit()
	return k.kv.Get(ctx, key, opts...)
}

func (k gatedKV) Delete(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.DeleteResponse, error) {
	if err := k.g.enter(ctx); err != nil {
		return nil, err
	}
	defer k.g.exit()
	return k.kv.Delete(ctx, key, opts...)
}

func (k gatedKV) Compact(ctx context.Context, rev int64, opts ...clientv3.CompactOption) (*clientv3.CompactResponse, error) {
	if err := k.g.enter(ctx); err != nil {
		return nil, err
	}
	defer k.g.exit()
	return k.kv.Compact(ctx, rev, opts...)
}

func (k gatedKV) Do(ctx context.Context, op clientv3.Op) (clientv3.OpResponse, error) {
	if err := k.g.enter(ctx); err != nil {
		return clientv3.OpResponse{}, err
	}
	defer k.g.exit()
	return k.kv.Do(ctx, op)
}

func (k gatedKV) Txn(ctx context.Context) clientv3.Txn {
	return gatedTxn{txn: k.kv.Txn(ctx), g: k.g, ctx: ctx}
}

// gatedTxn gates Commit, where a transaction's reads run; ctx is the one
// the transaction was made with, which Commit sends it under.
type gatedTxn struct {
	txn clientv3.Txn
	g   *gate
	ctx context.Context
}

func (t gatedTxn) If(cs ...clientv3.Cmp) clientv3.Txn {
	return gatedTxn{txn: t.txn.If(cs...), g: t.g, ctx: t.ctx}
}

func (t gatedTxn) Then(ops ...clientv3.Op) clientv3.Txn {
	return gatedTxn{txn: t.txn.Then(ops...), g: t.g, ctx: t.ctx}
}

func (t gatedTxn) Else(ops ...clientv3.Op) clientv3.Txn {
	return gatedTxn{txn: t.txn.Else(ops...), g: t.g, ctx: t.ctx}
}

func (t gatedTxn) Commit() (*clientv3.TxnResponse, error) {
	if err := t.g.enter(t.ctx); err != nil {
		return nil, err
	}
	defer t.g.exit()
	return t.txn.Commit()
}

// SendTxn gates a transaction sent as built (package rawtxn), as Commit
// gates a clientv3.Txn.
func (k gatedKV) SendTxn(ctx context.Context, r *pb.TxnRequest) (*clientv3.TxnResponse, error) {
	if err := k.g.enter(ctx); err != nil {
		return nil, err
	}
	defer k.g.exit()
	return rawtxn.Commit(ctx, k.kv, r)
}

// GetStream holds the gate until the stream's last chunk is delivered.
func (k gatedKV) GetStream(ctx context.Context, key string, opts ...clientv3.OpOption) (clientv3.GetStreamChan, error) {
	if err := k.g.enter(ctx); err != nil {
		return nil, err
	}
	in, err := k.kv.GetStream(ctx, key, opts...)
	if err != nil {
		k.g.exit()
		return nil, err
	}
	out := make(chan clientv3.RangeStreamResponse)
	go func() {
		defer k.g.exit()
		defer close(out)
		for r := range in {
			select {
			case out <- r:
			case <-ctx.Done():
				for range in {
				}
				return
			}
		}
	}()
	return out, nil
}
