package httpapi

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/placement"
)

const (
	rshRP    = "11111111-1111-1111-1111-111111111111"
	rshChild = "22222222-2222-2222-2222-222222222222"
	rshC1    = "aaaaaaaa-1111-1111-1111-111111111111"
)

// rshDo sends one request to the placement API at version and returns the
// status and the first error's code and detail (empty on success).
func rshDo(t *testing.T, url, method, path, version, token, ctype, body string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest(method, url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Auth-Token", token)
	req.Header.Set("OpenStack-API-Version", "placement "+version)
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var e struct {
		Errors []struct {
			Code   string `json:"code"`
			Detail string `json:"detail"`
		} `json:"errors"`
	}
	if resp.StatusCode >= 400 {
		if err := json.Unmarshal(b, &e); err != nil || len(e.Errors) == 0 {
			t.Fatalf("%s %s: %d with body %q", method, path, resp.StatusCode, b)
		}
		return resp.StatusCode, e.Errors[0].Code, e.Errors[0].Detail
	}
	return resp.StatusCode, "", ""
}

// rshBody builds a reshaper body: inventories of rshRP (at generation gen)
// and the consumers given, each a JSON object text.
func rshBody(gen int64, invs string, consumers map[string]string) string {
	var parts []string
	for _, c := range sortedKeys(consumers) {
		parts = append(parts, fmt.Sprintf("%q: %s", c, consumers[c]))
	}
	return fmt.Sprintf(`{"inventories": {%q: {"resource_provider_generation": %d, "inventories": %s}}, "allocations": {%s}}`,
		rshRP, gen, invs, strings.Join(parts, ", "))
}

// TestReshapeHTTPValidation checks the body against Placement's reshaper
// schemas of 1.30, 1.34 and 1.38 (messages as Placement 8.0 answers them),
// and the version, policy and content-type gates.
func TestReshapeHTTPValidation(t *testing.T) {
	s, _ := newStarted(t)
	srv := newServer(t, s)
	mkProvider(t, s, rshRP, "", map[string]etcdschema.Inventory{placement.VCPU: inv(8)})
	const invs = `{"VCPU": {"total": 8}}`
	base := `"allocations": {}, "project_id": "p", "user_id": "u", "consumer_generation": null`
	one := func(extra string) map[string]string {
		return map[string]string{rshC1: "{" + base + extra + "}"}
	}
	cases := []struct {
		desc, version, body string
		status              int
		code, detail        string
	}{
		{"before 1.30", "1.29", rshBody(1, invs, nil), 404, "", ""},
		{"not an object", "1.30", `[]`, 400, "", "JSON does not validate: [] is not of type 'object'"},
		{"no inventories", "1.30", `{"allocations": {}}`, 400, "", "'inventories' is a required property"},
		{"no allocations", "1.30", `{"inventories": {}}`, 400, "", "'allocations' is a required property"},
		{"unknown top key", "1.30", `{"inventories": {}, "allocations": {}, "cows": 1}`, 400, "", "Additional properties are not allowed ('cows' was unexpected)"},
		{"empty inventories", "1.30", `{"inventories": {}, "allocations": {}}`, 400, "", "{} does not have enough properties"},
		{"provider key not a uuid", "1.30", `{"inventories": {"x": {}}, "allocations": {}}`, 400, "", "'x' does not match any of the regexes: '^[0-9a-fA-F-]{36}$'"},
		{"consumer keys not uuids", "1.30", `{"inventories": {"` + rshRP + `": {}}, "allocations": {"y": 1, "x": 2}}`, 400, "", "'x', 'y' do not match any of the regexes"},
		{"allocations not an object", "1.30", `{"inventories": {"` + rshRP + `": {}}, "allocations": []}`, 400, "", "[] is not of type 'object'"},
		{"provider without generation", "1.30", `{"inventories": {"` + rshRP + `": {"inventories": {}}}, "allocations": {}}`, 400, "", "'resource_provider_generation' is a required property"},
		{"generation null", "1.30", `{"inventories": {"` + rshRP + `": {"resource_provider_generation": null, "inventories": {}}}, "allocations": {}}`, 400, "", "None is not of type 'integer'"},
		{"inventory field unknown", "1.30", rshBody(1, `{"VCPU": {"total": 8, "bad_field": 1}}`, nil), 400, "", "'bad_field' was unexpected"},
		{"inventory total 0", "1.30", rshBody(1, `{"VCPU": {"total": 0}}`, nil), 400, "", "0 is less than the minimum of 1"},
		{"consumer error before a deeper inventory error", "1.30", rshBody(1, `{"VCPU": {"total": 0}}`, map[string]string{rshC1: `{}`}), 400, "", "'allocations' is a required property"},
		{"consumer without generation", "1.30", rshBody(1, invs, map[string]string{rshC1: `{"allocations": {}, "project_id": "p", "user_id": "u"}`}), 400, "", "'consumer_generation' is a required property"},
		{"consumer without project", "1.30", rshBody(1, invs, map[string]string{rshC1: `{"allocations": {}, "consumer_generation": null}`}), 400, "", "'project_id' is a required property"},
		{"empty project", "1.30", rshBody(1, invs, map[string]string{rshC1: `{"allocations": {}, "project_id": "", "user_id": "u", "consumer_generation": null}`}), 400, "", "'' is too short"},
		{"generation a string", "1.30", rshBody(1, invs, map[string]string{rshC1: `{"allocations": {}, "project_id": "p", "user_id": "u", "consumer_generation": "1"}`}), 400, "", "'1' is not of type 'integer', 'null'"},
		{"resources empty", "1.30", rshBody(1, invs, map[string]string{rshC1: `{"allocations": {"` + rshRP + `": {"resources": {}}}, "project_id": "p", "user_id": "u", "consumer_generation": null}`}), 400, "", "{} does not have enough properties"},
		{"amount 0", "1.30", rshBody(1, invs, map[string]string{rshC1: `{"allocations": {"` + rshRP + `": {"resources": {"VCPU": 0}}}, "project_id": "p", "user_id": "u", "consumer_generation": null}`}), 400, "", "0 is less than the minimum of 1"},
		{"class key lower case", "1.30", rshBody(1, invs, map[string]string{rshC1: `{"allocations": {"` + rshRP + `": {"resources": {"vcpu": 1}}}, "project_id": "p", "user_id": "u", "consumer_generation": null}`}), 400, "", "'vcpu' does not match any of the regexes: '^[A-Z0-9_]+$'"},
		{"allocation provider key not a uuid", "1.30", rshBody(1, invs, map[string]string{rshC1: `{"allocations": {"nope": {"resources": {"VCPU": 1}}}, "project_id": "p", "user_id": "u", "consumer_generation": null}`}), 400, "", "'nope' does not match any of the regexes"},
		{"allocation generation a string", "1.30", rshBody(1, invs, map[string]string{rshC1: `{"allocations": {"` + rshRP + `": {"resources": {"VCPU": 1}, "generation": "x"}}, "project_id": "p", "user_id": "u", "consumer_generation": null}`}), 400, "", "'x' is not of type 'integer'"},
		{"mappings before 1.34", "1.33", rshBody(1, invs, one(`, "mappings": {"": ["`+rshRP+`"]}`)), 400, "", "Additional properties are not allowed ('mappings' was unexpected)"},
		{"mappings empty", "1.34", rshBody(1, invs, one(`, "mappings": {}`)), 400, "", "{} does not have enough properties"},
		{"mapping list empty", "1.34", rshBody(1, invs, one(`, "mappings": {"a": []}`)), 400, "", "[] is too short"},
		{"mapping not a list", "1.34", rshBody(1, invs, one(`, "mappings": {"a": "x"}`)), 400, "", "'x' is not of type 'array'"},
		{"mapping not a uuid", "1.34", rshBody(1, invs, one(`, "mappings": {"a": ["nope"]}`)), 400, "", "'nope' is not a 'uuid'"},
		{"mapping item a number", "1.34", rshBody(1, invs, one(`, "mappings": {"a": [1]}`)), 400, "", "1 is not of type 'string'"},
		{"consumer_type before 1.38", "1.37", rshBody(1, invs, one(`, "consumer_type": "INSTANCE"`)), 400, "", "Additional properties are not allowed ('consumer_type' was unexpected)"},
		{"consumer_type required at 1.38", "1.38", rshBody(1, invs, one(``)), 400, "", "'consumer_type' is a required property"},
		{"consumer_type lower case", "1.38", rshBody(1, invs, one(`, "consumer_type": "vm"`)), 400, "", "'vm' does not match '^[A-Z0-9_]+$'"},
		{"unknown provider", "1.30", `{"inventories": {"` + rshChild + `": {"resource_provider_generation": 0, "inventories": {}}}, "allocations": {}}`, 400, codeProviderNotFound, "Resource provider " + rshChild + " in inventories not found"},
		{"stale provider generation", "1.30", rshBody(7, invs, nil), 409, codeConcurrentUpdate, "resource provider generation conflict for provider " + rshRP + ": actual: 1, given: 7"},
		{"unknown class", "1.30", rshBody(1, `{"DISK_OF_STEEL": {"total": 1}}`, nil), 400, codeDefault, "malformed reshaper data: No such resource class DISK_OF_STEEL."},
		{"class key that cannot be a class", "1.30", rshBody(1, `{"vcpu": {"total": 1}}`, nil), 400, codeDefault, "No such resource class vcpu."},
		{"consumer generation for a new consumer", "1.30", rshBody(1, invs, map[string]string{rshC1: `{"allocations": {}, "project_id": "p", "user_id": "u", "consumer_generation": 3}`}), 409, codeConcurrentUpdate, "consumer generation conflict - expected null but got 3"},
		{"allocation on a missing provider", "1.30", rshBody(1, invs, map[string]string{rshC1: `{"allocations": {"` + rshChild + `": {"resources": {"VCPU": 1}}}, "project_id": "p", "user_id": "u", "consumer_generation": null}`}), 400, codeDefault, "Allocation for resource provider '" + rshChild + "' that does not exist."},
		{"over capacity", "1.30", rshBody(1, invs, map[string]string{rshC1: `{"allocations": {"` + rshRP + `": {"resources": {"VCPU": 9}}}, "project_id": "p", "user_id": "u", "consumer_generation": null}`}), 409, codeDefault, "Unable to allocate inventory: Unable to create allocation for 'VCPU' on resource provider '" + rshRP + "'. The requested amount would exceed the capacity."},
		{"no such inventory", "1.30", rshBody(1, invs, map[string]string{rshC1: `{"allocations": {"` + rshRP + `": {"resources": {"DISK_GB": 1}}}, "project_id": "p", "user_id": "u", "consumer_generation": null}`}), 409, codeDefault, "Inventory for 'DISK_GB' on resource provider '" + rshRP + "' invalid."},
	}
	for _, tc := range cases {
		status, code, detail := rshDo(t, srv.URL, "POST", "/reshaper", tc.version, "admin", "application/json", tc.body)
		if status != tc.status || (tc.code != "" && code != tc.code) || !strings.Contains(detail, tc.detail) {
			t.Errorf("%s (%s): got %d %s %q, want %d %s %q", tc.desc, tc.version, status, code, detail, tc.status, tc.code, tc.detail)
		}
	}
	// Nothing above changed the provider.
	if p, _ := s.Provider(testCtx(t), rshRP); p.Generation != 1 {
		t.Fatalf("generation %d after refused reshapes, want 1", p.Generation)
	}
	if st, _, _ := rshDo(t, srv.URL, "POST", "/reshaper", "1.30", "user", "application/json", rshBody(1, invs, nil)); st != 403 {
		t.Errorf("non-admin: %d, want 403", st)
	}
	if st, _, _ := rshDo(t, srv.URL, "POST", "/reshaper", "1.30", "admin", "text/plain", rshBody(1, invs, nil)); st != 415 {
		t.Errorf("text/plain body: %d, want 415", st)
	}
	if st, _, _ := rshDo(t, srv.URL, "GET", "/reshaper", "1.30", "admin", "", ""); st != 405 {
		t.Errorf("GET: %d, want 405", st)
	}
	// A valid body passes at each schema version, with what that version
	// adds.
	valid := []struct{ version, extra string }{
		{"1.30", ""},
		{"1.34", `, "mappings": {"": ["` + rshRP + `"]}`},
		{"1.38", `, "consumer_type": "INSTANCE"`},
	}
	for i, v := range valid {
		p, _ := s.Provider(testCtx(t), rshRP)
		cg := "null"
		if i > 0 {
			cg = fmt.Sprint(i)
		}
		body := rshBody(p.Generation, invs, map[string]string{rshC1: `{"allocations": {"` + rshRP + `": {"resources": {"VCPU": 1}}}, "project_id": "p", "user_id": "u", "consumer_generation": ` + cg + v.extra + `}`})
		if st, code, detail := rshDo(t, srv.URL, "POST", "/reshaper", v.version, "admin", "application/json", body); st != 204 {
			t.Fatalf("valid body at %s: %d %s %q", v.version, st, code, detail)
		}
	}
	c, err := s.GetAllocations(testCtx(t), rshC1)
	if err != nil || c.Generation != 3 || c.ConsumerType != "INSTANCE" {
		t.Fatalf("consumer after three reshapes: %+v %v", c, err)
	}
}

// TestReshapeGenerationsAsPlacement replays, over HTTP, a reshape whose
// generations were read from a real Placement 8.0: VCPU moves from root to
// its child, consumer c1 moves too and also moves its disk from other to
// dst, c2 is emptied (it held VCPU on root and disk on other), c3 is not
// named. Placement then bumps root and child by 3 (interim inventory,
// allocation step, final inventory), other by 1 (c2 emptied there; c1
// merely moving off does not count), dst by 1, and leaves c3 alone.
func TestReshapeGenerationsAsPlacement(t *testing.T) {
	a := newAPI(t)
	const (
		root  = "a0000000-0000-0000-0000-000000000001"
		child = "a0000000-0000-0000-0000-000000000002"
		other = "a0000000-0000-0000-0000-000000000003"
		dst   = "a0000000-0000-0000-0000-000000000004"
		c1    = "c0000000-0000-0000-0000-000000000001"
		c2    = "c0000000-0000-0000-0000-000000000002"
		c3    = "c0000000-0000-0000-0000-000000000003"
	)
	a.provider(root)
	a.provider(other)
	a.provider(dst)
	a.provider(child, root)
	a.inventory(root, map[string]int{placement.VCPU: 8, placement.DiskGB: 100})
	a.inventory(other, map[string]int{placement.DiskGB: 100})
	a.inventory(dst, map[string]int{placement.DiskGB: 100})
	put := func(c string, allocs map[string]any) {
		a.must(204, "PUT", "/allocations/"+c, "1.30", map[string]any{"allocations": allocs,
			"project_id": "p", "user_id": "u", "consumer_generation": nil})
	}
	res := func(rc string, n int) map[string]any {
		return map[string]any{"resources": map[string]any{rc: n}}
	}
	put(c1, map[string]any{root: res(placement.VCPU, 2), other: res(placement.DiskGB, 5)})
	put(c2, map[string]any{root: res(placement.VCPU, 1), other: res(placement.DiskGB, 1)})
	put(c3, map[string]any{root: res(placement.DiskGB, 1)})
	gens := func() [4]int {
		return [4]int{a.generation(root), a.generation(child), a.generation(other), a.generation(dst)}
	}
	// What Placement 8.0 answered before and after the same requests.
	if g := gens(); g != [4]int{4, 0, 3, 1} {
		t.Fatalf("generations before the reshape %v, Placement's are [4 0 3 1]", g)
	}
	total := func(n int) map[string]any { return map[string]any{"total": n} }
	a.must(204, "POST", "/reshaper", "1.30", map[string]any{
		"inventories": map[string]any{
			root:  map[string]any{"resource_provider_generation": 4, "inventories": map[string]any{placement.DiskGB: total(100)}},
			child: map[string]any{"resource_provider_generation": 0, "inventories": map[string]any{placement.VCPU: total(8)}},
		},
		"allocations": map[string]any{
			c1: map[string]any{"allocations": map[string]any{child: res(placement.VCPU, 2), dst: res(placement.DiskGB, 5)},
				"project_id": "p", "user_id": "u", "consumer_generation": 1},
			c2: map[string]any{"allocations": map[string]any{}, "project_id": "p", "user_id": "u", "consumer_generation": 1},
		},
	})
	if g := gens(); g != [4]int{7, 3, 4, 2} {
		t.Errorf("generations after the reshape %v, Placement's are [7 3 4 2]", g)
	}
	r := a.must(200, "GET", "/allocations/"+c1, "1.30", nil)
	if g := num(r.body["consumer_generation"]); g != 2 {
		t.Errorf("c1 consumer generation %d, want 2", g)
	}
	if r := a.must(200, "GET", "/allocations/"+c2, "1.30", nil); len(r.body["allocations"].(map[string]any)) != 0 {
		t.Errorf("c2 still has allocations: %s", r.raw)
	}
	if r := a.must(200, "GET", "/resource_providers/"+other+"/usages", "1.30", nil); num(r.body["usages"].(map[string]any)[placement.DiskGB]) != 0 {
		t.Errorf("other's usages %s", r.raw)
	}
}

// TestReshapeProvidersWithoutInventory checks, against answers read from a
// real Placement 8.0, the reshape's capacity refusals: a provider with
// interim inventory of none of the classes allocated (anywhere in the
// reshape) fails it naming every class in class id order; one that has
// some of them fails on the first class it lacks.
func TestReshapeProvidersWithoutInventory(t *testing.T) {
	a := newAPI(t)
	const (
		root  = "b0000000-0000-0000-0000-000000000001"
		child = "b0000000-0000-0000-0000-000000000002"
		dst   = "b0000000-0000-0000-0000-000000000004"
		c1    = "d0000000-0000-0000-0000-000000000001"
	)
	a.provider(root)
	a.provider(dst)
	a.provider(child, root)
	a.inventory(root, map[string]int{placement.VCPU: 8})
	a.inventory(dst, map[string]int{placement.DiskGB: 100})
	res := func(kv ...any) map[string]any {
		r := map[string]any{}
		for i := 0; i < len(kv); i += 2 {
			r[kv[i].(string)] = kv[i+1]
		}
		return map[string]any{"resources": r}
	}
	cases := []struct {
		allocs map[string]any
		detail string
	}{
		{map[string]any{child: res(placement.DiskGB, 1), dst: res(placement.MemoryMB, 1)}, "Inventory for 'MEMORY_MB, DISK_GB' on resource provider '" + child + "' invalid."},
		{map[string]any{child: res(placement.DiskGB, 1, placement.VCPU, 1), dst: res(placement.MemoryMB, 1)}, "Inventory for 'DISK_GB' on resource provider '" + child + "' invalid."},
		{map[string]any{root: res(placement.VCPU, 1), child: res(placement.MemoryMB, 1)}, "Inventory for 'MEMORY_MB' on resource provider '" + child + "' invalid."},
	}
	for i, tc := range cases {
		r := a.must(409, "POST", "/reshaper", "1.30", map[string]any{
			"inventories": map[string]any{
				child: map[string]any{"resource_provider_generation": 0, "inventories": map[string]any{placement.VCPU: map[string]any{"total": 8}}},
			},
			"allocations": map[string]any{
				c1: map[string]any{"allocations": tc.allocs, "project_id": "p", "user_id": "u", "consumer_generation": nil},
			},
		})
		if want := "Unable to allocate inventory: " + tc.detail; !strings.Contains(r.errDetail(), want) || r.errCode() != codeDefault {
			t.Errorf("case %d: %s %q, want %s %q", i, r.errCode(), r.errDetail(), codeDefault, want)
		}
	}
	if g := a.generation(child); g != 0 {
		t.Errorf("child generation %d after refused reshapes, want 0", g)
	}
}
