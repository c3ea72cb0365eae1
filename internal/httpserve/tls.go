package httpserve

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"sync/atomic"
)

// Certificates is what a process's TLS listeners serve: its certificate
// and key and, when client certificates are required, the CA they must
// chain to. Reload reads the files again (on SIGHUP): each new handshake
// takes what was loaded last, so a renewed certificate is served without
// closing a listener or any connection, and connections made before keep
// the session they have. A reload that fails (a half-copied file, a key
// that does not match) keeps serving what was loaded before.
type Certificates struct {
	certFile, keyFile, clientCAFile string
	cur                             atomic.Pointer[loadedCerts]
}

type loadedCerts struct {
	cert      *tls.Certificate
	clientCAs *x509.CertPool // nil: no client certificate asked
}

// LoadCertificates reads certFile and keyFile and, when clientCAFile is
// not "", the CA of the client certificates every connection must present.
func LoadCertificates(certFile, keyFile, clientCAFile string) (*Certificates, error) {
	c := &Certificates{certFile: certFile, keyFile: keyFile, clientCAFile: clientCAFile}
	if err := c.Reload(); err != nil {
		return nil, err
	}
	return c, nil
}

// Reload reads the files again; on error the certificates loaded before
// stay in use.
func (c *Certificates) Reload() error {
	cert, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
	if err != nil {
		return fmt.Errorf("tls: load cert_file %s and key_file %s: %w", c.certFile, c.keyFile, err)
	}
	l := &loadedCerts{cert: &cert}
	if c.clientCAFile != "" {
		if l.clientCAs, err = LoadCAPool(c.clientCAFile); err != nil {
			return fmt.Errorf("tls: client_ca_file: %w", err)
		}
	}
	c.cur.Store(l)
	return nil
}

// ServerConfig is the listeners' TLS configuration: every handshake asks
// for the certificates loaded last.
func (c *Certificates) ServerConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			l := c.cur.Load()
			tc := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{*l.cert}}
			if l.clientCAs != nil {
				tc.ClientCAs, tc.ClientAuth = l.clientCAs, tls.RequireAndVerifyClientCert
			}
			return tc, nil
		},
	}
}

// ClientCertificate is the process's certificate as a client presents
// it (tls.Config.GetClientCertificate), the one loaded last: a listener
// of another Berth process may ask for it (client_ca_file).
func (c *Certificates) ClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	return c.cur.Load().cert, nil
}

// Listener is ln serving TLS with c. TLS ends here, under every other
// wrapper of the listener, so those (the connection cap, Placement's
// Content-Length check, which reads request heads) see plain HTTP.
func Listener(ln net.Listener, c *Certificates) net.Listener {
	return tls.NewListener(ln, c.ServerConfig())
}

// ClientConfig is the TLS configuration of a Berth HTTP client: it
// verifies servers against the CA in caFile ("" trusts the system's
// roots) and, when certs is not nil, presents the process's certificate
// to a server that asks for one.
func ClientConfig(caFile string, certs *Certificates) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pool, err := LoadCAPool(caFile)
		if err != nil {
			return nil, fmt.Errorf("tls: ca_file: %w", err)
		}
		tc.RootCAs = pool
	}
	if certs != nil {
		tc.GetClientCertificate = certs.ClientCertificate
	}
	return tc, nil
}

// LoadCAPool reads a PEM file of CA certificates.
func LoadCAPool(file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s: no PEM certificates found", file)
	}
	return pool, nil
}
