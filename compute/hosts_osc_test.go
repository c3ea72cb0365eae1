package compute

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/berth-project/berth/agent"
	"github.com/berth-project/berth/placement"
)

// TestOpenStackCLIHosts drives the real `openstack` CLI's compute
// service, hypervisor and availability zone commands against the API
// over real agents (fake driver): a disable with a reason returns once
// the agent has put COMPUTE_STATUS_DISABLED on its provider, as /v1's
// did; a host with no instances is deleted, one with an instance is
// refused.
func TestOpenStackCLIHosts(t *testing.T) {
	r := newHostsRig(t)
	r.controls()
	r.startAgent("compute-1")
	r.startAgent("compute-2")
	cli := newAdminCLI(t, r.serve()+"/v2.1", "2.79")
	run, must := cli.try, cli.run
	services := func() map[string]map[string]any {
		t.Helper()
		var list []map[string]any
		if err := json.Unmarshal([]byte(must("compute", "service", "list", "--long", "-f", "json")), &list); err != nil {
			t.Fatal(err)
		}
		out := map[string]map[string]any{}
		for _, s := range list {
			out[s["Binary"].(string)+"@"+s["Host"].(string)] = s
		}
		return out
	}
	svcs := services()
	for _, want := range []string{"nova-scheduler@controller", "nova-conductor@controller", "nova-compute@compute-1", "nova-compute@compute-2"} {
		if svcs[want] == nil {
			t.Fatalf("service list lacks %s: %v", want, svcs)
		}
	}
	if s := svcs["nova-compute@compute-1"]; s["Zone"] != "nova" || s["Status"] != "enabled" || s["State"] != "up" {
		t.Errorf("compute-1 listed as %v", s)
	}

	hasTrait := func(host string) bool {
		p, err := r.p.Provider(context.Background(), agent.ProviderUUIDForHost(host))
		if err != nil {
			t.Fatal(err)
		}
		return slices.Contains(p.Traits, placement.TraitComputeStatusDisabled)
	}
	must("compute", "service", "set", "--disable", "--disable-reason", "maint <x>", "compute-1", "nova-compute")
	// No polling: the command returned after the agent confirmed.
	if !hasTrait("compute-1") {
		t.Fatal("service set --disable returned before the agent set COMPUTE_STATUS_DISABLED")
	}
	if s := services()["nova-compute@compute-1"]; s["Status"] != "disabled" || s["Disabled Reason"] != "maint <x>" {
		t.Errorf("after disable: %v", s)
	}
	must("compute", "service", "set", "--enable", "compute-1", "nova-compute")
	if hasTrait("compute-1") {
		t.Fatal("service set --enable returned before the agent cleared COMPUTE_STATUS_DISABLED")
	}
	must("compute", "service", "set", "--down", "compute-2", "nova-compute")
	if s := services()["nova-compute@compute-2"]; s["State"] != "down" || s["Forced Down"] != true {
		t.Errorf("after --down: %v", s)
	}
	must("compute", "service", "set", "--up", "compute-2", "nova-compute")

	var hvs []map[string]any
	if err := json.Unmarshal([]byte(must("hypervisor", "list", "-f", "json")), &hvs); err != nil {
		t.Fatal(err)
	}
	if len(hvs) != 2 {
		t.Fatalf("hypervisor list: %v", hvs)
	}
	// `hypervisor show` finds the node (GET /os-hypervisors/compute-1 is
	// a 400 at 2.53+, then it searches /os-hypervisors/detail) and then
	// lists /os-aggregates for the host's aggregates: it needs Berth's
	// os-aggregates, served apart from this resource. list --long reads
	// the same detail view.
	var long []map[string]any
	if err := json.Unmarshal([]byte(must("hypervisor", "list", "--long", "-f", "json")), &long); err != nil {
		t.Fatal(err)
	}
	for _, hv := range long {
		if hv["State"] != "up" || hv["vCPUs"] != float64(1000) || hv["Memory MB"] != float64(800000) {
			t.Errorf("hypervisor list --long: %v", hv)
		}
	}
	var stats map[string]any
	if err := json.Unmarshal([]byte(must("--os-compute-api-version", "2.87", "hypervisor", "stats", "show", "-f", "json")), &stats); err != nil {
		t.Fatal(err)
	}
	if stats["count"] != float64(2) || stats["vcpus"] != float64(2000) {
		t.Errorf("hypervisor stats show: %v", stats)
	}
	var zones []map[string]any
	if err := json.Unmarshal([]byte(must("availability", "zone", "list", "--compute", "-f", "json")), &zones); err != nil {
		t.Fatal(err)
	}
	// The CLI reads /os-availability-zone/detail when it may (as with
	// Nova, the internal zone of the control services shows there).
	status := map[string]any{}
	for _, z := range zones {
		status[z["Zone Name"].(string)] = z["Zone Status"]
	}
	if status["nova"] != "available" || status["internal"] != "available" || len(status) != 2 {
		t.Errorf("availability zone list: %v", zones)
	}
	if out := must("availability", "zone", "list", "--compute", "--long", "-f", "json"); !strings.Contains(out, "compute-2") || !strings.Contains(out, "internal") {
		t.Errorf("availability zone list --long: %s", out)
	}

	// Delete: refused while compute-1 runs a server; compute-2 (its agent
	// stopped first, or it registers again) goes with its provider.
	r.boot("compute-1", "6e2b3c4d-5e6f-4a70-8b9c-0d1e2f3a4b5c", "srv1")
	svcs = services()
	out, err := run("compute", "service", "delete", svcs["nova-compute@compute-1"]["ID"].(string))
	if err == nil || !strings.Contains(out, "hosting instances") {
		t.Errorf("delete of a host with an instance: %v\n%s", err, out)
	}
	r.stopAgent("compute-2")
	must("compute", "service", "delete", svcs["nova-compute@compute-2"]["ID"].(string))
	svcs = services()
	if svcs["nova-compute@compute-2"] != nil || svcs["nova-compute@compute-1"] == nil {
		t.Errorf("after delete: %v", svcs)
	}
	if _, err := r.p.Provider(context.Background(), agent.ProviderUUIDForHost("compute-2")); err == nil {
		t.Error("compute-2's provider outlived its service")
	}
}
