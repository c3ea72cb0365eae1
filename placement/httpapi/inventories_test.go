package httpapi

import (
	"strings"
	"testing"
)

func TestHTTPInventoryLifecycle(t *testing.T) {
	a := newAPI(t)
	a.provider(rpA)
	base := "/resource_providers/" + rpA + "/inventories"
	// POST one: 201, defaults filled in, absolute Location, generation 1.
	r := a.must(201, "POST", base, "1.0", map[string]any{"resource_class": "DISK_GB", "total": 100})
	if r.header.Get("Location") != a.url+base+"/DISK_GB" {
		t.Errorf("Location %q", r.header.Get("Location"))
	}
	want := map[string]float64{"total": 100, "reserved": 0, "min_unit": 1, "max_unit": 2147483647, "step_size": 1, "allocation_ratio": 1, "resource_provider_generation": 1}
	for k, v := range want {
		if r.body[k] != v {
			t.Errorf("%s = %v, want %v", k, r.body[k], v)
		}
	}
	// PUT one.
	r = a.must(200, "PUT", base+"/DISK_GB", "1.0", map[string]any{"resource_provider_generation": 1, "total": 200, "reserved": 10, "allocation_ratio": 1.5})
	if r.body["total"] != float64(200) || r.body["resource_provider_generation"] != float64(2) {
		t.Fatalf("PUT one: %s", r.raw)
	}
	// PUT all replaces the set.
	r = a.must(200, "PUT", base, "1.0", map[string]any{"resource_provider_generation": 2, "inventories": map[string]any{
		"VCPU": map[string]any{"total": 8, "max_unit": 4}, "MEMORY_MB": map[string]any{"total": 4096},
	}})
	invs := r.body["inventories"].(map[string]any)
	if len(invs) != 2 || invs["VCPU"].(map[string]any)["max_unit"] != float64(4) {
		t.Fatalf("PUT all: %s", r.raw)
	}
	r = a.must(200, "GET", base+"/VCPU", "1.0", nil)
	if r.body["resource_provider_generation"] != float64(3) {
		t.Fatalf("GET one: %s", r.raw)
	}
	a.must(204, "DELETE", base+"/MEMORY_MB", "1.0", nil)
	a.must(404, "GET", base+"/MEMORY_MB", "1.0", nil)
	// DELETE all exists from 1.5.
	a.must(405, "DELETE", base, "1.4", nil)
	a.must(204, "DELETE", base, "1.5", nil)
	r = a.must(200, "GET", base, "1.5", nil)
	if len(r.body["inventories"].(map[string]any)) != 0 || r.body["resource_provider_generation"] != float64(5) {
		t.Fatalf("after DELETE all: %s", r.raw)
	}
}

