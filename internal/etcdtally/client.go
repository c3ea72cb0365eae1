package etcdtally

import (
	"context"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/internal/rawtxn"
	"github.com/berth-project/berth/internal/rolelabel"
)

// Wrap makes cli's KV and Watcher count into t. name is what a request
// whose context carries no role is counted under. It must run before any
// goroutine uses cli (it replaces cli's fields), as embedded etcd's and
// the stack's own wrapping do.
func Wrap(cli *clientv3.Client, t *Tally, name string) {
	fallback := name + " (no role in ctx)"
	cli.KV = countedKV{kv: cli.KV, t: t, fallback: fallback}
	cli.Watcher = countedWatcher{Watcher: cli.Watcher, t: t, fallback: fallback}
}

func roleOf(ctx context.Context, fallback string) string {
	if r := rolelabel.Of(ctx); r != "" {
		return r
	}
	return fallback
}

type countedKV struct {
	kv       clientv3.KV
	t        *Tally
	fallback string
}

func (k countedKV) Put(ctx context.Context, key, val string, opts ...clientv3.OpOption) (*clientv3.PutResponse, error) {
	k.t.add(roleOf(ctx, k.fallback), Put, 1)
	return k.kv.Put(ctx, key, val, opts...)
}

func (k countedKV) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	role := roleOf(ctx, k.fallback)
	k.t.add(role, Range, 1)
	r, err := k.kv.Get(ctx, key, opts...)
	if err == nil {
		k.t.add(role, RangeKeys, int64(len(r.Kvs)))
	}
	return r, err
}

// GetStream counts the request, not the keys: they arrive as the
// consumer drains the stream.
func (k countedKV) GetStream(ctx context.Context, key string, opts ...clientv3.OpOption) (clientv3.GetStreamChan, error) {
	k.t.add(roleOf(ctx, k.fallback), Range, 1)
	return k.kv.GetStream(ctx, key, opts...)
}

func (k countedKV) Delete(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.DeleteResponse, error) {
	k.t.add(roleOf(ctx, k.fallback), Delete, 1)
	return k.kv.Delete(ctx, key, opts...)
}

func (k countedKV) Compact(ctx context.Context, rev int64, opts ...clientv3.CompactOption) (*clientv3.CompactResponse, error) {
	k.t.add(roleOf(ctx, k.fallback), OtherRequest, 1)
	return k.kv.Compact(ctx, rev, opts...)
}

func (k countedKV) Do(ctx context.Context, op clientv3.Op) (clientv3.OpResponse, error) {
	role := roleOf(ctx, k.fallback)
	switch {
	case op.IsGet():
		k.t.add(role, Range, 1)
	case op.IsPut():
		k.t.add(role, Put, 1)
	case op.IsDelete():
		k.t.add(role, Delete, 1)
	case op.IsTxn():
		k.t.add(role, Txn, 1)
	default:
		k.t.add(role, OtherRequest, 1)
	}
	r, err := k.kv.Do(ctx, op)
	if err == nil {
		if g := r.Get(); g != nil {
			k.t.add(role, RangeKeys, int64(len(g.Kvs)))
		}
		if tr := r.Txn(); tr != nil {
			cmps, thenOps, elseOps := op.Txn()
			k.t.countTxn(role, cmps, thenOps, elseOps, tr)
		}
	}
	return r, err
}

func (k countedKV) Txn(ctx context.Context) clientv3.Txn {
	return &countedTxn{txn: k.kv.Txn(ctx), t: k.t, role: roleOf(ctx, k.fallback)}
}

// countedTxn keeps the transaction's compares and branches so that, once
// the server answers, what it ran is counted: the compares, and the
// operations of the branch that ran (a nested txn's the same way).
type countedTxn struct {
	txn             clientv3.Txn
	t               *Tally
	role            string
	cmps            []clientv3.Cmp
	thenOps, elseOp []clientv3.Op
}

func (c *countedTxn) If(cs ...clientv3.Cmp) clientv3.Txn {
	c.cmps = append(c.cmps, cs...)
	c.txn = c.txn.If(cs...)
	return c
}

func (c *countedTxn) Then(ops ...clientv3.Op) clientv3.Txn {
	c.thenOps = append(c.thenOps, ops...)
	c.txn = c.txn.Then(ops...)
	return c
}

