// Package embedetcd runs an etcd member inside a Berth process: a single
// member for `berth dev`, an all-in-one server and tests, or one member of
// a cluster (`berth etcd`, InitialCluster set). It always runs with periodic
// auto-compaction: Berth writes claims at thousands per second, and etcd
// refuses writes once its backend reaches its quota.
//
// The process's roles reach the member through in-process clients
// (Client, NewClient: no gRPC over loopback); other processes, the
// agents among them, through ClientURL. A harness in the same process
// (the load tool) may also read the member directly: its write history
// (History) and one ordered watch stream over several prefixes
// (WatchClient), so that measuring Berth costs the member little while
// it is measured.
package embedetcd

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3client"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3rpc"
	"go.etcd.io/etcd/server/v3/proxy/grpcproxy/adapter"
	"google.golang.org/grpc"

	"github.com/berth-project/berth/internal/etcdcluster"
	"github.com/berth-project/berth/internal/etcdgrpc"
	"github.com/berth-project/berth/internal/rawtxn"
)

// Config says where the member keeps its data and listens.
type Config struct {
	Name      string // member name; "berth" when empty
	DataDir   string
	ClientURL string // e.g. http://127.0.0.1:2379
	PeerURL   string // e.g. http://127.0.0.1:2380
	// AutoCompactionRetention keeps this much history; 0 means 5m.
	AutoCompactionRetention time.Duration
	// QuotaBackendBytes is the backend size limit; 0 means etcd's default.
	QuotaBackendBytes int64
	// InitialCluster lists every member as "name=peerURL,..." when this
	// member is one of a cluster; empty means a cluster of this member
	// alone. Used only when the data directory is new.
	InitialCluster string
	// InitialClusterState is "new" when the members bootstrap together
	// and "existing" when this member joins a running cluster (after
	// `etcdctl member add`); empty means "new".
	InitialClusterState string
	// StartTimeout bounds how long Start waits for the member; 0 means
	// 60s. A member of a cluster is ready only once a quorum is up, so the
	// etcd role waits longer.
	StartTimeout time.Duration
	// Logger receives etcd's own log records (slow disk, late heartbeats,
	// leader changes, lost peers, quota exceeded) as hclog lines; nil
	// discards them, which tests that do not look at etcd want.
	Logger hclog.Logger
	// LogLevel is the least severe of etcd's records that reach Logger:
	// one of LogLevels, DefaultLogLevel when empty. It is separate from
	// Logger's own level because etcd at info is chatty (some fifty lines
	// at start-up, more at every compaction).
	LogLevel string
	// HeartbeatInterval and ElectionTimeout are raft's timing, in whole
	// milliseconds; zero keeps etcd's own (100ms and 1s).
	HeartbeatInterval time.Duration
	ElectionTimeout   time.Duration
	// TLS, when CertFile is set, serves the client and peer URLs (both
	// https) with CertFile and KeyFile and requires every client and peer
	// to present a certificate chaining to TrustedCAFile (etcd's
	// --client-cert-auth and --peer-client-cert-auth): a lab certificate
	// is both a server's and a client's (package tlsgen). etcd reads the
	// files at every handshake, so a renewed certificate is served
	// without a restart.
	TLS TLSFiles

	// tune changes etcd's config last: the settings benchmark's variants
	// (settings_bench_test.go), never a deployment.
	tune func(*embed.Config)
}

// TLSFiles are the member's PEM files.
type TLSFiles struct {
	CertFile, KeyFile, TrustedCAFile string
}

// clientConfig is how the member's in-process client reaches the other
// members (maintenance calls that name one): with its certificate,
// verifying theirs; nil without TLS.
func (f TLSFiles) clientConfig() (*tls.Config, error) {
	if f.CertFile == "" {
		return nil, nil
	}
	info := transport.TLSInfo{CertFile: f.CertFile, KeyFile: f.KeyFile, TrustedCAFile: f.TrustedCAFile}
	tc, err := info.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("embedded etcd: TLS to the other members: %w", err)
	}
	return tc, nil
}

// Server is a running embedded member.
type Server struct {
	etcd   *embed.Etcd
	client *clientv3.Client
	gate   *gate
	url    string
	// wrap makes a v3client what Client returns (identity, gate,
	// maintenance, lease server).
	wrap func(*clientv3.Client)
	// closeOnce: a test closes the member to simulate an outage and its
	// cleanup closes it again; etcd's own Close panics the second time.
	closeOnce sync.Once
	// closing tells etcd's logger that listeners reporting they closed
	// are Berth's doing, not a failure.
	closing *atomic.Bool
}

