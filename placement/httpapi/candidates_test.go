package httpapi

import (
	"net/url"
	"testing"
)

// candidateUUIDs is the set of providers the answer's allocation requests
// use, one entry per request.
func candidateUUIDs(t *testing.T, r *resp, mv int) []map[string]bool {
	t.Helper()
	var out []map[string]bool
	for _, ar := range r.body["allocation_requests"].([]any) {
		set := map[string]bool{}
		switch allocs := ar.(map[string]any)["allocations"].(type) {
		case []any: // before 1.12
			if mv >= 12 {
				t.Fatalf("list form at 1.%d", mv)
			}
			for _, x := range allocs {
				set[x.(map[string]any)["resource_provider"].(map[string]any)["uuid"].(string)] = true
			}
		case map[string]any:
			if mv < 12 {
				t.Fatalf("dict form at 1.%d", mv)
			}
			for u := range allocs {
				set[u] = true
			}
		}
		out = append(out, set)
	}
	return out
}

func TestHTTPAllocationCandidates(t *testing.T) {
	a := newAPI(t)
	// Two compute nodes; A has a NUMA child with the VCPUs, C has them
	// itself and the AVX trait.
	a.provider(rpA)
	numa := a.provider("aaaaaaaa-0000-4000-8000-0000000000a2", rpA)
	a.provider(rpC)
	a.inventory(rpA, map[string]int{"MEMORY_MB": 4096})
	a.inventory(numa, map[string]int{"VCPU": 8})
	a.inventory(rpC, map[string]int{"VCPU": 8, "MEMORY_MB": 4096})
	a.must(200, "PUT", "/resource_providers/"+rpC+"/traits", "1.6", map[string]any{"traits": []string{"HW_CPU_X86_AVX"}, "resource_provider_generation": 1})
	get := func(mv string, q url.Values) *resp {
		return a.must(200, "GET", "/allocation_candidates?"+q.Encode(), mv, nil)
	}
	// Before 1.29 an answer may not span a tree: only C fits.
	r := get("1.28", url.Values{"resources": {"VCPU:2,MEMORY_MB:1024"}})
	if c := candidateUUIDs(t, r, 28); len(c) != 1 || !c[0][rpC] {
		t.Fatalf("1.28: %v", c)
	}
	// From 1.29 A's tree fits too, across its root and child.
	r = get("1.29", url.Values{"resources": {"VCPU:2,MEMORY_MB:1024"}})
	if c := candidateUUIDs(t, r, 29); len(c) != 2 {
		t.Fatalf("1.29: %v", c)
	}
	if ps := r.body["provider_summaries"].(map[string]any)[numa].(map[string]any); ps["parent_provider_uuid"] != rpA || ps["root_provider_uuid"] != rpA {
		t.Fatalf("summary of the child: %v", ps)
	}
	// The list form before 1.12.
	r = get("1.10", url.Values{"resources": {"VCPU:2"}})
	if c := candidateUUIDs(t, r, 10); len(c) != 2 {
		t.Fatalf("1.10: %v", c)
	}
	// Required and forbidden traits.
	r = get("1.17", url.Values{"resources": {"VCPU:2"}, "required": {"HW_CPU_X86_AVX"}})
	if c := candidateUUIDs(t, r, 17); len(c) != 1 || !c[0][rpC] {
		t.Fatalf("required: %v", c)
	}
	r = get("1.22", url.Values{"resources": {"VCPU:2"}, "required": {"!HW_CPU_X86_AVX"}})
	if c := candidateUUIDs(t, r, 22); len(c) != 1 || !c[0][numa] {
		t.Fatalf("forbidden: %v", c)
	}
	// limit.
	r = get("1.16", url.Values{"resources": {"VCPU:1"}, "limit": {"1"}})
	if c := candidateUUIDs(t, r, 16); len(c) != 1 {
		t.Fatalf("limit: %v", c)
	}
	// Granular groups with isolate: VCPU and MEMORY_MB from different
	// providers is only possible in A's tree.
	// (Mappings in the answer from 1.34.)
	r = get("1.34", url.Values{"resources_CPU": {"VCPU:1"}, "resources_MEM": {"MEMORY_MB:1"}, "group_policy": {"isolate"}})
	c := candidateUUIDs(t, r, 34)
	if len(c) != 1 || !c[0][numa] || !c[0][rpA] {
		t.Fatalf("isolate: %v", c)
	}
	m := r.body["allocation_requests"].([]any)[0].(map[string]any)["mappings"].(map[string]any)
	if m["_CPU"].([]any)[0] != numa || m["_MEM"].([]any)[0] != rpA {
		t.Fatalf("mappings: %v", m)
	}
	// root_required: only trees whose root has the trait.
	r = get("1.35", url.Values{"resources": {"VCPU:1"}, "root_required": {"HW_CPU_X86_AVX"}})
	if c := candidateUUIDs(t, r, 35); len(c) != 1 || !c[0][rpC] {
		t.Fatalf("root_required: %v", c)
	}
	// Summaries show only the requested classes before 1.27.
	r = get("1.26", url.Values{"resources": {"VCPU:1"}})
	if res := r.body["provider_summaries"].(map[string]any)[rpC].(map[string]any)["resources"].(map[string]any); len(res) != 1 {
		t.Fatalf("1.26 summary resources: %v", res)
	}
}

