package stack

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/berth-project/berth/internal/etcdtest"
)

// TestOpenStackCLIQuotas: `openstack quota show/set` and `limits show`
// with the real CLI against `berth server` in keystone mode, whose api
// block sets a default quota: the CLI resolves the project at the
// identity API, then reads and sets its quota set at the compute API.
func TestOpenStackCLIQuotas(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the openstack CLI (seconds of Python start-up)")
	}
	osc, err := exec.LookPath("openstack")
	if err != nil {
		t.Skip("no openstack CLI (apt-get install python3-openstackclient)")
	}
	idPort, apiPort := etcdtest.FreePort(t), etcdtest.FreePort(t)
	s := startServerFromHCL(t, etcdtest.Client(t), fmt.Sprintf(`
api {
  bind = "127.0.0.1:%[2]d"
  auth = "keystone"
  quota {
    instances = 4
  }
}
identity {
  bind = "127.0.0.1:%[1]d"
  endpoint "compute" {
    public = "http://127.0.0.1:%[2]d/v2.1"
  }
  endpoint "identity" {
    public = "http://127.0.0.1:%[1]d/v3"
  }
`+authDirectory+`}
`, idPort, apiPort), nil)
	home := t.TempDir()
	cfgPath := writeClouds(t, home, s.Endpoint("identity"), cloudEntry{"member", "alice", "alice-pw", "demo"},
		cloudEntry{"admin", "admin", "admin-pw", "admin"})
	run := func(cloud string, args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, osc, append([]string{"--os-cloud", cloud, "--os-compute-api-version", "2.latest"}, args...)...)
		cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "OS_CLIENT_CONFIG_FILE=" + cfgPath}
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		if err := cmd.Run(); err != nil {
			t.Fatalf("openstack %v as %s: %v\n%s%s", args, cloud, err, o.String(), e.String())
		}
		return o.String()
	}
	show := func(cloud string, args ...string) map[string]any {
		t.Helper()
		var m map[string]any
		if err := json.Unmarshal([]byte(run(cloud, append(args, "-f", "json")...)), &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	if q := show("admin", "quota", "show", "demo"); q["instances"] != float64(4) || q["cores"] != float64(20) {
		t.Errorf("quota show demo before any set: %v, want the config's instances 4 and Nova's cores 20", q)
	}
	run("admin", "quota", "set", "--instances", "6", "--cores", "8", "demo")
	if q := show("admin", "quota", "show", "demo"); q["instances"] != float64(6) || q["cores"] != float64(8) {
		t.Errorf("quota show demo after set: %v", q)
	}
	// A member reads its own project's (the CLI takes it from the token).
	if q := show("member", "quota", "show"); q["instances"] != float64(6) || q["ram"] != float64(51200) {
		t.Errorf("quota show as demo's member: %v", q)
	}
	var limits []map[string]any
	if err := json.Unmarshal([]byte(run("member", "limits", "show", "--absolute", "-f", "json")), &limits); err != nil {
		t.Fatal(err)
	}
	byName := map[string]any{}
	for _, l := range limits {
		byName[l["Name"].(string)] = l["Value"]
	}
	if byName["maxTotalInstances"] != float64(6) || byName["maxTotalCores"] != float64(8) || byName["totalInstancesUsed"] != float64(0) {
		t.Errorf("limits show --absolute as demo's member: %v", byName)
	}
}
