package stack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/internal/httpserve"
	"github.com/berth-project/berth/internal/testwait"
	"github.com/berth-project/berth/internal/tlsgen"
	"github.com/berth-project/berth/scheduler"
)

// TestStackTLS: with a tls block every listener of `berth server` (the
// compute API, Placement, the scheduler, identity, image, status) serves
// https with the machine's certificate and asks for a client certificate
// (client_ca_file); a client trusting the lab CA and presenting its
// certificate is served, a plain-HTTP client and one without a
// certificate are not. A second server's superconductor client reaches
// the first's scheduler over TLS, verifying it with ca_file; a SIGHUP
// (reloadOn, as Run wires it) serves a renewed certificate to new
// connections.
func TestStackTLS(t *testing.T) {
	dir := t.TempDir()
	ca, err := tlsgen.WriteCA(dir, "lab", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"node1", "node2"} {
		if err := ca.WriteCert(dir, n, []string{"127.0.0.1"}, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	caFile := filepath.Join(dir, tlsgen.CACertFile)
	tlsBlock := func(node string) string {
		return fmt.Sprintf("tls {\n  cert_file = %q\n  key_file = %q\n  ca_file = %q\n  client_ca_file = %q\n}\n",
			tlsgen.CertFile(dir, node), tlsgen.KeyFile(dir, node), caFile, caFile)
	}
	cli := etcdtest.Client(t)
	first := startServerFromHCL(t, cli, `
etcd {
  prefix = "/tls"
}
status {
  bind = "127.0.0.1:0"
}
`+tlsBlock("node1")+`
api {
  bind = "127.0.0.1:0"
  auth = "noauth"
}
placement {
  bind = "127.0.0.1:0"
}
scheduler {
  bind = "127.0.0.1:0"
}
image {
  bind = "127.0.0.1:0"
  auth = "noauth"
}
identity {
  bind = "127.0.0.1:0"
`+authDirectory+`}
`, nil)
	if err := first.ServeStatus(); err != nil {
		t.Fatal(err)
	}
	second := startServerFromHCL(t, cli, `
etcd {
  prefix = "/tls"
}
`+tlsBlock("node2")+`
superconductor {}
`, nil)

	certs, err := httpserve.LoadCertificates(tlsgen.CertFile(dir, "node2"), tlsgen.KeyFile(dir, "node2"), "")
	if err != nil {
		t.Fatal(err)
	}
	verified := tlsClient(t, caFile, certs)
	noCert := tlsClient(t, caFile, nil)
	listeners := []string{"compute API", "placement", "scheduler", "image", "identity", "status"}
	for _, name := range listeners {
		ep := first.Endpoint(name)
		if !strings.HasPrefix(ep, "https://127.0.0.1:") {
			t.Errorf("%s serves at %q, want https", name, ep)
			continue
		}
		resp, err := verified.Get(ep + "/healthz")
		if err != nil {
			t.Errorf("%s over TLS with the lab CA and a client certificate: %v", name, err)
			continue
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s /healthz = %d", name, resp.StatusCode)
		}
		if resp, err := noCert.Get(ep + "/healthz"); err == nil {
			resp.Body.Close()
			t.Errorf("%s served a client without a certificate: %d", name, resp.StatusCode)
		}
		plain := "http://" + strings.TrimPrefix(ep, "https://") + "/healthz"
		if resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(plain); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				t.Errorf("%s answered plain HTTP", name)
			}
		}
	}

	// The superconductor's client: verified with ca_file, the second
	// machine's certificate presented; no host exists, so NoValidHost.
	client, err := second.schedulerClient(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var rs scheduler.RequestSpec
	if err := json.Unmarshal([]byte(`{"instance_uuids": ["9a0f8e4c-0d1b-4d2e-8f3a-1b2c3d4e5f60"], "flavor": {"vcpus": 1, "memory_mb": 64}}`), &rs); err != nil {
		t.Fatal(err)
	}
	_, err = (&scheduler.Remote{URL: first.Endpoint("scheduler"), Client: client}).SelectDestinations(context.Background(), &rs)
	var nvh *scheduler.NoValidHostError
	if !errors.As(err, &nvh) {
		t.Errorf("select_destinations over TLS from the second server: %v, want NoValidHost", err)
	}

	// SIGHUP's reload: a renewed certificate for new connections.
	serial := func() string {
		c := tlsClient(t, caFile, certs)
		resp, err := c.Get(first.Endpoint("status") + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.TLS.PeerCertificates[0].SerialNumber.String()
	}
	before := serial()
	if err := ca.WriteCert(dir, "node1", []string{"127.0.0.1"}, time.Hour); err != nil {
		t.Fatal(err)
	}
	hup := make(chan os.Signal, 1)
	go first.reloadOn(hup) // as Run wires SIGHUP; ends when the stack stops
	hup <- syscall.SIGHUP
	testwait.Poll(t, 10*time.Second, "the renewed certificate served", func() (bool, string) {
		got := serial()
		return got != before, "serial " + got
	})
}

// tlsClient trusts caFile and presents certs (nil: no certificate).
func tlsClient(t *testing.T, caFile string, certs *httpserve.Certificates) *http.Client {
	t.Helper()
	tc, err := httpserve.ClientConfig(caFile, certs)
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{TLSClientConfig: tc}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}
