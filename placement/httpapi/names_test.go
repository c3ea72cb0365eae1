package httpapi

import (
	"strings"
	"testing"
)

func TestHTTPResourceClasses(t *testing.T) {
	a := newAPI(t)
	r := a.must(200, "GET", "/resource_classes", "1.2", nil)
	if n := len(r.body["resource_classes"].([]any)); n != 21 {
		t.Fatalf("%d standard classes, want 21", n)
	}
	// 1.2: POST creates, PUT renames a custom class.
	r = a.must(201, "POST", "/resource_classes", "1.2", map[string]any{"name": "CUSTOM_A"})
	if r.header.Get("Location") != a.url+"/resource_classes/CUSTOM_A" {
		t.Errorf("Location %q", r.header.Get("Location"))
	}
	a.must(200, "PUT", "/resource_classes/CUSTOM_A", "1.2", map[string]any{"name": "CUSTOM_B"})
	a.must(404, "GET", "/resource_classes/CUSTOM_A", "1.2", nil)
	a.must(200, "GET", "/resource_classes/CUSTOM_B", "1.2", nil)
	// 1.7: PUT creates (201) or confirms (204).
	a.must(201, "PUT", "/resource_classes/CUSTOM_C", "1.7", nil)
	a.must(204, "PUT", "/resource_classes/CUSTOM_C", "1.7", nil)
	a.must(204, "DELETE", "/resource_classes/CUSTOM_C", "1.7", nil)
	long := "CUSTOM_" + strings.Repeat("X", 250)
	runErrCases(t, a, []errCase{
		{desc: "before 1.2", method: "GET", path: "/resource_classes", mv: "1.1", status: 404},
		{desc: "duplicate", method: "POST", path: "/resource_classes", mv: "1.23", body: map[string]any{"name": "CUSTOM_B"}, status: 409, code: codeDefault},
		{desc: "not custom", method: "POST", path: "/resource_classes", mv: "1.23", body: map[string]any{"name": "FOO"}, status: 400, detail: "'FOO' does not match '^CUSTOM_[A-Z0-9_]+$'"},
		{desc: "too long", method: "POST", path: "/resource_classes", mv: "1.23", body: map[string]any{"name": long}, status: 400, detail: "Failed validating 'maxLength' in schema['properties']['name']"},
		{desc: "too long on PUT 1.7", method: "PUT", path: "/resource_classes/" + long, mv: "1.7", status: 400, detail: "Failed validating 'maxLength'"},
		{desc: "rename a standard class", method: "PUT", path: "/resource_classes/VCPU", mv: "1.2", body: map[string]any{"name": "CUSTOM_V"}, status: 400, detail: "Cannot update standard resource class VCPU"},
		{desc: "delete a standard class", method: "DELETE", path: "/resource_classes/VCPU", mv: "1.23", status: 400},
		{desc: "delete missing", method: "DELETE", path: "/resource_classes/CUSTOM_NONE", mv: "1.23", status: 404},
	})
	// A class with inventory cannot go.
	a.provider(rpA)
	a.inventory(rpA, map[string]int{"CUSTOM_B": 1})
	a.must(409, "DELETE", "/resource_classes/CUSTOM_B", "1.23", nil)
}

