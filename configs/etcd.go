package configs

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/berth-project/berth/internal/embedetcd"
	"github.com/berth-project/berth/internal/etcdgrpc"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// ClientConfig is the clientv3 configuration for reaching this etcd: the
// external endpoints, or the embedded member's client_url (for processes
// other than the one embedding it, which should use its in-process client).
// TLS files are read here, not at parse time, so configs validate on any
// machine; errors name the file.
func (e *Etcd) ClientConfig() (clientv3.Config, error) {
	cfg := clientv3.Config{
		Endpoints:   e.Endpoints,
		DialTimeout: e.DialTimeout,
		Username:    e.Username,
		Password:    e.Password,
		DialOptions: etcdgrpc.DialOptions(),
	}
	if len(cfg.Endpoints) == 0 && e.Embedded != nil {
		cfg.Endpoints = []string{e.Embedded.ClientURL}
	}
	if len(cfg.Endpoints) == 0 {
		return clientv3.Config{}, fmt.Errorf("etcd client: no endpoints and no embedded etcd")
	}
	if e.TLS != nil {
		tc, err := e.TLS.clientTLS()
		if err != nil {
			return clientv3.Config{}, fmt.Errorf("etcd client: %w", err)
		}
		cfg.TLS = tc
	}
	return cfg, nil
}

func (t *TLS) clientTLS() (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("read ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("ca_file %s: no PEM certificates found", t.CAFile)
		}
		tc.RootCAs = pool
	}
	if t.CertFile != "" || t.KeyFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("load cert_file %s and key_file %s: %w", t.CertFile, t.KeyFile, err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// EmbedConfig is the embedetcd configuration for this member; the caller
// sets its Logger (the role's logger) for etcd's records to reach the log.
func (m *Embedded) EmbedConfig() embedetcd.Config {
	return embedetcd.Config{
		Name:                    m.Name,
		DataDir:                 m.DataDir,
		ClientURL:               m.ClientURL,
		PeerURL:                 m.PeerURL,
		AutoCompactionRetention: m.AutoCompactionRetention,
		QuotaBackendBytes:       m.QuotaBackendBytes,
		InitialCluster:          m.InitialCluster,
		InitialClusterState:     m.InitialClusterState,
		StartTimeout:            m.startTimeout(),
		LogLevel:                m.LogLevel,
		HeartbeatInterval:       m.HeartbeatInterval,
		ElectionTimeout:         m.ElectionTimeout,
		TLS:                     m.tlsFiles(),
	}
}

func (m *Embedded) tlsFiles() embedetcd.TLSFiles {
	if m.tls == nil {
		return embedetcd.TLSFiles{}
	}
	return embedetcd.TLSFiles{CertFile: m.tls.CertFile, KeyFile: m.tls.KeyFile, TrustedCAFile: m.tls.CAFile}
}

// startTimeout is how long a member waits to be ready: a member of a
// cluster waits for a quorum of peers, which an operator starts one VM at
// a time (and systemd restarts a member that gave up).
func (m *Embedded) startTimeout() time.Duration {
	if strings.Contains(m.InitialCluster, ",") {
		return 5 * time.Minute
	}
	return 0 // embedetcd's default
}
