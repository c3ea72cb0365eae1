package embedetcd

import (
	"context"
	"crypto/tls"
	"fmt"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/etcdserver"
)

// maintenance is the in-process client's maintenance API, fixed for the
// calls that name a member (Status, Defragment):
//
//   - etcd's in-process client answers them from this member whatever
//     endpoint is named, so with this member one of a cluster, the leader's
//     etcd space duty would read this member's status as every member's and
//     defragment it three times. An endpoint other than this member's own
//     is asked over the network instead.
//   - its Defragment panics (etcd v3.7.3 builds the in-process maintenance
//     server without the health notifier Defragment calls), so this
//     member's defragmentation calls the server directly, as the gRPC
//     maintenance server does.
type maintenance struct {
	clientv3.Maintenance
	srv *etcdserver.EtcdServer
	url string      // this member's client URL
	tls *tls.Config // to the other members; nil: plain HTTP
}

// netTimeout bounds dialling another member for one call.
const netTimeout = 5 * time.Second

// remote runs call with a client of endpoint alone, closed after.
func remote[T any](ctx context.Context, endpoint string, tc *tls.Config, call func(clientv3.Maintenance) (T, error)) (T, error) {
	var zero T
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: netTimeout, Context: ctx, TLS: tc})
	if err != nil {
		return zero, fmt.Errorf("dial etcd member %s: %w", endpoint, err)
	}
	defer cli.Close()
	return call(cli.Maintenance)
}

func (m maintenance) Status(ctx context.Context, endpoint string) (*clientv3.StatusResponse, error) {
	if endpoint != m.url {
		return remote(ctx, endpoint, m.tls, func(mt clientv3.Maintenance) (*clientv3.StatusResponse, error) {
			return mt.Status(ctx, endpoint)
		})
	}
	return m.Maintenance.Status(ctx, endpoint)
}

func (m maintenance) Defragment(ctx context.Context, endpoint string) (*clientv3.DefragmentResponse, error) {
	if endpoint != m.url {
		return remote(ctx, endpoint, m.tls, func(mt clientv3.Maintenance) (*clientv3.DefragmentResponse, error) {
			return mt.Defragment(ctx, endpoint)
		})
	}
	if err := m.srv.Defragment(); err != nil {
		return nil, fmt.Errorf("defragment: %w", err)
	}
	return &clientv3.DefragmentResponse{Header: &pb.ResponseHeader{
		ClusterId: uint64(m.srv.Cluster().ID()), MemberId: uint64(m.srv.MemberID())}}, nil
}
