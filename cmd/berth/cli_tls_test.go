package main

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestTLSCommands: `berth tls ca` then `berth tls cert` leave a CA and a
// machine certificate for the machine's names that verifies against it.
func TestTLSCommands(t *testing.T) {
	dir := t.TempDir()
	var out, errb bytes.Buffer
	if code := run([]string{"tls", "ca", "-dir", dir}, &out, &errb); code != 0 {
		t.Fatalf("tls ca: exit %d: %s", code, errb.String())
	}
	if code := run([]string{"tls", "ca", "-dir", dir}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "already holds a CA") {
		t.Errorf("a second tls ca: exit %d, %q; want a refusal", code, errb.String())
	}
	out.Reset()
	if code := run([]string{"tls", "cert", "-dir", dir, "-name", "node1", "-host", "node1.lab, 10.0.0.11"}, &out, &errb); code != 0 {
		t.Fatalf("tls cert: exit %d: %s", code, errb.String())
	}
	if want := filepath.Join(dir, "node1.pem") + "\n" + filepath.Join(dir, "node1-key.pem") + "\n"; out.String() != want {
		t.Errorf("tls cert printed %q, want the two files", out.String())
	}
	caPEM, _ := os.ReadFile(filepath.Join(dir, "ca.pem"))
	certPEM, _ := os.ReadFile(filepath.Join(dir, "node1.pem"))
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	blk, _ := pem.Decode(certPEM)
	if blk == nil {
		t.Fatal("node1.pem holds no PEM")
	}
	cert, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: "10.0.0.11"}); err != nil {
		t.Errorf("the machine's certificate does not verify for its IP: %v", err)
	}
	if !slices.Contains(cert.DNSNames, "node1.lab") || !slices.Contains(cert.DNSNames, "localhost") {
		t.Errorf("DNS names = %v, want node1.lab and localhost", cert.DNSNames)
	}
	for _, args := range [][]string{{"tls"}, {"tls", "cert", "-dir", dir}, {"tls", "ca"}} {
		if code := run(args, &out, &errb); code != 2 {
			t.Errorf("%v: exit %d, want 2 (usage)", args, code)
		}
	}
}
