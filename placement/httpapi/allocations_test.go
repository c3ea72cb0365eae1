package httpapi

import (
	"testing"
)

const (
	consumer1 = "11111111-0000-4000-8000-0000000000c1"
	consumer2 = "22222222-0000-4000-8000-0000000000c2"
	project   = "33333333-0000-4000-8000-0000000000f1"
	user      = "44444444-0000-4000-8000-0000000000e1"
)

// allocBody is a 1.12+ allocation body; extra adds fields.
func allocBody(rp string, res map[string]int, extra ...any) map[string]any {
	b := map[string]any{
		"allocations": map[string]any{rp: map[string]any{"resources": res}},
		"project_id":  project, "user_id": user,
	}
	for i := 0; i+1 < len(extra); i += 2 {
		b[extra[i].(string)] = extra[i+1]
	}
	return b
}

func TestHTTPAllocationsPerMicroversion(t *testing.T) {
	a := newAPI(t)
	a.provider(rpA)
	a.inventory(rpA, map[string]int{"VCPU": 8, "MEMORY_MB": 1024})
	// 1.0: the list form, no project or user.
	a.must(204, "PUT", "/allocations/"+consumer1, "1.0", map[string]any{"allocations": []any{
		map[string]any{"resource_provider": map[string]any{"uuid": rpA}, "resources": map[string]any{"VCPU": 1}},
	}})
	r := a.must(200, "GET", "/allocations/"+consumer1, "1.0", nil)
	got := r.body["allocations"].(map[string]any)[rpA].(map[string]any)
	if got["resources"].(map[string]any)["VCPU"] != float64(1) {
		t.Fatalf("GET 1.0: %s", r.raw)
	}
	if _, ok := r.body["project_id"]; ok {
		t.Errorf("project_id shown before 1.12: %s", r.raw)
	}
	// 1.12: the dict form; project and user shown.
	a.must(204, "PUT", "/allocations/"+consumer1, "1.12", allocBody(rpA, map[string]int{"VCPU": 2}))
	r = a.must(200, "GET", "/allocations/"+consumer1, "1.12", nil)
	if r.body["project_id"] != project || r.body["user_id"] != user {
		t.Fatalf("GET 1.12: %s", r.raw)
	}
	// 1.28: consumer generations.
	r = a.must(200, "GET", "/allocations/"+consumer1, "1.28", nil)
	cgen := r.body["consumer_generation"]
	a.must(204, "PUT", "/allocations/"+consumer1, "1.28", allocBody(rpA, map[string]int{"VCPU": 3}, "consumer_generation", cgen))
	// 1.38: consumer types, required on write and shown on read.
	a.must(204, "PUT", "/allocations/"+consumer2, "1.38", allocBody(rpA, map[string]int{"MEMORY_MB": 512}, "consumer_generation", nil, "consumer_type", "MIGRATION"))
	r = a.must(200, "GET", "/allocations/"+consumer2, "1.38", nil)
	if r.body["consumer_type"] != "MIGRATION" || r.body["consumer_generation"] != float64(1) {
		t.Fatalf("GET 1.38: %s", r.raw)
	}
	// The consumer written before 1.38 shows as unknown... through usages.
	r = a.must(200, "GET", "/usages?project_id="+project, "1.38", nil)
	usages := r.body["usages"].(map[string]any)
	if mig := usages["MIGRATION"].(map[string]any); mig["MEMORY_MB"] != float64(512) || mig["consumer_count"] != float64(1) {
		t.Fatalf("usages 1.38: %s", r.raw)
	}
	if unk := usages["unknown"].(map[string]any); unk["VCPU"] != float64(3) {
		t.Fatalf("usages 1.38 unknown: %s", r.raw)
	}
	r = a.must(200, "GET", "/usages?project_id="+project+"&consumer_type=MIGRATION", "1.38", nil)
	if len(r.body["usages"].(map[string]any)) != 1 {
		t.Fatalf("usages filtered by type: %s", r.raw)
	}
	r = a.must(200, "GET", "/usages?project_id="+project, "1.9", nil)
	if u := r.body["usages"].(map[string]any); u["VCPU"] != float64(3) || u["MEMORY_MB"] != float64(512) {
		t.Fatalf("usages 1.9: %s", r.raw)
	}
	// Provider views.
	r = a.must(200, "GET", "/resource_providers/"+rpA+"/allocations", "1.0", nil)
	if n := len(r.body["allocations"].(map[string]any)); n != 2 {
		t.Fatalf("provider allocations: %s", r.raw)
	}
	r = a.must(200, "GET", "/resource_providers/"+rpA+"/usages", "1.0", nil)
	if u := r.body["usages"].(map[string]any); u["VCPU"] != float64(3) || u["MEMORY_MB"] != float64(512) {
		t.Fatalf("provider usages: %s", r.raw)
	}
	// 1.28: an empty allocations object with the generation deletes.
	r = a.must(200, "GET", "/allocations/"+consumer2, "1.28", nil)
	a.must(204, "PUT", "/allocations/"+consumer2, "1.28", map[string]any{"allocations": map[string]any{}, "project_id": project, "user_id": user, "consumer_generation": r.body["consumer_generation"]})
	r = a.must(200, "GET", "/allocations/"+consumer2, "1.28", nil)
	if len(r.body["allocations"].(map[string]any)) != 0 {
		t.Fatalf("after the empty PUT: %s", r.raw)
	}
	a.must(204, "DELETE", "/allocations/"+consumer1, "1.0", nil)
	a.must(404, "DELETE", "/allocations/"+consumer1, "1.0", nil)
}

