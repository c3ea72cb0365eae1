package tlsgen

import (
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// WriteCA makes a CA named name in dir (created if absent): ca.pem
// (0644) and ca-key.pem (0600). It refuses to overwrite an existing CA,
// whose certificates would all stop verifying.
func WriteCA(dir, name string, validity time.Duration) (*CA, error) {
	if _, err := os.Stat(filepath.Join(dir, CAKeyFile)); err == nil {
		return nil, fmt.Errorf("tlsgen: %s already holds a CA (%s); remove it to make a new one", dir, CAKeyFile)
	}
	ca, err := NewCA(name, validity)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(ca.Key)
	if err != nil {
		return nil, fmt.Errorf("tlsgen: encode CA key: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("tlsgen: %w", err)
	}
	if err := writeFile(filepath.Join(dir, CAKeyFile), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return nil, err
	}
	if err := writeFile(filepath.Join(dir, CACertFile), ca.CertPEM(), 0o644); err != nil {
		return nil, err
	}
	return ca, nil
}

// LoadCA reads the CA WriteCA made in dir.
func LoadCA(dir string) (*CA, error) {
	certPEM, err := os.ReadFile(filepath.Join(dir, CACertFile))
	if err != nil {
		return nil, fmt.Errorf("tlsgen: read CA: %w", err)
	}
	keyPEM, err := os.ReadFile(filepath.Join(dir, CAKeyFile))
	if err != nil {
		return nil, fmt.Errorf("tlsgen: read CA key: %w", err)
	}
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, fmt.Errorf("tlsgen: %s holds no PEM CA certificate and key", dir)
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("tlsgen: parse %s: %w", CACertFile, err)
	}
	key, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("tlsgen: parse %s: %w", CAKeyFile, err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok || !cert.IsCA {
		return nil, fmt.Errorf("tlsgen: %s is not a CA certificate and key", dir)
	}
	return &CA{Cert: cert, Key: signer}, nil
}

// WriteCert issues a certificate for name and hosts with ca and writes it
// to CertFile(dir, name) (0644) and KeyFile(dir, name) (0600), replacing
// earlier ones: re-issuing is how a machine's certificate is renewed.
func (ca *CA) WriteCert(dir, name string, hosts []string, validity time.Duration) error {
	is, err := ca.Issue(name, hosts, validity)
	if err != nil {
		return err
	}
	// The key first: a reader that sees the new certificate then finds
	// its key (a SIGHUP between the two writes reloads a mismatch, which
	// the reload refuses, keeping the old pair).
	if err := writeFile(KeyFile(dir, name), is.KeyPEM, 0o600); err != nil {
		return err
	}
	return writeFile(CertFile(dir, name), is.CertPEM, 0o644)
}

// writeFile replaces path atomically (a temporary file renamed over it),
// so a process reloading never reads half a file.
func writeFile(path string, data []byte, perm fs.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("tlsgen: %w", err)
	}
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr, os.Chmod(tmp.Name(), perm)); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("tlsgen: write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("tlsgen: write %s: %w", path, err)
	}
	return nil
}
