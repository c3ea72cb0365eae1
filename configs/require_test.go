package configs

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestRequire(t *testing.T) {
	const external = "etcd {\n  endpoints = [\"http://10.0.0.1:2379\"]\n}\n"
	cases := []struct {
		desc string
		src  string
		role string
		want []string // whole lines; "" for none
	}{
		{desc: "server with one role", src: "scheduler {}\n", role: RoleServer},
		{desc: "server with none", src: "conductor {\n  cell = \"c1\"\n}\n", role: RoleServer,
			want: []string{"r.hcl: No server role enabled: berth run server runs the roles whose blocks the file has; add at least one of api, placement, scheduler, superconductor, identity or image."}},
		{desc: "conductor ok", src: external + "conductor {\n  cell = \"c1\"\n}\n", role: RoleConductor},
		{desc: "conductor without block", src: external, role: RoleConductor,
			want: []string{`r.hcl: Missing conductor block: berth run conductor needs a conductor { cell = "..." } block.`}},
		{desc: "conductor without cell", src: external + "conductor {\n  workers = 2\n}\n", role: RoleConductor,
			want: []string{`r.hcl:4:1: Missing cell: A cell conductor serves exactly one cell; set cell = "...".`}},
		{desc: "conductor on embedded etcd", src: "etcd {\n  prefix = \"/b\"\n}\nconductor {\n  cell = \"c1\"\n}\n", role: RoleConductor,
			want: []string{"r.hcl:1:1: Missing etcd endpoints: berth run conductor must join the control plane's etcd: set etcd { endpoints = [...] } (an embedded etcd here would be a separate cluster)."}},
		{desc: "agent ok", src: external + "agent {\n  host = \"h1\"\n  cell = \"c1\"\n}\n", role: RoleAgent},
		{desc: "agent without host, cell or etcd", src: "agent {\n  driver = \"fake\"\n}\n", role: RoleAgent,
			want: []string{
				`r.hcl:1:1: Missing host: The agent registers its compute host under this name; set host = "...".`,
				`r.hcl:1:1: Missing cell: The agent's host is mapped to this cell; set cell = "...".`,
				"r.hcl: Missing etcd endpoints: berth run agent must join the control plane's etcd: set etcd { endpoints = [...] } (an embedded etcd here would be a separate cluster).",
			}},
		{desc: "agent without block", src: external, role: RoleAgent,
			want: []string{`r.hcl: Missing agent block: berth run agent needs an agent { host = "..." cell = "..." } block.`}},
		{desc: "dev needs nothing", src: "", role: RoleDev},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			cfg, err := Parse([]byte(tc.src), "r.hcl")
			if err != nil {
				t.Fatal(err)
			}
			err = cfg.Require(tc.role)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Require(%q) = %v", tc.role, err)
				}
				return
			}
			var de *DiagnosticsError
			if !errors.As(err, &de) {
				t.Fatalf("Require(%q) = %v (%T), want *DiagnosticsError", tc.role, err, err)
			}
			if got, want := err.Error(), strings.Join(tc.want, "\n"); got != want {
				t.Errorf("Require(%q) =\n%s\nwant\n%s", tc.role, got, want)
			}
		})
	}
	if err := Defaults().Require("compute"); err == nil || !strings.Contains(err.Error(), `unknown role "compute"`) {
		t.Errorf("unknown role: %v", err)
	}
}

func TestEnableAllRoles(t *testing.T) {
	cfg, err := Parse([]byte("scheduler {\n  max_attempts = 7\n}\n"), "d.hcl")
	if err != nil {
		t.Fatal(err)
	}
	cfg.EnableAllRoles()
	if cfg.Scheduler.MaxAttempts != 7 {
		t.Errorf("EnableAllRoles replaced the file's scheduler: %+v", cfg.Scheduler)
	}
	if cfg.API == nil || cfg.Placement == nil || cfg.Superconductor == nil || cfg.Conductor == nil || cfg.Agent == nil {
		t.Fatalf("roles left disabled: %+v", cfg)
	}
	if cfg.Conductor.Cell != DevCell || cfg.Agent.Cell != DevCell {
		t.Errorf("cells = %q, %q, want %q", cfg.Conductor.Cell, cfg.Agent.Cell, DevCell)
	}
	if err := cfg.Require(RoleDev); err != nil {
		t.Error(err)
	}
}

