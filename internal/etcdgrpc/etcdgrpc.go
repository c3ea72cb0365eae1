// Package etcdgrpc holds the gRPC settings Berth gives both ends of a
// networked etcd connection: the embedded member's server
// (internal/embedetcd) and every networked client (configs, the bench's
// fleet and tool).
//
// Why static flow-control windows: gRPC's default dynamic windows come
// with a bandwidth-delay estimator that, on every connection, answers the
// first data frame it receives after its last sample with an HTTP/2 PING
// and waits for the ACK. Berth's etcd traffic is mostly small messages
// one at a time (a fleet's lease renewals, the hosts' periodic reads),
// so nearly every message cost a PING and an ACK each way on top of
// itself: two more frames to write, read and wake a goroutine for, on
// both ends. With static windows there is no estimator and no PING.
//
// The windows are sized so that what Berth sends rarely waits on them:
// a stream's window holds a large list page or watch response whole (a
// window update goes back as its reader takes each quarter), and the
// connection's lets several such streams be in flight at once. A
// stream's window also bounds what its receiver buffers while its reader
// is behind, which is why it is not the estimator's largest (16 MiB).
package etcdgrpc

import "google.golang.org/grpc"

const (
	// StreamWindow is each stream's flow-control window, in bytes.
	StreamWindow = 1 << 20
	// ConnWindow is each connection's flow-control window, in bytes.
	ConnWindow = 4 << 20
)

// ServerOptions are the member's gRPC server options.
func ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.StaticStreamWindowSize(StreamWindow), grpc.StaticConnWindowSize(ConnWindow)}
}

// DialOptions are a networked client's gRPC dial options (clientv3's
// Config.DialOptions).
func DialOptions() []grpc.DialOption {
	return []grpc.DialOption{grpc.WithStaticStreamWindowSize(StreamWindow), grpc.WithStaticConnWindowSize(ConnWindow)}
}