// Generations as Placement keeps them: a write bumps the providers it
// allocates on; DELETE bumps none.
func TestHTTPAllocationGenerations(t *testing.T) {
	a := newAPI(t)
	a.provider(rpA)
	a.provider(rpB)
	a.inventory(rpA, map[string]int{"VCPU": 8})
	a.inventory(rpB, map[string]int{"VCPU": 8})
	ga, gb := a.generation(rpA), a.generation(rpB)
	a.must(204, "PUT", "/allocations/"+consumer1, "1.12", allocBody(rpA, map[string]int{"VCPU": 1}))
	if a.generation(rpA) != ga+1 {
		t.Fatalf("allocating did not bump the provider")
	}
	// Moving the allocation bumps the provider it moves to only.
	a.must(204, "PUT", "/allocations/"+consumer1, "1.12", allocBody(rpB, map[string]int{"VCPU": 1}))
	if a.generation(rpA) != ga+1 || a.generation(rpB) != gb+1 {
		t.Fatalf("move: generations %d %d, want %d %d", a.generation(rpA), a.generation(rpB), ga+1, gb+1)
	}
	a.must(204, "DELETE", "/allocations/"+consumer1, "1.12", nil)
	if a.generation(rpB) != gb+1 {
		t.Fatalf("DELETE bumped the provider")
	}
}