// grpcStreamWorkers is how many goroutines of the member's gRPC server
// stay to serve the streams of its networked clients (agents, other
// processes' roles) one after another. Without them gRPC starts a
// goroutine per stream, i.e. per unary Range, Txn or Put, and each grows
// its stack again under the request's decode and apply (runtime.newstack
// and copystack were ~0.4 s of the etcd server's CPU in a 10,000-host
// boot). A worker keeps its grown stack until a collection shrinks it.
// A long-lived stream (a Watch, a LeaseKeepAlive) holds its worker for
// its life; when every worker is busy gRPC starts a goroutine for the
// stream as before, so this bounds nothing.
const grpcStreamWorkers = 64

// Start starts the member and waits until it serves.
func Start(cfg Config) (*Server, error) { return StartContext(context.Background(), cfg) }

// StartContext is Start that gives up when ctx ends, so that a member
// waiting for its peers stops on Ctrl-C.
func StartContext(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.DataDir == "" {
		return nil, fmt.Errorf("embedded etcd: data_dir is required")
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("embedded etcd: create data dir: %w", err)
	}
	ec := embed.NewConfig()
	ec.Name = cfg.Name
	if ec.Name == "" {
		ec.Name = "berth"
	}
	ec.Dir = cfg.DataDir
	cu, err := url.Parse(cfg.ClientURL)
	if err != nil || cu.Host == "" {
		return nil, fmt.Errorf("embedded etcd: client_url %q is not a URL like http://127.0.0.1:2379", cfg.ClientURL)
	}
	pu, err := url.Parse(cfg.PeerURL)
	if err != nil || pu.Host == "" {
		return nil, fmt.Errorf("embedded etcd: peer_url %q is not a URL like http://127.0.0.1:2380", cfg.PeerURL)
	}
	if cfg.TLS.CertFile != "" {
		info := transport.TLSInfo{CertFile: cfg.TLS.CertFile, KeyFile: cfg.TLS.KeyFile,
			TrustedCAFile: cfg.TLS.TrustedCAFile, ClientCertAuth: true}
		ec.ClientTLSInfo, ec.PeerTLSInfo = info, info
	}
	ec.ListenClientUrls = []url.URL{*cu}
	ec.AdvertiseClientUrls = []url.URL{*cu}
	ec.ListenPeerUrls = []url.URL{*pu}
	ec.AdvertisePeerUrls = []url.URL{*pu}
	ec.InitialCluster = fmt.Sprintf("%s=%s", ec.Name, pu.String())
	if cfg.InitialCluster != "" {
		if err := etcdcluster.Check(cfg.InitialCluster, ec.Name, pu.String()); err != nil {
			return nil, fmt.Errorf("embedded etcd: %w", err)
		}
		ec.InitialCluster = cfg.InitialCluster
	}
	switch cfg.InitialClusterState {
	case "", embed.ClusterStateFlagNew:
		ec.ClusterState = embed.ClusterStateFlagNew
	case embed.ClusterStateFlagExisting:
		ec.ClusterState = embed.ClusterStateFlagExisting
	default:
		return nil, fmt.Errorf("embedded etcd: initial_cluster_state %q is not \"new\" or \"existing\"", cfg.InitialClusterState)
	}
	if cfg.HeartbeatInterval > 0 {
		ec.TickMs = uint(cfg.HeartbeatInterval / time.Millisecond)
	}
	if cfg.ElectionTimeout > 0 {
		ec.ElectionMs = uint(cfg.ElectionTimeout / time.Millisecond)
	}
	ec.AutoCompactionMode = "periodic"
	retention := cfg.AutoCompactionRetention
	if retention <= 0 {
		retention = 5 * time.Minute
	}
	ec.AutoCompactionRetention = retention.String()
	if cfg.QuotaBackendBytes > 0 {
		ec.QuotaBackendBytes = cfg.QuotaBackendBytes
	}
	ec.LogLevel = cfg.LogLevel
	if ec.LogLevel == "" {
		ec.LogLevel = DefaultLogLevel
	}
	closing := new(atomic.Bool)
	lg, err := newZapLogger(cfg.Logger, ec.LogLevel, closing)
	if err != nil {
		return nil, fmt.Errorf("embedded etcd: %w", err)
	}
	ec.Logger = "zap"
	// LogOutputs is unused with a ZapLoggerBuilder; etcd still checks it.
	ec.LogOutputs = []string{"stderr"}
	ec.ZapLoggerBuilder = embed.NewZapLoggerBuilder(lg)
	ec.GRPCAdditionalServerOptions = append(ec.GRPCAdditionalServerOptions, grpc.NumStreamWorkers(grpcStreamWorkers))
	// Static flow-control windows: no bandwidth-estimator PING per
	// small message (package etcdgrpc; its clients dial with the same).
	ec.GRPCAdditionalServerOptions = append(ec.GRPCAdditionalServerOptions, etcdgrpc.ServerOptions()...)

	if cfg.tune != nil {
		cfg.tune(ec)
	}
	id, err := newIdentity(cfg.TLS.CertFile, cfg.TLS.KeyFile)
	if err != nil {
		return nil, err
	}
	peerTLS, err := cfg.TLS.clientConfig()
	if err != nil {
		return nil, err
	}
	e, err := embed.StartEtcd(ec)
	if err != nil {
		return nil, fmt.Errorf("embedded etcd: start in %s: %w", cfg.DataDir, err)
	}
	timeout := cfg.StartTimeout
	if timeout <= 0 {
		timeout = 60 * time.Second
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(timeout):
		closing.Store(true)
		e.Server.Stop()
		e.Close()
		return nil, fmt.Errorf("embedded etcd: not ready after %s (a member of a cluster needs a quorum of its peers up)", timeout)
	case <-ctx.Done():
		closing.Store(true)
		e.Server.Stop()
		e.Close()
		return nil, fmt.Errorf("embedded etcd: stopped while waiting to be ready: %w", ctx.Err())
	case err := <-e.Err():
		closing.Store(true)
		e.Close()
		return nil, fmt.Errorf("embedded etcd: %w", err)
	}
	g := newGate()
	s := &Server{etcd: e, gate: g, url: cu.String(), closing: closing}
	// What v3client's KV sends through, for transactions sent as built
	// (package rawtxn).
	kvc := adapter.KvServerToKvClient(v3rpc.NewQuotaKVServer(e.Server))
	s.wrap = func(cli *clientv3.Client) {
		cli.KV = rawtxn.NewKV(cli.KV, kvc)
		if id != nil {
			id.wrap(cli)
		}
		cli.KV = gatedKV{kv: cli.KV, g: g}
		cli.Maintenance = maintenance{Maintenance: cli.Maintenance, srv: e.Server, url: cu.String(), tls: peerTLS}
		cli.Lease = leaseWithServer{Lease: cli.Lease,
			lc: adapter.LeaseServerToLeaseClient(v3rpc.NewQuotaLeaseServer(e.Server))}
	}
	s.client = s.NewClient()
	return s, nil
}

