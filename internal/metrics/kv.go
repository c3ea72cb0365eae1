package metrics

import (
	"context"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/internal/rawtxn"
)

// InstrumentKV wraps kv so every request's latency is observed in
// berth_etcd_request_duration_seconds. It is meant for a client's KV field
// (cli.KV = m.InstrumentKV(cli.KV)), set before the client is shared, so
// that the in-process client of embedded etcd (already wrapped by
// embedetcd's gate) and networked clients are measured the same way. With
// a nil m, kv is returned as is.
func (m *Metrics) InstrumentKV(kv clientv3.KV) clientv3.KV {
	if m == nil {
		return kv
	}
	return timedKV{kv: kv, m: m}
}

type timedKV struct {
	kv clientv3.KV
	m  *Metrics
}

func (k timedKV) Put(ctx context.Context, key, val string, opts ...clientv3.OpOption) (*clientv3.PutResponse, error) {
	start := time.Now()
	r, err := k.kv.Put(ctx, key, val, opts...)
	k.m.observeEtcd("put", start, err)
	return r, err
}

func (k timedKV) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	start := time.Now()
	r, err := k.kv.Get(ctx, key, opts...)
	k.m.observeEtcd("get", start, err)
	return r, err
}

// GetStream observes the time to open the stream, not to drain it: the
// consumer's pace is not etcd's latency.
func (k timedKV) GetStream(ctx context.Context, key string, opts ...clientv3.OpOption) (clientv3.GetStreamChan, error) {
	start := time.Now()
	r, err := k.kv.GetStream(ctx, key, opts...)
	k.m.observeEtcd("get_stream", start, err)
	return r, err
}

func (k timedKV) Delete(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.DeleteResponse, error) {
	start := time.Now()
	r, err := k.kv.Delete(ctx, key, opts...)
	k.m.observeEtcd("delete", start, err)
	return r, err
}

func (k timedKV) Compact(ctx context.Context, rev int64, opts ...clientv3.CompactOption) (*clientv3.CompactResponse, error) {
	start := time.Now()
	r, err := k.kv.Compact(ctx, rev, opts...)
	k.m.observeEtcd("compact", start, err)
	return r, err
}

func (k timedKV) Do(ctx context.Context, op clientv3.Op) (clientv3.OpResponse, error) {
	start := time.Now()
	r, err := k.kv.Do(ctx, op)
	k.m.observeEtcd("do", start, err)
	return r, err
}

func (k timedKV) Txn(ctx context.Context) clientv3.Txn {
	return timedTxn{txn: k.kv.Txn(ctx), m: k.m}
}

// timedTxn times Commit, where the transaction is sent.
type timedTxn struct {
	txn clientv3.Txn
	m   *Metrics
}

func (t timedTxn) If(cs ...clientv3.Cmp) clientv3.Txn {
	return timedTxn{txn: t.txn.If(cs...), m: t.m}
}

func (t timedTxn) Then(ops ...clientv3.Op) clientv3.Txn {
	return timedTxn{txn: t.txn.Then(ops...), m: t.m}
}

func (t timedTxn) Else(ops ...clientv3.Op) clientv3.Txn {
	return timedTxn{txn: t.txn.Else(ops...), m: t.m}
}

func (t timedTxn) Commit() (*clientv3.TxnResponse, error) {
	start := time.Now()
	r, err := t.txn.Commit()
	t.m.observeEtcd("txn", start, err)
	return r, err
}

// SendTxn times a transaction sent as built (package rawtxn) as Commit
// times a clientv3.Txn.
func (k timedKV) SendTxn(ctx context.Context, r *pb.TxnRequest) (*clientv3.TxnResponse, error) {
	start := time.Now()
	resp, err := rawtxn.Commit(ctx, k.kv, r)
	k.m.observeEtcd("txn", start, err)
	return resp, err
}