func TestHTTPInventoryErrors(t *testing.T) {
	a := newAPI(t)
	a.provider(rpA)
	gen := a.inventory(rpA, map[string]int{"VCPU": 8, "DISK_GB": 100})
	a.must(204, "PUT", "/allocations/"+rpC, "1.12", map[string]any{
		"allocations": map[string]any{rpA: map[string]any{"resources": map[string]any{"VCPU": 2}}},
		"project_id":  "p", "user_id": "u",
	})
	gen++ // the claim bumped it
	base := "/resource_providers/" + rpA + "/inventories"
	runErrCases(t, a, []errCase{
		{desc: "stale generation on PUT all", method: "PUT", path: base, mv: "1.23", body: map[string]any{"resource_provider_generation": 0, "inventories": map[string]any{}}, status: 409, code: codeConcurrentUpdate},
		{desc: "stale generation on PUT one", method: "PUT", path: base + "/VCPU", mv: "1.23", body: map[string]any{"resource_provider_generation": 0, "total": 8}, status: 409, code: codeConcurrentUpdate},
		{desc: "removing an allocated class", method: "PUT", path: base, mv: "1.23", body: map[string]any{"resource_provider_generation": gen, "inventories": map[string]any{"DISK_GB": map[string]any{"total": 100}}}, status: 409, code: codeInventoryInUse, detail: "update conflict: Inventory for 'VCPU'"},
		{desc: "deleting all with allocations", method: "DELETE", path: base, mv: "1.23", status: 409, code: codeInventoryInUse, detail: " Inventory for 'VCPU' on resource provider"},
		{desc: "deleting an allocated class (Placement says concurrent_update here)", method: "DELETE", path: base + "/VCPU", mv: "1.23", status: 409, code: codeConcurrentUpdate, detail: "Unable to delete inventory of class VCPU: Inventory for 'VCPU' on resource provider '" + rpA + "' in use."},
		{desc: "total zero", method: "POST", path: base, mv: "1.23", body: map[string]any{"resource_class": "MEMORY_MB", "total": 0}, status: 400, code: codeDefault, detail: "Failed validating 'minimum' in schema['properties']['total']"},
		{desc: "total over the max", method: "POST", path: base, mv: "1.23", body: map[string]any{"resource_class": "MEMORY_MB", "total": 2147483648}, status: 400, detail: "2147483648 is greater than the maximum of 2147483647"},
		{desc: "ratio over the max", method: "POST", path: base, mv: "1.23", body: map[string]any{"resource_class": "MEMORY_MB", "total": 1, "allocation_ratio": 3.5e39}, status: 400, detail: "Failed validating 'maximum'"},
		{desc: "unknown field", method: "POST", path: base, mv: "1.23", body: map[string]any{"resource_class": "MEMORY_MB", "total": 1, "color": "red"}, status: 400, detail: "Additional properties are not allowed ('color' was unexpected)"},
		{desc: "no total", method: "POST", path: base, mv: "1.23", body: map[string]any{"resource_class": "MEMORY_MB"}, status: 400, detail: "'total' is a required property"},
		{desc: "bad class name", method: "POST", path: base, mv: "1.23", body: map[string]any{"resource_class": "memory", "total": 1}, status: 400, detail: "'memory' does not match '^[A-Z0-9_]+$'"},
		{desc: "unknown class on create", method: "POST", path: base, mv: "1.23", body: map[string]any{"resource_class": "CUSTOM_NOPE", "total": 1}, status: 400, detail: "Unable to create inventory for resource provider " + rpA + ": No such resource class CUSTOM_NOPE."},
		{desc: "unknown class on PUT all", method: "PUT", path: base, mv: "1.23", body: map[string]any{"resource_provider_generation": gen, "inventories": map[string]any{"VCPU": map[string]any{"total": 8}, "CUSTOM_NOPE": map[string]any{"total": 1}}}, status: 400, detail: "Unknown resource class in inventory for resource provider " + rpA + ": No such resource class CUSTOM_NOPE."},
		{desc: "already there", method: "POST", path: base, mv: "1.23", body: map[string]any{"resource_class": "VCPU", "total": 1}, status: 409, detail: "already exists"},
		{desc: "reserved equal to total before 1.26", method: "POST", path: base, mv: "1.25", body: map[string]any{"resource_class": "MEMORY_MB", "total": 10, "reserved": 10}, status: 400, detail: "Unable to create inventory for resource provider " + rpA + ": Invalid inventory for 'MEMORY_MB' on resource provider '" + rpA + "'. The reserved value is greater than or equal to total."},
		{desc: "reserved over total from 1.26", method: "PUT", path: base + "/VCPU", mv: "1.26", body: map[string]any{"resource_provider_generation": gen, "total": 10, "reserved": 11}, status: 400, detail: "The reserved value is greater than total."},
		{desc: "PUT one on a missing class", method: "PUT", path: base + "/MEMORY_MB", mv: "1.23", body: map[string]any{"resource_provider_generation": gen, "total": 10}, status: 400, detail: "No inventory record with resource class"},
		{desc: "missing provider", method: "GET", path: "/resource_providers/" + rpB + "/inventories", mv: "1.23", status: 404},
	})
	// Reserved equal to total is fine from 1.26.
	a.must(201, "POST", base, "1.26", map[string]any{"resource_class": "MEMORY_MB", "total": 10, "reserved": 10})
}

// Numbers come back as Placement writes them: a write echoes what it was
// given (16 stays 16), a read gives the stored float (16.0); and a ratio
// so large that the capacity exceeds int64 does not wrap around.
func TestHTTPInventoryNumbers(t *testing.T) {
	a := newAPI(t)
	a.provider(rpA)
	base := "/resource_providers/" + rpA + "/inventories"
	r := a.must(201, "POST", base, "1.39", `{"resource_class": "VCPU", "total": 4, "allocation_ratio": 16}`)
	if !strings.Contains(r.raw, `"allocation_ratio":16,`) && !strings.Contains(r.raw, `"allocation_ratio":16}`) {
		t.Fatalf("POST echo: %s", r.raw)
	}
	r = a.must(200, "GET", base+"/VCPU", "1.39", nil)
	if !strings.Contains(r.raw, `"allocation_ratio":16.0`) {
		t.Fatalf("GET: %s", r.raw)
	}
	a.must(200, "PUT", base+"/VCPU", "1.39", `{"resource_provider_generation": 1, "total": 4, "allocation_ratio": 1e20}`)
	r = a.must(200, "GET", "/allocation_candidates?resources=VCPU:1000000", "1.39", nil)
	if n := len(r.body["allocation_requests"].([]any)); n != 1 {
		t.Fatalf("huge ratio: %d candidates: %s", n, r.raw)
	}
}