func TestHTTPAllocationErrors(t *testing.T) {
	a := newAPI(t)
	a.provider(rpA)
	a.inventory(rpA, map[string]int{"VCPU": 4, "DISK_GB": 100})
	a.must(204, "PUT", "/allocations/"+consumer1, "1.28", allocBody(rpA, map[string]int{"VCPU": 1}, "consumer_generation", nil))
	runErrCases(t, a, []errCase{
		{desc: "over capacity", method: "PUT", path: "/allocations/" + consumer2, mv: "1.23", body: allocBody(rpA, map[string]int{"VCPU": 5}), status: 409, code: codeDefault, detail: "The requested amount would exceed the capacity"},
		{desc: "no such inventory", method: "PUT", path: "/allocations/" + consumer2, mv: "1.23", body: allocBody(rpA, map[string]int{"MEMORY_MB": 1}), status: 409, detail: "Inventory for 'MEMORY_MB' on resource provider"},
		{desc: "no such class", method: "PUT", path: "/allocations/" + consumer2, mv: "1.23", body: allocBody(rpA, map[string]int{"CUSTOM_NOPE": 1}), status: 400, detail: "Unable to allocate inventory for consumer " + consumer2 + ": No such resource class CUSTOM_NOPE."},
		{desc: "no such provider", method: "PUT", path: "/allocations/" + consumer2, mv: "1.23", body: allocBody(rpB, map[string]int{"VCPU": 1}), status: 400, detail: "Allocation for resource provider '" + rpB + "' that does not exist."},
		{desc: "zero amount", method: "PUT", path: "/allocations/" + consumer2, mv: "1.23", body: allocBody(rpA, map[string]int{"VCPU": 0}), status: 400, detail: "JSON does not validate: 0 is less than the minimum of 1"},
		{desc: "no project before 1.8 is fine but required from 1.8", method: "PUT", path: "/allocations/" + consumer2, mv: "1.8", body: map[string]any{"allocations": []any{map[string]any{"resource_provider": map[string]any{"uuid": rpA}, "resources": map[string]any{"VCPU": 1}}}}, status: 400, detail: "'project_id' is a required property"},
		{desc: "empty list", method: "PUT", path: "/allocations/" + consumer2, mv: "1.0", body: map[string]any{"allocations": []any{}}, status: 400, detail: "Failed validating 'minItems'"},
		{desc: "empty dict before 1.28", method: "PUT", path: "/allocations/" + consumer2, mv: "1.27", body: map[string]any{"allocations": map[string]any{}, "project_id": project, "user_id": user}, status: 400, detail: "does not have enough properties"},
		{desc: "generation required from 1.28", method: "PUT", path: "/allocations/" + consumer2, mv: "1.28", body: allocBody(rpA, map[string]int{"VCPU": 1}), status: 400, detail: "'consumer_generation' is a required property"},
		{desc: "stale consumer generation", method: "PUT", path: "/allocations/" + consumer1, mv: "1.28", body: allocBody(rpA, map[string]int{"VCPU": 1}, "consumer_generation", 7), status: 409, code: codeConcurrentUpdate, detail: "consumer generation conflict - expected 1 but got 7"},
		{desc: "new consumer given a generation", method: "PUT", path: "/allocations/" + consumer2, mv: "1.28", body: allocBody(rpA, map[string]int{"VCPU": 1}, "consumer_generation", 1), status: 409, code: codeConcurrentUpdate, detail: "expected null but got 1"},
		{desc: "existing consumer given null", method: "PUT", path: "/allocations/" + consumer1, mv: "1.28", body: allocBody(rpA, map[string]int{"VCPU": 1}, "consumer_generation", nil), status: 409, code: codeConcurrentUpdate, detail: "expected 1 but got None"},
		{desc: "type required from 1.38", method: "PUT", path: "/allocations/" + consumer2, mv: "1.38", body: allocBody(rpA, map[string]int{"VCPU": 1}, "consumer_generation", nil), status: 400, detail: "'consumer_type' is a required property"},
		{desc: "type refused before 1.38", method: "PUT", path: "/allocations/" + consumer2, mv: "1.37", body: allocBody(rpA, map[string]int{"VCPU": 1}, "consumer_generation", nil, "consumer_type", "INSTANCE"), status: 400, detail: "Additional properties are not allowed ('consumer_type' was unexpected)"},
		{desc: "bad type", method: "PUT", path: "/allocations/" + consumer2, mv: "1.38", body: allocBody(rpA, map[string]int{"VCPU": 1}, "consumer_generation", nil, "consumer_type", "instance"), status: 400, detail: "'instance' does not match '^[A-Z0-9_]+$'"},
		{desc: "bad consumer uuid", method: "PUT", path: "/allocations/not-a-uuid", mv: "1.23", body: allocBody(rpA, map[string]int{"VCPU": 1}), status: 400, detail: "Malformed consumer_uuid: not-a-uuid"},
		{desc: "no allocations to delete", method: "DELETE", path: "/allocations/" + consumer2, mv: "1.23", status: 404, detail: "No allocations for consumer '" + consumer2 + "'"},
		{desc: "GET collection", method: "GET", path: "/allocations", mv: "1.23", status: 405},
		{desc: "usages need a project", method: "GET", path: "/usages", mv: "1.23", status: 400, detail: "'project_id' is a required property"},
		{desc: "usages project too long", method: "GET", path: "/usages?project_id=" + string(make([]byte, 0)) + longID(), mv: "1.23", status: 400, detail: "Failed validating 'maxLength'"},
		{desc: "usages bad type", method: "GET", path: "/usages?project_id=p&consumer_type=lower", mv: "1.38", status: 400, detail: "Failed validating 'pattern'"},
		{desc: "usages before 1.9", method: "GET", path: "/usages?project_id=p", mv: "1.8", status: 404},
	})
}

