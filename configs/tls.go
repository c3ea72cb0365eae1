package configs

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"

	"github.com/hashicorp/hcl/v2"
)

// ProcessTLS is the tls block: the TLS of every HTTP listener of the
// process (the compute API, Placement, the scheduler, identity, image and
// the status port) and of every Berth HTTP client in it (the
// superconductor calling schedulers).
//
// One block per process, not one per listener: a certificate names a
// machine (its SANs are the machine's names and addresses), every
// listener of a process is on that machine, and one file to renew and
// one SIGHUP to reload beat five copies that drift apart.
type ProcessTLS struct {
	CertFile string // PEM certificate every listener serves
	KeyFile  string // its private key
	// ClientCAFile, when set, makes every listener require a client
	// certificate chaining to it ("" asks for none: API users log in
	// with tokens).
	ClientCAFile string
	// CAFile is the CA this process's clients verify Berth's servers
	// against ("" trusts the system's roots).
	CAFile string

	body hcl.Body
}

type rawProcessTLS struct {
	CertFile     *string  `hcl:"cert_file"`
	KeyFile      *string  `hcl:"key_file"`
	ClientCAFile *string  `hcl:"client_ca_file"`
	CAFile       *string  `hcl:"ca_file"`
	Body         hcl.Body `hcl:",body"`
}

func (d *decoder) processTLS(r *rawProcessTLS) *ProcessTLS {
	if r == nil {
		return nil
	}
	t := &ProcessTLS{CertFile: d.str(r.CertFile, ""), KeyFile: d.str(r.KeyFile, ""),
		ClientCAFile: d.str(r.ClientCAFile, ""), CAFile: d.str(r.CAFile, ""), body: r.Body}
	for _, f := range []struct{ name, v string }{{"cert_file", t.CertFile}, {"key_file", t.KeyFile}} {
		if f.v == "" {
			d.diags = append(d.diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Missing " + f.name,
				Detail:  "tls { ... } serves every listener of the process over TLS and needs cert_file and key_file; remove the block to serve plain HTTP (berth dev).",
				Subject: attrRange(r.Body, f.name)})
		}
	}
	return t
}

// CheckFiles reads every file the config's tls blocks name (the
// process's and etcd's) and checks what it must hold: a certificate and
// the private key that matches it, CA certificates. Parse does not, so
// that a file validates on a machine without them (`berth config
// render`); a process checks before it starts (stack.Run), and `berth
// config validate -role` does. The error is a *DiagnosticsError at each
// file's attribute.
func (c *Config) CheckFiles() error {
	var diags hcl.Diagnostics
	if t := c.TLS; t != nil {
		diags = append(diags, checkPair(t.body, t.CertFile, t.KeyFile)...)
		diags = append(diags, checkCA(t.body, "client_ca_file", t.ClientCAFile)...)
		diags = append(diags, checkCA(t.body, "ca_file", t.CAFile)...)
	}
	if t := c.Etcd.TLS; t != nil && t.body != nil {
		if t.CertFile != "" {
			diags = append(diags, checkPair(t.body, t.CertFile, t.KeyFile)...)
		}
		diags = append(diags, checkCA(t.body, "ca_file", t.CAFile)...)
	}
	return diagsError(c.Filename, diags)
}

// checkPair reads a certificate and its key and checks that they match.
func checkPair(b hcl.Body, certFile, keyFile string) hcl.Diagnostics {
	var diags hcl.Diagnostics
	bad := func(attr, summary, detail string) {
		diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: summary, Detail: detail, Subject: attrRange(b, attr)})
	}
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		bad("cert_file", "Cannot read cert_file", err.Error())
	}
	keyPEM, kerr := os.ReadFile(keyFile)
	if kerr != nil {
		bad("key_file", "Cannot read key_file", kerr.Error())
	}
	if err != nil || kerr != nil {
		return diags
	}
	if blk, _ := pem.Decode(certPEM); blk == nil || blk.Type != "CERTIFICATE" {
		bad("cert_file", "Not a certificate", fmt.Sprintf("%s holds no PEM CERTIFICATE block.", certFile))
		return diags
	} else if _, err := x509.ParseCertificate(blk.Bytes); err != nil {
		bad("cert_file", "Unreadable certificate", fmt.Sprintf("%s: %v.", certFile, err))
		return diags
	}
	if blk, _ := pem.Decode(keyPEM); blk == nil || blk.Type == "CERTIFICATE" {
		bad("key_file", "Not a private key", fmt.Sprintf("%s holds no PEM private key.", keyFile))
		return diags
	}
	if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
		bad("key_file", "Certificate and key do not match",
			fmt.Sprintf("%s is not the key of %s (%v): re-issue the pair, or point key_file at the certificate's own key.", keyFile, certFile, err))
	}
	return diags
}

// checkCA reads a file of CA certificates ("" is not checked).
func checkCA(b hcl.Body, attr, file string) hcl.Diagnostics {
	if file == "" {
		return nil
	}
	var detail string
	if pem, err := os.ReadFile(file); err != nil {
		detail = err.Error()
	} else if !x509.NewCertPool().AppendCertsFromPEM(pem) {
		detail = fmt.Sprintf("%s holds no PEM certificates.", file)
	} else {
		return nil
	}
	return hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Cannot use " + attr, Detail: detail, Subject: attrRange(b, attr)}}
}