// NewClient is another in-process client of the member, as Client is,
// for roles of the same process that close their client on their own
// (the load tool's scheduler stacks: a crash closes its client, not the
// member's). Close it before the member.
func (s *Server) NewClient() *clientv3.Client {
	cli := v3client.New(s.etcd.Server)
	s.wrap(cli)
	return cli
}

// leaseWithServer is the in-process client's Lease, which also hands out
// the lease server it calls (LeaseClient): the in-process client has no
// gRPC connection, and agent.LeaseRenewer opens its one long-lived
// keepalive stream on this instead.
type leaseWithServer struct {
	clientv3.Lease
	lc pb.LeaseClient
}

// LeaseClient is the member's lease server as a client.
func (l leaseWithServer) LeaseClient() pb.LeaseClient { return l.lc }

// Client is an in-process client: no gRPC over loopback, which the design
// measured 1.5-2x faster than a networked client.
func (s *Server) Client() *clientv3.Client { return s.client }

// ClientURL is the URL other processes (and etcdctl) use.
func (s *Server) ClientURL() string { return s.url }

// Err reports a fatal member error.
func (s *Server) Err() <-chan error { return s.etcd.Err() }

// Close stops the member and waits for it.
func (s *Server) Close() {
	if s == nil {
		return
	}
	s.closeOnce.Do(func() {
		// In-process reads must be out of the server before its backend
		// closes (see gate).
		s.closing.Store(true)
		s.gate.close(5 * time.Second)
		s.client.Close()
		s.etcd.Close()
		<-s.etcd.Server.StopNotify()
	})
}

// Ping checks the member answers a linearizable read.
func (s *Server) Ping(ctx context.Context) error {
	_, err := s.client.Get(ctx, "health")
	return err
}
