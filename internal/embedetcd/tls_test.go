package embedetcd

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/berth-project/berth/internal/tlsgen"
)

// TestTLSCluster: three members with lab certificates talk TLS to each
// other (a write through one is read through another, which needs the
// peers' raft traffic) and serve TLS to clients, requiring a client
// certificate from the same CA: a client without one, or one that does
// not trust the CA, gets nothing.
func TestTLSCluster(t *testing.T) {
	dir := t.TempDir()
	ca, err := tlsgen.WriteCA(dir, "lab", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(dir, tlsgen.CACertFile)
	cfgs := make([]Config, 3)
	var peers []string
	for i := range cfgs {
		name := fmt.Sprintf("etcd-%d", i+1)
		if err := ca.WriteCert(dir, name, nil, time.Hour); err != nil {
			t.Fatal(err)
		}
		cfgs[i] = Config{
			Name:      name,
			DataDir:   filepath.Join(dir, name),
			ClientURL: fmt.Sprintf("https://127.0.0.1:%d", freePort(t)),
			PeerURL:   fmt.Sprintf("https://127.0.0.1:%d", freePort(t)),
			TLS:       TLSFiles{CertFile: tlsgen.CertFile(dir, name), KeyFile: tlsgen.KeyFile(dir, name), TrustedCAFile: caFile},
		}
		peers = append(peers, name+"="+cfgs[i].PeerURL)
	}
	srvs := make([]*Server, 3)
	errs := make(chan error, 3)
	for i := range cfgs {
		cfgs[i].InitialCluster = strings.Join(peers, ",")
		go func(i int) {
			s, err := Start(cfgs[i])
			srvs[i] = s
			errs <- err
		}(i)
	}
	for range cfgs {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, s := range srvs {
			s.Close()
		}
	})

	if err := ca.WriteCert(dir, "client", nil, time.Hour); err != nil {
		t.Fatal(err)
	}
	cert, err := tls.LoadX509KeyPair(tlsgen.CertFile(dir, "client"), tlsgen.KeyFile(dir, "client"))
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	dial := func(endpoint string, tc *tls.Config) *clientv3.Client {
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second, TLS: tc,
			Logger: zap.NewNop()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cli.Close() })
		return cli
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	good := &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{cert}}
	if _, err := dial(cfgs[0].ClientURL, good).Put(ctx, "k", "v"); err != nil {
		t.Fatalf("put over TLS with a client certificate: %v", err)
	}
	got, err := dial(cfgs[2].ClientURL, good).Get(ctx, "k")
	if err != nil || len(got.Kvs) != 1 || string(got.Kvs[0].Value) != "v" {
		t.Fatalf("read through member 3 = %v, %v; want v (peers talk TLS)", got, err)
	}
	for _, tc := range []struct {
		desc string
		tls  *tls.Config
		want string
	}{
		{"no client certificate", &tls.Config{RootCAs: roots}, "certificate required"},
		{"server not trusted", &tls.Config{Certificates: []tls.Certificate{cert}}, "unknown authority"},
	} {
		short, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := dial(cfgs[1].ClientURL, tc.tls).Get(short, "k")
		cancel()
		// The reason (tc.want) is in etcd's client log, not always in
		// the error, which may be the deadline's.
		if err == nil {
			t.Errorf("%s: read served, want refused (%s)", tc.desc, tc.want)
		}
	}
}