func (c *countedTxn) Else(ops ...clientv3.Op) clientv3.Txn {
	c.elseOp = append(c.elseOp, ops...)
	c.txn = c.txn.Else(ops...)
	return c
}

func (c *countedTxn) Commit() (*clientv3.TxnResponse, error) {
	c.t.add(c.role, Txn, 1)
	r, err := c.txn.Commit()
	if err == nil {
		c.t.countTxn(c.role, c.cmps, c.thenOps, c.elseOp, r)
	}
	return r, err
}

// SendTxn counts a transaction sent as built (package rawtxn) as Commit
// counts a clientv3.Txn.
func (k countedKV) SendTxn(ctx context.Context, r *pb.TxnRequest) (*clientv3.TxnResponse, error) {
	role := roleOf(ctx, k.fallback)
	k.t.add(role, Txn, 1)
	resp, err := rawtxn.Commit(ctx, k.kv, r)
	if err == nil {
		k.t.countRawTxn(role, r, (*pb.TxnResponse)(resp))
	}
	return resp, err
}

// countTxn counts what the server ran of a transaction it answered.
func (t *Tally) countTxn(role string, cmps []clientv3.Cmp, thenOps, elseOps []clientv3.Op, r *clientv3.TxnResponse) {
	t.add(role, TxnCompare, int64(len(cmps)))
	ops := thenOps
	if !r.Succeeded {
		t.add(role, TxnFailed, 1)
		ops = elseOps
	}
	t.countResponses(role, r.Responses, func(i int, nested *pb.TxnResponse) {
		if i < len(ops) {
			cmps, thenOps, elseOps := ops[i].Txn()
			t.countTxn(role, cmps, thenOps, elseOps, (*clientv3.TxnResponse)(nested))
		}
	})
}

// countRawTxn is countTxn for a transaction built as etcdserverpb
// messages.
func (t *Tally) countRawTxn(role string, req *pb.TxnRequest, r *pb.TxnResponse) {
	t.add(role, TxnCompare, int64(len(req.Compare)))
	ops := req.Success
	if !r.Succeeded {
		t.add(role, TxnFailed, 1)
		ops = req.Failure
	}
	t.countResponses(role, r.Responses, func(i int, nested *pb.TxnResponse) {
		if i < len(ops) {
			if sub := ops[i].GetRequestTxn(); sub != nil {
				t.countRawTxn(role, sub, nested)
			}
		}
	})
}

// countResponses counts the operations the server ran, by their
// responses; nested(i, r) counts the i-th's, a nested transaction.
func (t *Tally) countResponses(role string, resps []*pb.ResponseOp, nested func(i int, r *pb.TxnResponse)) {
	for i, ro := range resps {
		switch v := ro.Response.(type) {
		case *pb.ResponseOp_ResponseRange:
			t.add(role, TxnRange, 1)
			t.add(role, RangeKeys, int64(len(v.ResponseRange.Kvs)))
		case *pb.ResponseOp_ResponsePut:
			t.add(role, TxnPut, 1)
		case *pb.ResponseOp_ResponseDeleteRange:
			t.add(role, TxnDelete, 1)
		case *pb.ResponseOp_ResponseTxn:
			nested(i, v.ResponseTxn)
		}
	}
}

// countedWatcher counts the watches opened and what they deliver. Each
// watch gets a goroutine that forwards its responses, counting them: the
// cost of the tally, paid only when it is on.
type countedWatcher struct {
	clientv3.Watcher
	t        *Tally
	fallback string
}

func (w countedWatcher) Watch(ctx context.Context, key string, opts ...clientv3.OpOption) clientv3.WatchChan {
	role := roleOf(ctx, w.fallback)
	w.t.add(role, WatchOpen, 1)
	in := w.Watcher.Watch(ctx, key, opts...)
	out := make(chan clientv3.WatchResponse)
	go func() {
		defer close(out)
		for resp := range in {
			w.t.add(role, WatchResp, 1)
			w.t.add(role, WatchEvents, int64(len(resp.Events)))
			select {
			case out <- resp:
			case <-ctx.Done():
				// The consumer has gone; drain so the watcher can close.
				for range in {
				}
				return
			}
		}
	}()
	return out
}
