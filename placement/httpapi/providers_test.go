package httpapi

import (
	"strings"
	"testing"

	"github.com/berth-project/berth/internal/pycompat"
)

const (
	rpA = "aaaaaaaa-0000-4000-8000-000000000001"
	rpB = "bbbbbbbb-0000-4000-8000-000000000002"
	rpC = "cccccccc-0000-4000-8000-000000000003"
	agg = "dddddddd-0000-4000-8000-000000000004"
)

func TestHTTPCreateProviderPerMicroversion(t *testing.T) {
	a := newAPI(t)
	// 1.0: 201, no body, an absolute Location.
	r := a.must(201, "POST", "/resource_providers", "1.0", map[string]any{"name": "one", "uuid": rpA})
	if r.raw != "" || r.header.Get("Location") != a.url+"/resource_providers/"+rpA {
		t.Fatalf("1.0 create: body %q location %q", r.raw, r.header.Get("Location"))
	}
	// 1.20: 200 with the provider; no uuid given means a new one.
	r = a.must(200, "POST", "/resource_providers", "1.20", map[string]any{"name": "two"})
	if u, _ := r.body["uuid"].(string); !pycompat.IsUUIDLike(u) || r.body["generation"] != float64(0) || r.body["root_provider_uuid"] != u {
		t.Fatalf("1.20 create: %s", r.raw)
	}
	// Links grow with the microversion.
	for mv, rels := range map[string][]string{
		"1.0":  {"self", "inventories", "usages"},
		"1.6":  {"self", "inventories", "usages", "aggregates", "traits"},
		"1.11": {"self", "inventories", "usages", "aggregates", "traits", "allocations"},
	} {
		r := a.must(200, "GET", "/resource_providers/"+rpA, mv, nil)
		var got []string
		for _, l := range r.body["links"].([]any) {
			got = append(got, l.(map[string]any)["rel"].(string))
		}
		if strings.Join(got, ",") != strings.Join(rels, ",") {
			t.Errorf("links at %s: %v, want %v", mv, got, rels)
		}
		if _, ok := r.body["parent_provider_uuid"]; ok && mv < "1.14" {
			t.Errorf("parent_provider_uuid at %s", mv)
		}
	}
}

func TestHTTPProviderErrors(t *testing.T) {
	a := newAPI(t)
	a.provider(rpA)
	a.provider(rpB, rpA)
	long := strings.Repeat("x", 201)
	runErrCases(t, a, []errCase{
		{desc: "duplicate name", method: "POST", path: "/resource_providers", mv: "1.23", body: map[string]any{"name": "rp-" + rpA}, status: 409, code: codeDuplicateName, detail: "Conflicting resource provider name: rp-" + rpA + " already exists"},
		{desc: "duplicate uuid", method: "POST", path: "/resource_providers", mv: "1.23", body: map[string]any{"name": "new", "uuid": rpA}, status: 409, detail: "Conflicting resource provider uuid"},
		{desc: "bad uuid", method: "POST", path: "/resource_providers", mv: "1.23", body: map[string]any{"name": "x", "uuid": "not a uuid"}, status: 400, code: codeDefault, detail: "Failed validating 'format' in schema['properties']['uuid']"},
		{desc: "name too long", method: "POST", path: "/resource_providers", mv: "1.23", body: map[string]any{"name": long}, status: 400, detail: "Failed validating 'maxLength'"},
		{desc: "parent before 1.14", method: "POST", path: "/resource_providers", mv: "1.13", body: map[string]any{"name": "x", "parent_provider_uuid": rpA}, status: 400, detail: "Additional properties are not allowed ('parent_provider_uuid' was unexpected)"},
		{desc: "unknown parent", method: "POST", path: "/resource_providers", mv: "1.14", body: map[string]any{"name": "x", "parent_provider_uuid": rpC}, status: 400, detail: "parent provider UUID does not exist"},
		{desc: "show missing", method: "GET", path: "/resource_providers/" + rpC, mv: "1.23", status: 404, code: codeDefault},
		{desc: "delete a parent", method: "DELETE", path: "/resource_providers/" + rpA, mv: "1.23", status: 409, code: codeCannotDelParent},
		{desc: "delete missing", method: "DELETE", path: "/resource_providers/" + rpC, mv: "1.23", status: 404},
		{desc: "un-parent before 1.37", method: "PUT", path: "/resource_providers/" + rpB, mv: "1.36", body: map[string]any{"name": "b", "parent_provider_uuid": nil}, status: 400, detail: "un-parenting a provider is not currently allowed"},
		{desc: "loop", method: "PUT", path: "/resource_providers/" + rpA, mv: "1.37", body: map[string]any{"name": "a", "parent_provider_uuid": rpB}, status: 400, detail: "creating loop in the provider tree is not allowed"},
		{desc: "list by bad uuid", method: "GET", path: "/resource_providers?uuid=nope", mv: "1.23", status: 400, detail: "Invalid query string parameters: 'nope' is not a 'uuid'"},
		{desc: "list filter newer than the microversion", method: "GET", path: "/resource_providers?in_tree=" + rpA, mv: "1.13", status: 400, detail: "Additional properties are not allowed ('in_tree' was unexpected)"},
		{desc: "list by unknown trait", method: "GET", path: "/resource_providers?required=CUSTOM_NOPE", mv: "1.23", status: 400, detail: "No such trait(s): CUSTOM_NOPE"},
	})
}