func TestHTTPTraits(t *testing.T) {
	a := newAPI(t)
	a.must(404, "GET", "/traits", "1.5", nil)
	a.must(201, "PUT", "/traits/CUSTOM_X", "1.6", nil)
	a.must(204, "PUT", "/traits/CUSTOM_X", "1.6", nil)
	a.must(204, "GET", "/traits/CUSTOM_X", "1.6", nil)
	a.must(204, "GET", "/traits/COMPUTE_STATUS_DISABLED", "1.6", nil)
	r := a.must(200, "GET", "/traits?name=startswith:CUSTOM_", "1.6", nil)
	if got := r.body["traits"].([]any); len(got) != 1 || got[0] != "CUSTOM_X" {
		t.Fatalf("custom traits: %v", got)
	}
	runErrCases(t, a, []errCase{
		{desc: "not custom", method: "PUT", path: "/traits/FOO", mv: "1.23", status: 400, detail: "The trait is invalid"},
		{desc: "standard cannot go", method: "DELETE", path: "/traits/COMPUTE_NODE", mv: "1.23", status: 400},
		{desc: "missing", method: "GET", path: "/traits/CUSTOM_NONE", mv: "1.23", status: 404},
		{desc: "bad filter", method: "GET", path: "/traits?associated=maybe", mv: "1.23", status: 400, detail: "only accepts"},
		{desc: "unknown filter", method: "GET", path: "/traits?color=red", mv: "1.23", status: 400, detail: "Additional properties are not allowed ('color' was unexpected)"},
	})
	// Provider traits, with generations.
	a.provider(rpA)
	base := "/resource_providers/" + rpA + "/traits"
	r = a.must(200, "GET", base, "1.6", nil)
	if got := r.body["traits"].([]any); len(got) != 0 {
		t.Fatalf("new provider's traits: %s", r.raw)
	}
	r = a.must(200, "PUT", base, "1.6", map[string]any{"traits": []string{"CUSTOM_X", "HW_CPU_X86_AVX"}, "resource_provider_generation": 0})
	if got := r.body["traits"].([]any); len(got) != 2 || got[0] != "CUSTOM_X" || r.body["resource_provider_generation"] != float64(1) {
		t.Fatalf("set traits (sorted by name, as Placement answers a PUT): %s", r.raw)
	}
	r = a.must(200, "GET", base, "1.6", nil)
	if got := r.body["traits"].([]any); len(got) != 2 || got[0] != "HW_CPU_X86_AVX" {
		t.Fatalf("get traits (standard first, as Placement lists them by id): %s", r.raw)
	}
	runErrCases(t, a, []errCase{
		{desc: "stale generation", method: "PUT", path: base, mv: "1.23", body: map[string]any{"traits": []string{}, "resource_provider_generation": 0}, status: 409, code: codeConcurrentUpdate},
		{desc: "unknown trait", method: "PUT", path: base, mv: "1.23", body: map[string]any{"traits": []string{"CUSTOM_NOPE"}, "resource_provider_generation": 1}, status: 400, detail: "No such trait"},
		{desc: "no generation", method: "PUT", path: base, mv: "1.23", body: map[string]any{"traits": []string{}}, status: 400, detail: "'resource_provider_generation' is a required property"},
		{desc: "trait in use", method: "DELETE", path: "/traits/CUSTOM_X", mv: "1.23", status: 409},
	})
	a.must(204, "DELETE", base, "1.6", nil)
	a.must(204, "DELETE", "/traits/CUSTOM_X", "1.6", nil)
}

func TestHTTPAggregates(t *testing.T) {
	a := newAPI(t)
	a.provider(rpA)
	base := "/resource_providers/" + rpA + "/aggregates"
	a.must(404, "GET", base, "1.0", nil)
	// 1.1: a bare list, no generation, no bump.
	r := a.must(200, "PUT", base, "1.1", []string{agg})
	if got := r.body["aggregates"].([]any); len(got) != 1 || got[0] != agg {
		t.Fatalf("1.1 PUT: %s", r.raw)
	}
	if _, ok := r.body["resource_provider_generation"]; ok {
		t.Fatalf("generation at 1.1: %s", r.raw)
	}
	if g := a.generation(rpA); g != 0 {
		t.Fatalf("generation %d after a 1.1 PUT, want 0", g)
	}
	// 1.19: with the generation, which the PUT bumps; the answer echoes
	// the list as sent.
	r = a.must(200, "PUT", base, "1.19", map[string]any{"aggregates": []string{rpC, rpB}, "resource_provider_generation": 0})
	if got := r.body["aggregates"].([]any); got[0] != rpC || got[1] != rpB || r.body["resource_provider_generation"] != float64(1) {
		t.Fatalf("1.19 PUT: %s", r.raw)
	}
	r = a.must(200, "PUT", base, "1.19", map[string]any{"aggregates": []string{}, "resource_provider_generation": 1})
	if got := r.body["aggregates"].([]any); len(got) != 0 {
		t.Fatalf("cleared: %s", r.raw)
	}
	runErrCases(t, a, []errCase{
		{desc: "stale generation", method: "PUT", path: base, mv: "1.23", body: map[string]any{"aggregates": []string{}, "resource_provider_generation": 0}, status: 409, code: codeConcurrentUpdate},
		{desc: "old payload at 1.19", method: "PUT", path: base, mv: "1.19", body: []string{agg}, status: 400, detail: "is not of type 'object'"},
		{desc: "not uuids", method: "PUT", path: base, mv: "1.19", body: map[string]any{"aggregates": []string{"x"}, "resource_provider_generation": 2}, status: 400, detail: "'x' is not a 'uuid'"},
		{desc: "duplicates", method: "PUT", path: base, mv: "1.1", body: []string{agg, agg}, status: 400, detail: "has non-unique elements"},
		{desc: "missing provider", method: "GET", path: "/resource_providers/" + rpB + "/aggregates", mv: "1.23", status: 404},
	})
}
