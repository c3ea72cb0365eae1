package httpserve

import (
	"context"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/berth-project/berth/internal/tlsgen"
)

// labCerts writes a CA and a certificate named node to a new directory.
func labCerts(t *testing.T) (dir string, ca *tlsgen.CA) {
	t.Helper()
	dir = t.TempDir()
	ca, err := tlsgen.WriteCA(dir, "test CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := ca.WriteCert(dir, "node", nil, time.Hour); err != nil {
		t.Fatal(err)
	}
	return dir, ca
}

// serveTLS serves ok over TLS with certs on a loopback port until the
// test ends, as package stack serves every listener.
func serveTLS(t *testing.T, certs *Certificates) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := New("test", ok, Limits{ReadHeaderTimeout: 5 * time.Second, IdleTimeout: time.Minute}, hclog.NewNullLogger())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(Listener(ln, certs)) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	})
	return ln.Addr().String()
}

// client is an HTTP client trusting the CA in dir, presenting certs when
// not nil.
func client(t *testing.T, dir string, certs *Certificates) *http.Client {
	t.Helper()
	tc, err := ClientConfig(filepath.Join(dir, tlsgen.CACertFile), certs)
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{TLSClientConfig: tc}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// servedSerial GETs url with c and returns the serial of the certificate
// the server presented, and whether the connection was reused.
func servedSerial(t *testing.T, c *http.Client, url string) (serial string, reused bool) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused },
	}))
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	if b, _ := io.ReadAll(resp.Body); string(b) != "ok" {
		t.Fatalf("GET %s = %d %q", url, resp.StatusCode, b)
	}
	return resp.TLS.PeerCertificates[0].SerialNumber.String(), reused
}

func TestTLSListenerVerifiedByTheLabCA(t *testing.T) {
	dir, _ := labCerts(t)
	certs, err := LoadCertificates(tlsgen.CertFile(dir, "node"), tlsgen.KeyFile(dir, "node"), "")
	if err != nil {
		t.Fatal(err)
	}
	addr := serveTLS(t, certs)
	servedSerial(t, client(t, dir, nil), "https://"+addr+"/")

	// A client that does not trust the lab CA refuses the server.
	_, err = (&http.Client{Timeout: 10 * time.Second}).Get("https://" + addr + "/")
	var unknown x509.UnknownAuthorityError
	if !errors.As(err, &unknown) {
		t.Errorf("GET without the lab CA = %v, want an unknown authority error", err)
	}
	// Plain HTTP gets no answer from a TLS listener.
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get("http://" + addr + "/")
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Errorf("plain HTTP to the TLS listener answered %d", resp.StatusCode)
		}
	}
}

// TestReloadKeepsConnections: after the certificate is renewed and
// reloaded (SIGHUP), a connection made before keeps serving, a new one is
// served the new certificate; a reload of a mismatched pair is refused
// and the previous certificate stays.
func TestReloadKeepsConnections(t *testing.T) {
	dir, ca := labCerts(t)
	certs, err := LoadCertificates(tlsgen.CertFile(dir, "node"), tlsgen.KeyFile(dir, "node"), "")
	if err != nil {
		t.Fatal(err)
	}
	url := "https://" + serveTLS(t, certs) + "/"
	kept := client(t, dir, nil)
	before, _ := servedSerial(t, kept, url)

	if err := ca.WriteCert(dir, "node", nil, time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := certs.Reload(); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	serial, reused := servedSerial(t, kept, url)
	if !reused || serial != before {
		t.Errorf("after reload the kept connection: reused=%v serial changed=%v; want the same connection, untouched", reused, serial != before)
	}
	renewed, reused := servedSerial(t, client(t, dir, nil), url)
	if reused || renewed == before {
		t.Errorf("a new connection after reload: reused=%v, served the old certificate=%v", reused, renewed == before)
	}

	// A key of another certificate: refused, the renewed one stays.
	other, err := ca.Issue("other", nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tlsgen.KeyFile(dir, "node"), other.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := certs.Reload(); err == nil || !strings.Contains(err.Error(), "private key does not match public key") {
		t.Errorf("Reload of a mismatched pair = %v, want the mismatch named", err)
	}
	if got, _ := servedSerial(t, client(t, dir, nil), url); got != renewed {
		t.Error("a refused reload changed the certificate served")
	}
}

func TestClientCertificatesRequired(t *testing.T) {
	dir, _ := labCerts(t)
	ca := filepath.Join(dir, tlsgen.CACertFile)
	certs, err := LoadCertificates(tlsgen.CertFile(dir, "node"), tlsgen.KeyFile(dir, "node"), ca)
	if err != nil {
		t.Fatal(err)
	}
	url := "https://" + serveTLS(t, certs) + "/"
	// A Berth process presents its own certificate.
	servedSerial(t, client(t, dir, certs), url)
	// A client without one is refused in the handshake.
	if resp, err := client(t, dir, nil).Get(url); err == nil {
		resp.Body.Close()
		t.Errorf("GET without a client certificate = %d, want a refused handshake", resp.StatusCode)
	}
}

func TestLoadCertificatesNamesTheProblem(t *testing.T) {
	dir, _ := labCerts(t)
	for _, tc := range []struct {
		desc                string
		cert, key, clientCA string
		want                string
	}{
		{desc: "missing cert", cert: filepath.Join(dir, "absent.pem"), key: tlsgen.KeyFile(dir, "node"), want: "absent.pem"},
		{desc: "key is a certificate", cert: tlsgen.CertFile(dir, "node"), key: tlsgen.CertFile(dir, "node"), want: "key_file"},
		{desc: "client CA without certificates", cert: tlsgen.CertFile(dir, "node"), key: tlsgen.KeyFile(dir, "node"),
			clientCA: tlsgen.KeyFile(dir, "node"), want: "no PEM certificates"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			_, err := LoadCertificates(tc.cert, tc.key, tc.clientCA)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("LoadCertificates = %v, want an error naming %q", err, tc.want)
			}
		})
	}
}