func TestHTTPAllocationCandidateErrors(t *testing.T) {
	a := newAPI(t)
	a.provider(rpA)
	a.inventory(rpA, map[string]int{"VCPU": 8})
	ac := "/allocation_candidates?"
	runErrCases(t, a, []errCase{
		{desc: "before 1.10", method: "GET", path: ac + "resources=VCPU:1", mv: "1.9", status: 404},
		{desc: "no resources", method: "GET", path: ac, mv: "1.10", status: 400, detail: "'resources' is a required property"},
		{desc: "bad resources", method: "GET", path: ac + "resources=VCPU", mv: "1.10", status: 400, detail: "Badly formed resources parameter"},
		{desc: "zero amount", method: "GET", path: ac + "resources=VCPU:0", mv: "1.10", status: 400, detail: "Requested resource VCPU requires amount >= 1"},
		{desc: "unknown class", method: "GET", path: ac + "resources=CUSTOM_NOPE:1", mv: "1.23", status: 400, code: codeDefault, detail: "Invalid resource class in resources parameter: No such resource class CUSTOM_NOPE."},
		{desc: "unknown trait", method: "GET", path: ac + "resources=VCPU:1&required=CUSTOM_NOPE", mv: "1.23", status: 400, detail: "No such trait(s): CUSTOM_NOPE."},
		{desc: "limit zero", method: "GET", path: ac + "resources=VCPU:1&limit=0", mv: "1.16", status: 400, detail: "Failed validating 'pattern' in schema['properties']['limit']"},
		{desc: "limit before 1.16", method: "GET", path: ac + "resources=VCPU:1&limit=1", mv: "1.15", status: 400, detail: "Additional properties are not allowed ('limit' was unexpected)"},
		{desc: "forbidden before 1.22", method: "GET", path: ac + "resources=VCPU:1&required=!HW_CPU_X86_AVX", mv: "1.21", status: 400, detail: "Expected 'required' parameter value of the form: HW_CPU_X86_VMX,CUSTOM_MAGIC"},
		{desc: "suffix before 1.25", method: "GET", path: ac + "resources=VCPU:1&resources1=VCPU:1", mv: "1.24", status: 400, detail: "Additional properties are not allowed ('resources1' was unexpected)"},
		{desc: "word suffix before 1.33", method: "GET", path: ac + "resources_X=VCPU:1", mv: "1.32", status: 400, detail: "'resources_X' does not match any of the regexes"},
		{desc: "group policy needed", method: "GET", path: ac + "resources1=VCPU:1&resources2=VCPU:1", mv: "1.25", status: 400, detail: "The \"group_policy\" parameter is required"},
		{desc: "bad group policy", method: "GET", path: ac + "resources=VCPU:1&group_policy=maybe", mv: "1.25", status: 400, detail: "'maybe' is not one of ['none', 'isolate']"},
		{desc: "orphaned traits", method: "GET", path: ac + "resources=VCPU:1&required1=HW_CPU_X86_AVX", mv: "1.25", status: 400, detail: "Found the following orphaned traits keys: required1"},
		{desc: "conflicting traits", method: "GET", path: ac + "resources=VCPU:1&required=HW_CPU_X86_AVX,!HW_CPU_X86_AVX", mv: "1.25", status: 400, detail: "Conflicting required and forbidden traits found in the following traits keys: required: (HW_CPU_X86_AVX)"},
		{desc: "root_required twice", method: "GET", path: ac + "resources=VCPU:1&root_required=HW_CPU_X86_AVX&root_required=HW_CPU_X86_SSE", mv: "1.35", status: 400, code: codeDuplicateKey},
		{desc: "root_required conflict", method: "GET", path: ac + "resources=VCPU:1&root_required=HW_CPU_X86_AVX,!HW_CPU_X86_AVX", mv: "1.35", status: 400, code: codeBadValue},
		{desc: "same_subtree with the unsuffixed group", method: "GET", path: ac + "resources=VCPU:1&same_subtree=,_A", mv: "1.36", status: 400, code: codeBadValue},
		{desc: "same_subtree unknown suffix", method: "GET", path: ac + "resources_A=VCPU:1&same_subtree=_A,_B", mv: "1.36", status: 400, code: codeBadValue, detail: "Real suffixes should be specified in `same_subtree`: ['_B'] not found in ['_A']."},
		{desc: "resourceless group outside same_subtree", method: "GET", path: ac + "resources_A=VCPU:1&required_B=HW_CPU_X86_AVX", mv: "1.36", status: 400, code: codeBadValue, detail: "bad group(s) - ['_B']"},
		{desc: "in_tree not a uuid", method: "GET", path: ac + "resources=VCPU:1&in_tree=x", mv: "1.31", status: 400, detail: "Expected 'in_tree' parameter to be a format of uuid"},
		{desc: "any-of traits before 1.39", method: "GET", path: ac + "resources=VCPU:1&required=in:HW_CPU_X86_AVX,HW_CPU_X86_SSE", mv: "1.38", status: 400, detail: "only supported since microversion 1.39"},
	})
}