func longID() string {
	b := make([]byte, 256)
	for i := range b {
		b[i] = 'x'
	}
	return string(b)
}

func TestHTTPPostAllocations(t *testing.T) {
	a := newAPI(t)
	a.provider(rpA)
	a.inventory(rpA, map[string]int{"VCPU": 4})
	a.must(404, "POST", "/allocations", "1.12", map[string]any{})
	// Two consumers in one request.
	a.must(204, "POST", "/allocations", "1.28", map[string]any{
		consumer1: allocBody(rpA, map[string]int{"VCPU": 1}, "consumer_generation", nil),
		consumer2: allocBody(rpA, map[string]int{"VCPU": 2}, "consumer_generation", nil),
	})
	r := a.must(200, "GET", "/resource_providers/"+rpA+"/usages", "1.28", nil)
	if r.body["usages"].(map[string]any)["VCPU"] != float64(3) {
		t.Fatalf("usages after POST: %s", r.raw)
	}
	// All or nothing: one consumer over capacity fails both.
	r = a.call("POST", "/allocations", "1.28", map[string]any{
		consumer1: allocBody(rpA, map[string]int{"VCPU": 1}, "consumer_generation", 1),
		consumer2: allocBody(rpA, map[string]int{"VCPU": 4}, "consumer_generation", 1),
	})
	if r.status != 409 {
		t.Fatalf("over capacity: %d %s", r.status, r.raw)
	}
	// Moving: empty one consumer, grow the other, atomically.
	a.must(204, "POST", "/allocations", "1.28", map[string]any{
		consumer1: map[string]any{"allocations": map[string]any{}, "project_id": project, "user_id": user, "consumer_generation": 1},
		consumer2: allocBody(rpA, map[string]int{"VCPU": 4}, "consumer_generation", 1),
	})
	r = a.must(200, "GET", "/allocations/"+consumer1, "1.28", nil)
	if len(r.body["allocations"].(map[string]any)) != 0 {
		t.Fatalf("consumer1 after the move: %s", r.raw)
	}
	runErrCases(t, a, []errCase{
		{desc: "empty body", method: "POST", path: "/allocations", mv: "1.23", body: map[string]any{}, status: 400, detail: "{} does not have enough properties"},
		{desc: "not a consumer uuid", method: "POST", path: "/allocations", mv: "1.23", body: map[string]any{"x": allocBody(rpA, map[string]int{"VCPU": 1})}, status: 400, detail: "'x' does not match any of the regexes"},
		{desc: "no such class", method: "POST", path: "/allocations", mv: "1.23", body: map[string]any{consumer1: allocBody(rpA, map[string]int{"CUSTOM_NOPE": 1})}, status: 400, detail: "Unable to allocate inventory No such resource class CUSTOM_NOPE."},
		{desc: "consumer type required at 1.38", method: "POST", path: "/allocations", mv: "1.38", body: map[string]any{consumer1: allocBody(rpA, map[string]int{"VCPU": 1}, "consumer_generation", 2)}, status: 400, detail: "'consumer_type' is a required property"},
	})
}
