package compute

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// TestOpenStackCLIAggregatesAndServerGroups drives the real openstack
// CLI's aggregate and server group commands (openstacksdk underneath)
// against the API on a loopback port, with two compute hosts registered
// as agents register them and placement mirroring the aggregates. It
// acts as noauth2's admin (keystoneauth's "admin_token" plugin sending
// "admin:admin", as TestOpenStackCLI does): aggregates are an admin's,
// and the groups it makes are project "admin"'s. The e2e
// TestOpenStackCLICompute does the same against a real stack.
func TestOpenStackCLIAggregatesAndServerGroups(t *testing.T) {
	a, place := newTestAPIWithHosts(t, "compute-1", "compute-2")
	cli := newAdminCLI(t, serveLoopback(t, a.h), "2.latest")
	run := cli.run
	show := func(args ...string) map[string]any {
		t.Helper()
		var m map[string]any
		if err := json.Unmarshal([]byte(run(append(args, "-f", "json")...)), &m); err != nil {
			t.Fatal(err)
		}
		return m
	}

	created := show("aggregate", "create", "--zone", "az1", "agg1")
	if created["name"] != "agg1" || created["availability_zone"] != "az1" {
		t.Errorf("aggregate create printed %v", created)
	}
	run("aggregate", "add", "host", "agg1", "compute-1")
	run("aggregate", "set", "--property", "ssd=true", "agg1")
	got := show("aggregate", "show", "agg1")
	if hosts, _ := json.Marshal(got["hosts"]); string(hosts) != `["compute-1"]` || got["availability_zone"] != "az1" {
		t.Errorf("aggregate show printed %v", got)
	}
	if props, _ := json.Marshal(got["properties"]); !strings.Contains(string(props), `"ssd":"true"`) {
		t.Errorf("aggregate show properties: %s", props)
	}
	rp, err := place.Provider(context.Background(), "rp-compute-1")
	if err != nil || !slices.Contains(rp.Aggregates, got["uuid"].(string)) {
		t.Errorf("compute-1's placement aggregates %v lack %v (%v)", rp, got["uuid"], err)
	}
	if out := run("aggregate", "list", "-f", "value", "-c", "Name", "-c", "Availability Zone"); strings.TrimSpace(out) != "agg1 az1" {
		t.Errorf("aggregate list printed %q", out)
	}
	run("aggregate", "remove", "host", "agg1", "compute-1")
	run("aggregate", "delete", "agg1")
	if out := run("aggregate", "list", "-f", "value"); strings.TrimSpace(out) != "" {
		t.Errorf("aggregate list after delete: %q", out)
	}

	g := show("server", "group", "create", "--policy", "anti-affinity", "g1")
	if g["name"] != "g1" || g["policy"] != "anti-affinity" || g["project_id"] != "admin" || g["user_id"] != "admin" {
		t.Errorf("server group create printed %v", g)
	}
	if out := run("server", "group", "list", "-f", "value", "-c", "Name", "-c", "Policy"); strings.TrimSpace(out) != "g1 anti-affinity" {
		t.Errorf("server group list printed %q", out)
	}
	if s := show("server", "group", "show", "g1"); s["id"] != g["id"] {
		t.Errorf("server group show printed %v", s)
	}
	if r := show("server", "group", "create", "--policy", "anti-affinity", "--rule", "max_server_per_host=2", "g2"); !strings.Contains(printedJSON(r["rules"]), "max_server_per_host") {
		t.Errorf("server group create --rule printed %v", r)
	}
	var limits []map[string]any
	if err := json.Unmarshal([]byte(run("limits", "show", "--absolute", "-f", "json")), &limits); err != nil {
		t.Fatal(err)
	}
	byName := map[string]any{}
	for _, l := range limits {
		byName[l["Name"].(string)] = l["Value"]
	}
	if byName["maxTotalInstances"] != float64(10) || byName["totalServerGroupsUsed"] != float64(2) {
		t.Errorf("limits show --absolute printed %v", limits)
	}
	run("server", "group", "delete", "g1", "g2")
	if out := run("server", "group", "list", "-f", "value"); strings.TrimSpace(out) != "" {
		t.Errorf("server group list after delete: %q", out)
	}
}

// printedJSON is a printed JSON value, for a contains check.
func printedJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