func TestHTTPProviderInUseAndDelete(t *testing.T) {
	a := newAPI(t)
	a.provider(rpA)
	a.inventory(rpA, map[string]int{"VCPU": 4})
	a.must(204, "PUT", "/allocations/"+rpC, "1.12", map[string]any{
		"allocations": map[string]any{rpA: map[string]any{"resources": map[string]any{"VCPU": 1}}},
		"project_id":  "p", "user_id": "u",
	})
	r := a.must(409, "DELETE", "/resource_providers/"+rpA, "1.23", nil)
	if r.errCode() != codeProviderInUse {
		t.Fatalf("code %q", r.errCode())
	}
	a.must(204, "DELETE", "/allocations/"+rpC, "1.23", nil)
	a.must(204, "DELETE", "/resource_providers/"+rpA, "1.23", nil)
	a.must(404, "GET", "/resource_providers/"+rpA, "1.23", nil)
	// The name is free again.
	a.must(200, "POST", "/resource_providers", "1.20", map[string]any{"name": "rp-" + rpA})
}

func TestHTTPUpdateProvider(t *testing.T) {
	a := newAPI(t)
	a.provider(rpA)
	a.provider(rpB)
	a.provider(rpC, rpA)
	// Rename; no generation bump, as in Placement.
	r := a.must(200, "PUT", "/resource_providers/"+rpA, "1.14", map[string]any{"name": "renamed"})
	if r.body["name"] != "renamed" || r.body["generation"] != float64(0) {
		t.Fatalf("rename: %s", r.raw)
	}
	r = a.call("PUT", "/resource_providers/"+rpB, "1.23", map[string]any{"name": "renamed"})
	if r.status != 409 || r.errCode() != codeDuplicateName {
		t.Fatalf("rename onto a taken name: %d %s", r.status, r.raw)
	}
	// 1.37 re-parents, carrying the subtree's root.
	a.must(200, "PUT", "/resource_providers/"+rpA, "1.37", map[string]any{"name": "renamed", "parent_provider_uuid": rpB})
	r = a.must(200, "GET", "/resource_providers/"+rpC, "1.37", nil)
	if r.body["root_provider_uuid"] != rpB || r.body["parent_provider_uuid"] != rpA {
		t.Fatalf("grandchild after the move: %s", r.raw)
	}
	// Before 1.37 a provider with a parent cannot move to another one.
	r = a.call("PUT", "/resource_providers/"+rpC, "1.36", map[string]any{"name": "c", "parent_provider_uuid": rpB})
	if r.status != 400 || !strings.Contains(r.errDetail(), "re-parenting a provider is not currently allowed") {
		t.Fatalf("re-parent at 1.36: %d %s", r.status, r.raw)
	}
}

func TestHTTPListProviderFilters(t *testing.T) {
	a := newAPI(t)
	a.provider(rpA)
	a.provider(rpB, rpA)
	a.provider(rpC)
	a.inventory(rpA, map[string]int{"VCPU": 8, "MEMORY_MB": 1024})
	a.inventory(rpC, map[string]int{"VCPU": 2})
	a.must(201, "PUT", "/traits/CUSTOM_GOLD", "1.6", nil)
	a.must(200, "PUT", "/resource_providers/"+rpC+"/traits", "1.6", map[string]any{"traits": []string{"CUSTOM_GOLD"}, "resource_provider_generation": 1})
	a.must(200, "PUT", "/resource_providers/"+rpB+"/aggregates", "1.19", map[string]any{"aggregates": []string{agg}, "resource_provider_generation": 0})
	for _, tc := range []struct {
		desc, query, mv string
		want            []string
	}{
		{"all", "", "1.0", []string{rpA, rpB, rpC}},
		{"by name", "?name=rp-" + rpC, "1.0", []string{rpC}},
		{"by uuid", "?uuid=" + rpB, "1.0", []string{rpB}},
		{"by aggregate", "?member_of=" + agg, "1.3", []string{rpB}},
		{"by any aggregate", "?member_of=in:" + agg + "," + rpA, "1.3", []string{rpB}},
		{"not in the aggregate", "?member_of=!" + agg, "1.32", []string{rpA, rpC}},
		{"by capacity", "?resources=VCPU:4", "1.4", []string{rpA}},
		{"by tree", "?in_tree=" + rpB, "1.14", []string{rpA, rpB}},
		{"by trait", "?required=CUSTOM_GOLD", "1.18", []string{rpC}},
		{"without a trait", "?required=!CUSTOM_GOLD", "1.22", []string{rpA, rpB}},
		{"any of traits", "?required=in:CUSTOM_GOLD,HW_CPU_X86_AVX", "1.39", []string{rpC}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			r := a.must(200, "GET", "/resource_providers"+tc.query, tc.mv, nil)
			got := map[string]bool{}
			for _, p := range r.body["resource_providers"].([]any) {
				got[p.(map[string]any)["uuid"].(string)] = true
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for _, w := range tc.want {
				if !got[w] {
					t.Fatalf("got %v, want %v", got, tc.want)
				}
			}
		})
	}
}
