package compute

import (
	"context"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// adminCLI is the real openstack CLI pointed at endpoint (a /v2.1 URL)
// as noauth2's admin (keystoneauth's admin_token plugin sending
// "admin:admin"), asking for microversion mv. The test is skipped when
// the CLI is not installed.
type adminCLI struct {
	t            *testing.T
	osc          string
	endpoint, mv string
}

func newAdminCLI(t *testing.T, endpoint, mv string) *adminCLI {
	t.Helper()
	osc, err := exec.LookPath("openstack")
	if err != nil {
		t.Skip("the openstack CLI is not installed (apt-get install python3-openstackclient)")
	}
	return &adminCLI{t: t, osc: osc, endpoint: endpoint, mv: mv}
}

// try runs one command and returns its combined output and error.
func (c *adminCLI) try(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	full := append([]string{"--os-auth-type", "admin_token", "--os-token", "admin:admin", "--os-endpoint", c.endpoint,
		"--os-compute-api-version", c.mv}, args...)
	out, err := exec.CommandContext(ctx, c.osc, full...).CombinedOutput()
	return string(out), err
}

// run runs one command that must succeed and returns its output.
func (c *adminCLI) run(args ...string) string {
	c.t.Helper()
	out, err := c.try(args...)
	if err != nil {
		c.t.Fatalf("openstack %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// serveLoopback serves h on a loopback port until the test ends and
// returns its /v2.1 URL.
func serveLoopback(t *testing.T, h http.Handler) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + l.Addr().String() + "/v2.1"
}
