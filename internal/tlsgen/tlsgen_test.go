package tlsgen

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestIssuedCertificatesVerify: a certificate issued for a machine
// verifies against its CA for every name it was issued for, as a server
// and as a client, and for no other name or CA.
func TestIssuedCertificatesVerify(t *testing.T) {
	ca, err := NewCA("test CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	other, err := NewCA("other CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	is, err := ca.Issue("node1", []string{"node1.lab", "10.0.0.11"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(is.CertPEM, is.KeyPEM)
	if err != nil {
		t.Fatalf("issued certificate and key do not pair: %v", err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if leaf.Subject.CommonName != "node1" {
		t.Errorf("common name = %q, want node1 (etcd's user for the certificate)", leaf.Subject.CommonName)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	otherPool := x509.NewCertPool()
	otherPool.AddCert(other.Cert)
	for _, tc := range []struct {
		desc  string
		name  string
		roots *x509.CertPool
		usage x509.ExtKeyUsage
		ok    bool
	}{
		{desc: "its DNS name as a server", name: "node1.lab", roots: pool, usage: x509.ExtKeyUsageServerAuth, ok: true},
		{desc: "its IP as a server", name: "10.0.0.11", roots: pool, usage: x509.ExtKeyUsageServerAuth, ok: true},
		{desc: "loopback as a server", name: "127.0.0.1", roots: pool, usage: x509.ExtKeyUsageServerAuth, ok: true},
		{desc: "localhost as a server", name: "localhost", roots: pool, usage: x509.ExtKeyUsageServerAuth, ok: true},
		{desc: "as a client", roots: pool, usage: x509.ExtKeyUsageClientAuth, ok: true},
		{desc: "another machine's name", name: "node2.lab", roots: pool, usage: x509.ExtKeyUsageServerAuth},
		{desc: "another CA", name: "node1.lab", roots: otherPool, usage: x509.ExtKeyUsageServerAuth},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			_, err := leaf.Verify(x509.VerifyOptions{DNSName: tc.name, Roots: tc.roots, KeyUsages: []x509.ExtKeyUsage{tc.usage}})
			if (err == nil) != tc.ok {
				t.Errorf("verify = %v, want ok=%v", err, tc.ok)
			}
		})
	}
}

// TestMutualTLSHandshake: two machines' certificates from one CA make a
// mutually authenticated TLS connection over loopback, the way an etcd
// member talks to its peer and a superconductor to a scheduler that asks
// for client certificates.
func TestMutualTLSHandshake(t *testing.T) {
	dir := t.TempDir()
	ca, err := WriteCA(dir, "lab", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"server", "client"} {
		if err := ca.WriteCert(dir, n, nil, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	load := func(n string) tls.Certificate {
		c, err := tls.LoadX509KeyPair(CertFile(dir, n), KeyFile(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	caPEM, err := os.ReadFile(filepath.Join(dir, CACertFile))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		t.Fatal("ca.pem holds no certificate")
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{load("server")},
		ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	peer := make(chan string, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			peer <- err.Error()
			return
		}
		defer c.Close()
		tc := c.(*tls.Conn)
		if err := tc.Handshake(); err != nil {
			peer <- err.Error()
			return
		}
		peer <- tc.ConnectionState().PeerCertificates[0].Subject.CommonName
		_, _ = io.WriteString(c, "ok")
	}()
	conn, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{load("client")}})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer conn.Close()
	if got := <-peer; got != "client" {
		t.Errorf("server saw client %q, want client", got)
	}
}

func TestWriteCARefusesToReplaceACA(t *testing.T) {
	dir := t.TempDir()
	first, err := WriteCA(dir, "lab", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := WriteCA(dir, "lab", time.Hour); err == nil || !strings.Contains(err.Error(), "already holds a CA") {
		t.Fatalf("second WriteCA = %v, want a refusal", err)
	}
	loaded, err := LoadCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !loaded.Cert.Equal(first.Cert) {
		t.Error("LoadCA read another CA than WriteCA wrote")
	}
	st, err := os.Stat(filepath.Join(dir, CAKeyFile))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("CA key mode = %v, %v; want 0600", st.Mode(), err)
	}
}

func TestLoadCARefusesALeaf(t *testing.T) {
	dir := t.TempDir()
	ca, err := WriteCA(dir, "lab", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := ca.WriteCert(dir, "node", nil, time.Hour); err != nil {
		t.Fatal(err)
	}
	leafDir := t.TempDir()
	for from, to := range map[string]string{CertFile(dir, "node"): CACertFile, KeyFile(dir, "node"): CAKeyFile} {
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(leafDir, to), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := LoadCA(leafDir); err == nil || !strings.Contains(err.Error(), "not a CA") {
		t.Fatalf("LoadCA of a machine certificate = %v, want a refusal", err)
	}
}

func TestSANs(t *testing.T) {
	got := SANs([]string{"node1", "", "10.0.0.1", "node1", "127.0.0.1"})
	if want := "node1,10.0.0.1,127.0.0.1,localhost"; strings.Join(got, ",") != want {
		t.Errorf("SANs = %v, want %s: first appearance order, no empties or repeats", got, want)
	}
}
