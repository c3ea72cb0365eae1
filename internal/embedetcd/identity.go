package embedetcd

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/berth-project/berth/internal/rawtxn"
)

// identity makes the in-process client's requests those of the member's
// certificate, as a networked client presenting it would be: with etcd's
// auth enabled and client certificate auth on, etcd takes the user of a
// request from the common name of the client's verified certificate
// (authStore.AuthInfoFromTLS, reading the gRPC peer of the request's
// context). The in-process client has no connection, so no peer: without
// this, every one of its requests is anonymous and refused once auth is
// on (the member's /readyz among them). Each request's context gets a
// peer whose verified chain is the member's own certificate, already
// verified by etcd's listener configuration against the same CA, and the
// empty incoming metadata AuthInfoFromTLS wants. With auth off etcd reads
// neither.
type identity struct {
	peer *peer.Peer
}

// newIdentity reads the member's certificate; nil without TLS.
func newIdentity(certFile, keyFile string) (*identity, error) {
	if certFile == "" {
		return nil, nil
	}
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("embedded etcd: the member's certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("embedded etcd: the member's certificate: %w", err)
	}
	return &identity{peer: &peer.Peer{
		Addr:     &net.UnixAddr{Name: "in-process", Net: "unix"},
		AuthInfo: credentials.TLSInfo{State: tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{leaf}}}},
	}}, nil
}

func (id *identity) ctx(ctx context.Context) context.Context {
	ctx = peer.NewContext(ctx, id.peer)
	if _, ok := metadata.FromIncomingContext(ctx); !ok {
		ctx = metadata.NewIncomingContext(ctx, metadata.MD{})
	}
	return ctx
}

// wrap gives every call of cli's KV, Watcher, Lease and Maintenance the
// member's identity.
func (id *identity) wrap(cli *clientv3.Client) {
	cli.KV = idKV{kv: cli.KV, id: id}
	cli.Watcher = idWatcher{Watcher: cli.Watcher, id: id}
	cli.Lease = idLease{Lease: cli.Lease, id: id}
	cli.Maintenance = idMaintenance{Maintenance: cli.Maintenance, id: id}
}

type idKV struct {
	kv clientv3.KV
	id *identity
}

func (k idKV) Put(ctx context.Context, key, val string, opts ...clientv3.OpOption) (*clientv3.PutResponse, error) {
	return k.kv.Put(k.id.ctx(ctx), key, val, opts...)
}

func (k idKV) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	return k.kv.Get(k.id.ctx(ctx), key, opts...)
}

func (k idKV) GetStream(ctx context.Context, key string, opts ...clientv3.OpOption) (clientv3.GetStreamChan, error) {
	return k.kv.GetStream(k.id.ctx(ctx), key, opts...)
}

func (k idKV) Delete(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.DeleteResponse, error) {
	return k.kv.Delete(k.id.ctx(ctx), key, opts...)
}

func (k idKV) Compact(ctx context.Context, rev int64, opts ...clientv3.CompactOption) (*clientv3.CompactResponse, error) {
	return k.kv.Compact(k.id.ctx(ctx), rev, opts...)
}

func (k idKV) Do(ctx context.Context, op clientv3.Op) (clientv3.OpResponse, error) {
	return k.kv.Do(k.id.ctx(ctx), op)
}

func (k idKV) Txn(ctx context.Context) clientv3.Txn { return k.kv.Txn(k.id.ctx(ctx)) }

func (k idKV) SendTxn(ctx context.Context, r *pb.TxnRequest) (*clientv3.TxnResponse, error) {
	return rawtxn.Commit(k.id.ctx(ctx), k.kv, r)
}

type idWatcher struct {
	clientv3.Watcher
	id *identity
}

// Watch: the watch stream keeps the values of the first Watch's context
// (clientv3's valCtx), so its requests carry the identity too.
func (w idWatcher) Watch(ctx context.Context, key string, opts ...clientv3.OpOption) clientv3.WatchChan {
	return w.Watcher.Watch(w.id.ctx(ctx), key, opts...)
}

func (w idWatcher) RequestProgress(ctx context.Context) error {
	return w.Watcher.RequestProgress(w.id.ctx(ctx))
}

type idLease struct {
	clientv3.Lease
	id *identity
}

func (l idLease) Grant(ctx context.Context, ttl int64) (*clientv3.LeaseGrantResponse, error) {
	return l.Lease.Grant(l.id.ctx(ctx), ttl)
}

func (l idLease) Revoke(ctx context.Context, id clientv3.LeaseID) (*clientv3.LeaseRevokeResponse, error) {
	return l.Lease.Revoke(l.id.ctx(ctx), id)
}

func (l idLease) TimeToLive(ctx context.Context, id clientv3.LeaseID, opts ...clientv3.LeaseOption) (*clientv3.LeaseTimeToLiveResponse, error) {
	return l.Lease.TimeToLive(l.id.ctx(ctx), id, opts...)
}

func (l idLease) Leases(ctx context.Context) (*clientv3.LeaseLeasesResponse, error) {
	return l.Lease.Leases(l.id.ctx(ctx))
}

func (l idLease) KeepAlive(ctx context.Context, id clientv3.LeaseID) (<-chan *clientv3.LeaseKeepAliveResponse, error) {
	return l.Lease.KeepAlive(l.id.ctx(ctx), id)
}

func (l idLease) KeepAliveOnce(ctx context.Context, id clientv3.LeaseID) (*clientv3.LeaseKeepAliveResponse, error) {
	return l.Lease.KeepAliveOnce(l.id.ctx(ctx), id)
}

type idMaintenance struct {
	clientv3.Maintenance
	id *identity
}

func (m idMaintenance) AlarmList(ctx context.Context) (*clientv3.AlarmResponse, error) {
	return m.Maintenance.AlarmList(m.id.ctx(ctx))
}

func (m idMaintenance) AlarmDisarm(ctx context.Context, am *clientv3.AlarmMember) (*clientv3.AlarmResponse, error) {
	return m.Maintenance.AlarmDisarm(m.id.ctx(ctx), am)
}

func (m idMaintenance) Status(ctx context.Context, endpoint string) (*clientv3.StatusResponse, error) {
	return m.Maintenance.Status(m.id.ctx(ctx), endpoint)
}

func (m idMaintenance) Defragment(ctx context.Context, endpoint string) (*clientv3.DefragmentResponse, error) {
	return m.Maintenance.Defragment(m.id.ctx(ctx), endpoint)
}
