package compute

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestOpenStackCLI drives the real `openstack` CLI (Debian's
// python3-openstackclient) against the API on a loopback port in noauth
// mode, with keystoneauth's "admin_token" plugin sending noauth2's admin
// token "admin:admin" to the endpoint given, so the CLI needs no
// Keystone (its "none" plugin sends "notused": a user, not an admin).
// TestOpenStackCLIKeystone logs in through the identity API instead.
func TestOpenStackCLI(t *testing.T) {
	osc, err := exec.LookPath("openstack")
	if err != nil {
		t.Skip("the openstack CLI is not installed (apt-get install python3-openstackclient)")
	}
	a := newTestAPI(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// Record the microversions the CLI asked for: its flavor commands
	// (openstacksdk) read the version document and ask for 2.61, where
	// flavors carry their extra specs.
	var mu sync.Mutex
	asked := map[string]bool{}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked[r.Header.Get("OpenStack-API-Version")] = true
		mu.Unlock()
		a.h.ServeHTTP(w, r)
	})
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	endpoint := "http://" + l.Addr().String() + "/v2.1"

	run := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		full := append([]string{"--os-auth-type", "admin_token", "--os-token", "admin:admin", "--os-endpoint", endpoint, "--os-compute-api-version", "2.latest"}, args...)
		out, err := exec.CommandContext(ctx, osc, full...).CombinedOutput()
		if err != nil {
			t.Fatalf("openstack %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	var list []map[string]any
	if err := json.Unmarshal([]byte(run("flavor", "list", "-f", "json")), &list); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range list {
		names = append(names, f["Name"].(string))
	}
	if strings.Join(names, ",") != "m1.tiny,m1.small,m1.medium,m1.large,m1.xlarge" {
		t.Errorf("flavor list: %v", names)
	}
	run("flavor", "create", "--ram", "256", "--vcpus", "1", "--disk", "1", "--property", "hw:cpu_policy=dedicated",
		"--description", "made by <osc>", "--id", "osc1", "osc.small")
	var show map[string]any
	if err := json.Unmarshal([]byte(run("flavor", "show", "osc.small", "-f", "json")), &show); err != nil {
		t.Fatal(err)
	}
	if show["id"] != "osc1" || show["ram"] != float64(256) || show["description"] != "made by <osc>" {
		t.Errorf("flavor show: %v", show)
	}
	if props, _ := json.Marshal(show["properties"]); !strings.Contains(string(props), "dedicated") {
		t.Errorf("flavor show properties: %v", show["properties"])
	}
	mu.Lock()
	if !asked["compute 2.61"] {
		t.Errorf("the CLI never asked for 2.61: %v", asked)
	}
	mu.Unlock()
	run("flavor", "delete", "osc.small")
	if out := run("flavor", "list", "-f", "value", "-c", "Name"); strings.Contains(out, "osc.small") {
		t.Errorf("deleted flavor still listed: %s", out)
	}
}
