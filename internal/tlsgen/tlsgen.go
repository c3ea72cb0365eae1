// Package tlsgen makes a lab certificate authority and the per-machine
// certificates a Berth deployment serves and authenticates with (`berth
// tls ca`, `berth tls cert`). It is for labs and first deployments: a
// production site issues from its own PKI and only points the config's
// tls blocks at the files.
//
// One certificate per machine serves every listener of the machine's
// processes and is also their client certificate: it carries both the
// serverAuth and the clientAuth usages, because an etcd member presents
// the same certificate to its peers as client and server, and a Berth
// process presents its own to a listener that asks for one
// (client_ca_file). Its subject alternative names are the machine's names
// and addresses, plus localhost and 127.0.0.1 so local clients (the
// member's own health checks, an operator on the machine) verify too.
//
// Keys are ECDSA P-256: small, fast to make in tests, and accepted by
// etcd, Go and OpenSSL clients alike.
package tlsgen

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"path/filepath"
	"slices"
	"time"
)

// Default lifetimes: a lab CA outlives its machines' certificates, which
// are re-issued (and reloaded with SIGHUP) well before they expire.
const (
	DefaultCAValidity   = 10 * 365 * 24 * time.Hour
	DefaultCertValidity = 2 * 365 * 24 * time.Hour
)

// File names under a CA directory: the CA's certificate and key, and
// <name>.pem / <name>-key.pem for each certificate issued.
const (
	CACertFile = "ca.pem"
	CAKeyFile  = "ca-key.pem"
)

// CertFile and KeyFile are where Issue's certificate for name is written.
func CertFile(dir, name string) string { return filepath.Join(dir, name+".pem") }
func KeyFile(dir, name string) string  { return filepath.Join(dir, name+"-key.pem") }

// CA is a certificate authority that can issue certificates.
type CA struct {
	Cert *x509.Certificate
	Key  crypto.Signer
}

// NewCA makes a self-signed CA named name, valid for validity from now.
func NewCA(name string, validity time.Duration) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("tlsgen: CA key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: name, Organization: []string{"Berth lab"}},
		NotBefore:             now.Add(-time.Hour), // machines' clocks differ a little
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("tlsgen: sign CA: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("tlsgen: parse CA: %w", err)
	}
	return &CA{Cert: cert, Key: key}, nil
}

// Issued is a certificate and its key, PEM encoded.
type Issued struct {
	CertPEM, KeyPEM []byte
}

// Issue makes a certificate for name (its common name, which etcd takes
// for the user of a client certificate when it has no password) valid for
// hosts (DNS names or IP addresses; localhost and 127.0.0.1 are always
// added), usable as server and as client certificate.
func (ca *CA) Issue(name string, hosts []string, validity time.Duration) (Issued, error) {
	if name == "" {
		return Issued{}, errors.New("tlsgen: a certificate needs a name")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Issued{}, fmt.Errorf("tlsgen: key for %s: %w", name, err)
	}
	serial, err := newSerial()
	if err != nil {
		return Issued{}, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: name, Organization: []string{"Berth lab"}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(validity),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, h := range SANs(hosts) {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		return Issued{}, fmt.Errorf("tlsgen: sign %s: %w", name, err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return Issued{}, fmt.Errorf("tlsgen: encode key of %s: %w", name, err)
	}
	return Issued{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

// SANs is hosts with localhost and 127.0.0.1 added, without empty names
// or repeats, in order.
func SANs(hosts []string) []string {
	var out []string
	for _, h := range append(slices.Clone(hosts), "localhost", "127.0.0.1") {
		if h != "" && !slices.Contains(out, h) {
			out = append(out, h)
		}
	}
	return out
}

// CertPEM is the CA's certificate, PEM encoded: the ca_file of every
// client and the client_ca_file of every listener.
func (ca *CA) CertPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Cert.Raw})
}

func newSerial() (*big.Int, error) {
	s, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("tlsgen: serial number: %w", err)
	}
	return s, nil
}