func TestCheckFilters(t *testing.T) {
	cfg, err := Parse([]byte("scheduler {\n  enabled_filters = [\"ComputeFilter\", \"RamFilter\"]\n}\n"), "f.hcl")
	if err != nil {
		t.Fatal(err)
	}
	err = cfg.Scheduler.CheckFilters([]string{"ComputeFilter"})
	want := `f.hcl:2:21: Unknown filter: "RamFilter" is not a scheduler filter; known filters are "ComputeFilter".`
	if err == nil || err.Error() != want {
		t.Errorf("CheckFilters = %v, want %s", err, want)
	}
	if err := Defaults().Scheduler.CheckFilters(Defaults().Scheduler.EnabledFilters); err != nil {
		t.Errorf("defaults: %v", err)
	}
}

func TestValidateFiles(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.hcl")
	bad := filepath.Join(dir, "bad.hcl")
	missing := filepath.Join(dir, "missing.hcl")
	if err := os.WriteFile(good, []byte("api {}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("log {\n  format = \"xml\"\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if ValidateFiles([]string{good, bad, missing}, "", &out) {
		t.Error("ValidateFiles = true with a bad file")
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("output:\n%s", out.String())
	}
	if lines[0] != good+": ok" {
		t.Errorf("line 0 = %q", lines[0])
	}
	if !strings.HasPrefix(lines[1], bad+":2:12: Invalid format: ") {
		t.Errorf("line 1 = %q", lines[1])
	}
	if !strings.HasPrefix(lines[2], missing+": read config: ") {
		t.Errorf("line 2 = %q", lines[2])
	}
	out.Reset()
	if !ValidateFiles([]string{good}, "", &out) {
		t.Errorf("ValidateFiles = false for a good file: %s", out.String())
	}
	// With a role, a file that parses but lacks what the role needs fails.
	out.Reset()
	if ValidateFiles([]string{good}, RoleAgent, &out) || !strings.Contains(out.String(), "Missing agent block") {
		t.Errorf("ValidateFiles(agent) of an api-only file = ok; output: %s", out.String())
	}
	out.Reset()
	if !ValidateFiles([]string{good}, RoleServer, &out) {
		t.Errorf("ValidateFiles(server) of an api file failed: %s", out.String())
	}
}

func TestClientConfig(t *testing.T) {
	e := Defaults().Etcd
	cc, err := e.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	if len(cc.Endpoints) != 1 || cc.Endpoints[0] != "http://127.0.0.1:2379" || cc.DialTimeout != 5*time.Second || cc.TLS != nil {
		t.Errorf("embedded ClientConfig = %+v", cc)
	}

	dir := t.TempDir()
	ca, cert, key := writeTestCert(t, dir)
	ext := Etcd{
		Endpoints:   []string{"https://10.0.0.1:2379"},
		DialTimeout: time.Second,
		Username:    "berth",
		Password:    "pw",
		TLS:         &TLS{CAFile: ca, CertFile: cert, KeyFile: key},
	}
	cc, err = ext.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	if cc.Username != "berth" || cc.Password != "pw" || cc.TLS == nil || cc.TLS.RootCAs == nil || len(cc.TLS.Certificates) != 1 {
		t.Errorf("external ClientConfig = %+v", cc)
	}

	for _, tc := range []struct {
		desc string
		tls  TLS
		want string
	}{
		{"missing CA", TLS{CAFile: filepath.Join(dir, "nope.pem")}, "nope.pem"},
		{"CA without certificates", TLS{CAFile: key}, "ca_file " + key + ": no PEM certificates found"},
		{"missing key", TLS{CertFile: cert, KeyFile: filepath.Join(dir, "nokey.pem")}, "nokey.pem"},
	} {
		ext.TLS = &tc.tls
		if _, err := ext.ClientConfig(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want it to name %s", tc.desc, err, tc.want)
		}
	}
}

func TestEmbedConfig(t *testing.T) {
	m := Defaults().Etcd.Embedded
	ec := m.EmbedConfig()
	if ec.DataDir != m.DataDir || ec.ClientURL != m.ClientURL || ec.PeerURL != m.PeerURL || ec.Name != m.Name ||
		ec.AutoCompactionRetention != m.AutoCompactionRetention || ec.QuotaBackendBytes != m.QuotaBackendBytes ||
		ec.LogLevel != "warn" {
		t.Errorf("EmbedConfig = %+v from %+v", ec, m)
	}
	m.LogLevel = "info"
	if ec := m.EmbedConfig(); ec.LogLevel != "info" {
		t.Errorf("EmbedConfig().LogLevel = %q, want info", ec.LogLevel)
	}
}

// writeTestCert writes a self-signed certificate that serves as both the
// CA and the client certificate.
func writeTestCert(t *testing.T, dir string) (ca, cert, key string) {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "berth-test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &priv.PublicKey, priv)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	cert = filepath.Join(dir, "cert.pem")
	key = filepath.Join(dir, "key.pem")
	if err := os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	return cert, cert, key
}
