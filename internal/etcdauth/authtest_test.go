package etcdauth

import (
	"context"
	"crypto/tls"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/berth-project/berth/internal/embedetcd"
	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/internal/tlsgen"
)

// authCluster is one TLS member (its certificate named member, so its
// in-process client is that user) and a lab CA to make machines'
// certificates with.
type authCluster struct {
	t   *testing.T
	dir string
	ca  *tlsgen.CA
	srv *embedetcd.Server
}

func startAuthCluster(t *testing.T, member string) *authCluster {
	t.Helper()
	dir := t.TempDir()
	ca, err := tlsgen.WriteCA(dir, "lab", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	c := &authCluster{t: t, dir: dir, ca: ca}
	c.cert(member)
	c.srv = etcdtest.StartWith(t, func(cfg *embedetcd.Config) {
		cfg.ClientURL = strings.Replace(cfg.ClientURL, "http:", "https:", 1)
		cfg.PeerURL = strings.Replace(cfg.PeerURL, "http:", "https:", 1)
		cfg.TLS = embedetcd.TLSFiles{CertFile: tlsgen.CertFile(dir, member), KeyFile: tlsgen.KeyFile(dir, member),
			TrustedCAFile: filepath.Join(dir, tlsgen.CACertFile)}
	})
	return c
}

// cert issues machine's certificate (if not yet).
func (c *authCluster) cert(machine string) {
	c.t.Helper()
	if err := c.ca.WriteCert(c.dir, machine, nil, time.Hour); err != nil {
		c.t.Fatal(err)
	}
}

// tls is the client TLS of machine: its certificate, the lab CA.
func (c *authCluster) tls(machine string) *tls.Config {
	c.t.Helper()
	c.cert(machine)
	info := transport.TLSInfo{CertFile: tlsgen.CertFile(c.dir, machine), KeyFile: tlsgen.KeyFile(c.dir, machine),
		TrustedCAFile: filepath.Join(c.dir, tlsgen.CACertFile)}
	tc, err := info.ClientConfig()
	if err != nil {
		c.t.Fatal(err)
	}
	return tc
}

// client is a networked client of machine, authenticated by its
// certificate.
func (c *authCluster) client(machine string) *clientv3.Client {
	c.t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{c.srv.ClientURL()}, DialTimeout: 5 * time.Second,
		TLS: c.tls(machine), Logger: zap.NewNop()})
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { cli.Close() })
	return cli
}

func ctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}
