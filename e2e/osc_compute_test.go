package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// TestOpenStackCLICompute drives a real stack (`berth dev`: etcd, the
// scheduler, conductors and two agents) with the real openstack CLI's
// aggregate and server group commands on Nova's API, and checks that what
// they create steers what the scheduler does: a server asking for the
// aggregate's zone lands on its host, and members of the CLI's
// anti-affinity group spread over both hosts and show in the group.
func TestOpenStackCLICompute(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: starts real processes")
	}
	skipWithoutOSC(t)
	dev := startDevStack(t, 2, 1)
	apiURL := dev.apiURL
	openstack := computeCLI(t, apiURL+"/v2.1")
	showJSON := func(args ...string) map[string]any {
		t.Helper()
		var m map[string]any
		if err := json.Unmarshal([]byte(openstack(append(args, "-f", "json")...)), &m); err != nil {
			t.Fatalf("openstack %s: %v", strings.Join(args, " "), err)
		}
		return m
	}
	berth := func(args ...string) string {
		t.Helper()
		out, err := runCLI(t, apiURL, args...)
		if err != nil {
			t.Fatalf("berth %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}

	openstack("aggregate", "create", "--zone", "az1", "agg1")
	openstack("aggregate", "add", "host", "agg1", "compute-2")
	openstack("aggregate", "set", "--property", "ssd=true", "agg1")
	agg := showJSON("aggregate", "show", "agg1")
	if hosts, _ := json.Marshal(agg["hosts"]); string(hosts) != `["compute-2"]` || agg["availability_zone"] != "az1" || agg["id"] != float64(1) {
		t.Fatalf("aggregate show printed %v", agg)
	}
	if props, _ := json.Marshal(agg["properties"]); !strings.Contains(string(props), `"ssd":"true"`) {
		t.Errorf("aggregate show properties: %s", props)
	}
	for i := range 2 {
		name := fmt.Sprintf("in-az1-%d", i)
		berth("server", "create", "--flavor", "m1.tiny", "--name", name, "--az", "az1", "--wait")
		if got := serverHosts(berth("server", "list"))[name]; got != "compute-2" {
			t.Fatalf("%s asked for az1 and landed on %q, want compute-2 (the aggregate's host)", name, got)
		}
	}

	group := showJSON("server", "group", "create", "--policy", "anti-affinity", "spread")
	id, _ := group["id"].(string)
	if group["policy"] != "anti-affinity" || id == "" {
		t.Fatalf("server group create printed %v", group)
	}
	if out := openstack("server", "group", "list", "-f", "value", "-c", "Name"); strings.TrimSpace(out) != "spread" {
		t.Errorf("server group list printed %q", out)
	}
	berth("server", "create", "--flavor", "m1.tiny", "--count", "2", "--name", "member", "--hint", "group="+id, "--wait")
	hosts := serverHosts(berth("server", "list"))
	if hosts["member-1"] == "" || hosts["member-1"] == hosts["member-2"] {
		t.Errorf("anti-affinity members on %q and %q, want the two hosts", hosts["member-1"], hosts["member-2"])
	}
	if members, _ := showJSON("server", "group", "show", "spread")["members"].([]any); len(members) != 2 {
		t.Errorf("server group show members %v, want the two servers", members)
	}
	openstack("server", "group", "delete", "spread")
	if out := openstack("server", "group", "list", "-f", "value"); strings.TrimSpace(out) != "" {
		t.Errorf("server group list after delete printed %q", out)
	}

	openstack("aggregate", "remove", "host", "agg1", "compute-2")
	openstack("aggregate", "delete", "agg1")
	if out := openstack("aggregate", "list", "-f", "value"); strings.TrimSpace(out) != "" {
		t.Errorf("aggregate list after delete printed %q", out)
	}
}
