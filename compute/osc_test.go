package compute

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// TestOpenStackCLI drives the real `openstack` CLI (Debian's
// python3-openstackclient) against the API on a loopback port in noauth
// mode, with keystoneauth's "admin_token" plugin sending noauth2's admin
// token "admin:admin" to the endpoint given, so the CLI needs no
// Keystone (its "none" plugin sends "notused": a user, not an admin).
// TestOpenStackCLIKeystone logs in through the identity API instead.
func TestOpenStackCLI(t *testing.T) {
	a := newTestAPI(t)
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
	run := newAdminCLI(t, serveLoopback(t, h), "2.latest").run
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
