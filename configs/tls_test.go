package configs

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-project/berth/internal/tlsgen"
)

func TestParseProcessTLS(t *testing.T) {
	cfg, err := Parse([]byte(`tls {
  cert_file      = "/c.pem"
  key_file       = "/k.pem"
  client_ca_file = "/cca.pem"
  ca_file        = "/ca.pem"
}
`), "t.hcl")
	if err != nil {
		t.Fatal(err)
	}
	if got := *cfg.TLS; got.CertFile != "/c.pem" || got.KeyFile != "/k.pem" || got.ClientCAFile != "/cca.pem" || got.CAFile != "/ca.pem" {
		t.Errorf("TLS = %+v", got)
	}
	if cfg, _ := Parse(nil, "t.hcl"); cfg.TLS != nil {
		t.Errorf("a file without a tls block serves TLS: %+v", cfg.TLS)
	}
	checkRefused(t, []refused{
		{"no key", "tls {\n  cert_file = \"/c.pem\"\n}\n", diag{"1:5", "Missing key_file", "needs cert_file and key_file"}},
		{"no cert", "tls {\n  key_file = \"/k.pem\"\n}\n", diag{"1:5", "Missing cert_file", "remove the block to serve plain HTTP"}},
	})
}

// TestCheckFiles: every file a tls block names is read when a process
// starts, and each problem is reported at its attribute, naming it.
func TestCheckFiles(t *testing.T) {
	dir := t.TempDir()
	ca, err := tlsgen.WriteCA(dir, "lab", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"a", "b"} {
		if err := ca.WriteCert(dir, n, nil, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	caFile := filepath.Join(dir, tlsgen.CACertFile)
	garbage := filepath.Join(dir, "garbage.pem")
	if err := os.WriteFile(garbage, []byte("not PEM\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	unreadable := filepath.Join(dir, "unreadable-key.pem")
	if err := os.WriteFile(unreadable, []byte("x"), 0o000); err != nil {
		t.Fatal(err)
	}
	block := func(cert, key, ca string) string {
		return fmt.Sprintf("tls {\n  cert_file = %q\n  key_file = %q\n  ca_file = %q\n}\n", cert, key, ca)
	}
	for _, tc := range []struct {
		desc string
		src  string
		want []string // "line:col: summary", each in the error; none: accepted
	}{
		{desc: "a matching pair and a CA", src: block(tlsgen.CertFile(dir, "a"), tlsgen.KeyFile(dir, "a"), caFile)},
		{desc: "missing certificate", src: block(filepath.Join(dir, "absent.pem"), tlsgen.KeyFile(dir, "a"), caFile),
			want: []string{"t.hcl:2:15: Cannot read cert_file: open " + filepath.Join(dir, "absent.pem")}},
		{desc: "key of another certificate", src: block(tlsgen.CertFile(dir, "a"), tlsgen.KeyFile(dir, "b"), caFile),
			want: []string{"t.hcl:3:14: Certificate and key do not match: " + tlsgen.KeyFile(dir, "b") + " is not the key of " + tlsgen.CertFile(dir, "a")}},
		{desc: "a certificate for a key", src: block(tlsgen.CertFile(dir, "a"), tlsgen.CertFile(dir, "a"), caFile),
			want: []string{"t.hcl:3:14: Not a private key"}},
		{desc: "garbage for a certificate", src: block(garbage, tlsgen.KeyFile(dir, "a"), caFile),
			want: []string{"t.hcl:2:15: Not a certificate"}},
		{desc: "CA file without certificates", src: block(tlsgen.CertFile(dir, "a"), tlsgen.KeyFile(dir, "a"), garbage),
			want: []string{"t.hcl:4:13: Cannot use ca_file: " + garbage + " holds no PEM certificates"}},
		{desc: "etcd's client certificate too", src: fmt.Sprintf("etcd {\n  endpoints = [\"https://e:2379\"]\n  tls {\n    ca_file = %q\n    cert_file = %q\n    key_file = %q\n  }\n}\n",
			caFile, tlsgen.CertFile(dir, "a"), tlsgen.KeyFile(dir, "b")),
			want: []string{"t.hcl:6:16: Certificate and key do not match"}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			cfg, err := Parse([]byte(tc.src), "t.hcl")
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			err = cfg.CheckFiles()
			if len(tc.want) == 0 {
				if err != nil {
					t.Errorf("CheckFiles: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("CheckFiles accepted it")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("CheckFiles:\n%v\nwant %q", err, w)
				}
			}
		})
	}
	if os.Getuid() != 0 { // root reads any file
		cfg, err := Parse([]byte(block(tlsgen.CertFile(dir, "a"), unreadable, caFile)), "t.hcl")
		if err != nil {
			t.Fatal(err)
		}
		if err := cfg.CheckFiles(); err == nil || !strings.Contains(err.Error(), "t.hcl:3:14: Cannot read key_file") {
			t.Errorf("an unreadable key: %v", err)
		}
	}
}

// TestEmbeddedMemberTLS: an etcd block with tls and an embedded member
// serves https (its default URLs too) with the block's files.
func TestEmbeddedMemberTLS(t *testing.T) {
	const tlsBlock = `
  tls {
    cert_file = "/m.pem"
    key_file  = "/m-key.pem"
    ca_file   = "/ca.pem"
  }
`
	for _, src := range []string{"etcd {" + tlsBlock + "  embedded {\n    data_dir = \"/d\"\n  }\n}\n", "etcd {" + tlsBlock + "}\n"} {
		cfg, err := Parse([]byte(src), "t.hcl")
		if err != nil {
			t.Fatal(err)
		}
		checkMemberTLS(t, cfg)
	}
}

func checkMemberTLS(t *testing.T, cfg *Config) {
	t.Helper()
	ec := cfg.Etcd.Embedded.EmbedConfig()
	if ec.ClientURL != "https://127.0.0.1:2379" || ec.PeerURL != "https://127.0.0.1:2380" {
		t.Errorf("URLs = %s, %s; want the defaults made https", ec.ClientURL, ec.PeerURL)
	}
	if ec.TLS.CertFile != "/m.pem" || ec.TLS.KeyFile != "/m-key.pem" || ec.TLS.TrustedCAFile != "/ca.pem" {
		t.Errorf("member TLS = %+v", ec.TLS)
	}
}
