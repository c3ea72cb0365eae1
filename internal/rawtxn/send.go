package rawtxn

import (
	"context"
	"math"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
)

// Sender is a clientv3.KV that can also send a transaction as built.
// A wrapper implements it by doing for SendTxn what it does for a
// clientv3.Txn's Commit and passing r on with Commit(ctx, inner, r).
type Sender interface {
	SendTxn(ctx context.Context, r *pb.TxnRequest) (*clientv3.TxnResponse, error)
}

// Commit sends r through kv: as built when kv is a Sender, else through
// kv's clientv3.Txn (a conversion, with clientv3's copying). A
// *clientv3.Client stands for its KV. r must not be changed while Commit
// runs; etcd's answer is returned as clientv3's Commit returns it.
func Commit(ctx context.Context, kv clientv3.KV, r *pb.TxnRequest) (*clientv3.TxnResponse, error) {
	if c, ok := kv.(*clientv3.Client); ok {
		kv = c.KV
	}
	if s, ok := kv.(Sender); ok {
		return s.SendTxn(ctx, r)
	}
	return commitViaClientv3(ctx, kv, r)
}

// remoteKV is a client's own KV together with the pb.KVClient it sends
// through, so a transaction can be sent to that KVClient as built.
type remoteKV struct {
	clientv3.KV
	remote   pb.KVClient
	callOpts []grpc.CallOption
}

// NewKV is kv (a client's own, innermost KV) that also sends a
// transaction as built to remote, the pb.KVClient kv itself sends
// through, with kv's call options.
func NewKV(kv clientv3.KV, remote pb.KVClient, callOpts ...grpc.CallOption) clientv3.KV {
	return remoteKV{KV: kv, remote: remote, callOpts: callOpts}
}

// SendTxn is clientv3's txn.Commit without its building.
func (k remoteKV) SendTxn(ctx context.Context, r *pb.TxnRequest) (*clientv3.TxnResponse, error) {
	resp, err := k.remote.Txn(ctx, r, k.callOpts...)
	if err != nil {
		return nil, clientv3.ContextError(ctx, err)
	}
	return (*clientv3.TxnResponse)(resp), nil
}

// Networked makes cli, a client from clientv3.New(cfg), send raw
// transactions through clientv3.RetryKVClient(cli), which is what its
// KV sends through, with the call options clientv3.New gave it. It runs
// before cli is shared and before any other wrapper of cli.KV. A client
// without a connection (an in-process one) is left as it is.
func Networked(cli *clientv3.Client, cfg clientv3.Config) {
	if cli.ActiveConnection() == nil {
		return
	}
	cli.KV = NewKV(cli.KV, clientv3.RetryKVClient(cli), CallOptions(cfg)...)
}

// CallOptions are the gRPC call options clientv3.New gives a client's
// KV for cfg (client.go and options.go, defaultCallOpts): wait for a
// ready connection, and the message size limits, cfg's where set.
func CallOptions(cfg clientv3.Config) []grpc.CallOption {
	send, recv := 2*1024*1024, math.MaxInt32
	if cfg.MaxCallSendMsgSize > 0 {
		send = cfg.MaxCallSendMsgSize
	}
	if cfg.MaxCallRecvMsgSize > 0 {
		recv = cfg.MaxCallRecvMsgSize
	}
	return []grpc.CallOption{grpc.WaitForReady(true), grpc.MaxCallSendMsgSize(send), grpc.MaxCallRecvMsgSize(recv)}
}
