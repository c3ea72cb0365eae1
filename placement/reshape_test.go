package placement

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
)

const (
	rshRP    = "11111111-1111-1111-1111-111111111111"
	rshChild = "22222222-2222-2222-2222-222222222222"
	rshC1    = "aaaaaaaa-1111-1111-1111-111111111111"
	rshC2    = "bbbbbbbb-2222-2222-2222-222222222222"
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
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	mkProvider(t, s, rshRP, "", map[string]etcdschema.Inventory{VCPU: inv(8)})
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

// rshSetup makes the usual starting point: a root with VCPU and DISK_GB,
// a child without inventory, consumer c1 holding VCPU 2 + DISK_GB 10 and
// c2 holding VCPU 4 on the root.
func rshSetup(t *testing.T, s *Service) {
	t.Helper()
	ctx := testCtx(t)
	mkProvider(t, s, "root", "", map[string]etcdschema.Inventory{
		VCPU:   {Total: 8, MinUnit: 1, MaxUnit: 8, StepSize: 1, AllocationRatio: 1},
		DiskGB: {Total: 100, MinUnit: 1, MaxUnit: 100, StepSize: 1, AllocationRatio: 1},
	})
	mkProvider(t, s, "child", "root", nil)
	if err := s.PutAllocations(ctx, "c1", AllocationWrite{Allocations: alloc("root", map[string]int64{VCPU: 2, DiskGB: 10}), ProjectID: "p", UserID: "u"}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutAllocations(ctx, "c2", AllocationWrite{Allocations: alloc("root", map[string]int64{VCPU: 4}), ProjectID: "p", UserID: "u"}); err != nil {
		t.Fatal(err)
	}
}

// moveVCPU is the reshape a virt driver makes: VCPU inventory and every
// VCPU allocation from root to child, at the generations of rshSetup.
func moveVCPU() Reshape {
	return Reshape{
		Inventories: map[string]ProviderInventories{
			"root":  {Generation: 3, Inventories: map[string]etcdschema.Inventory{DiskGB: {Total: 100, MinUnit: 1, MaxUnit: 100, StepSize: 1, AllocationRatio: 1}}},
			"child": {Generation: 0, Inventories: map[string]etcdschema.Inventory{VCPU: inv(8)}},
		},
		Allocations: map[string]AllocationWrite{
			"c1": {Allocations: map[string]ProviderAllocation{"root": {Resources: map[string]int64{DiskGB: 10}}, "child": {Resources: map[string]int64{VCPU: 2}}}, ProjectID: "p", UserID: "u", ConsumerGeneration: gen(1)},
			"c2": {Allocations: alloc("child", map[string]int64{VCPU: 4}), ProjectID: "p", UserID: "u", ConsumerGeneration: gen(1)},
		},
	}
}

// TestReshapeRules checks each of Placement's reshape rules in process,
// each case on a fresh etcd.
func TestReshapeRules(t *testing.T) {
	cases := []struct {
		desc   string
		change func(r *Reshape)
		want   error
	}{
		{"moves inventory and allocations", func(r *Reshape) {}, nil},
		{"unknown provider", func(r *Reshape) { r.Inventories["gone"] = ProviderInventories{} }, ErrInventoryProviderNotFound},
		{"stale provider generation", func(r *Reshape) { r.Inventories["child"] = ProviderInventories{Generation: 5} }, ErrGenerationConflict},
		{"stale consumer generation", func(r *Reshape) {
			w := r.Allocations["c2"]
			w.ConsumerGeneration = gen(9)
			r.Allocations["c2"] = w
		}, ErrConsumerGenerationConflict},
		{"existing consumer named as new", func(r *Reshape) {
			w := r.Allocations["c2"]
			w.ConsumerGeneration = nil
			r.Allocations["c2"] = w
		}, ErrConsumerGenerationConflict},
		{"allocation on a missing provider", func(r *Reshape) {
			r.Allocations["c3"] = AllocationWrite{Allocations: alloc("gone", map[string]int64{VCPU: 1}), ProjectID: "p", UserID: "u"}
		}, ErrProviderNotFound},
		{"unknown inventory class", func(r *Reshape) {
			r.Inventories["child"].Inventories["CUSTOM_NOPE"] = inv(1)
		}, ErrResourceClassNotFound},
		{"unknown allocation class wins over the capacity error it causes", func(r *Reshape) {
			r.Allocations["c3"] = AllocationWrite{Allocations: alloc("child", map[string]int64{"CUSTOM_NOPE": 1}), ProjectID: "p", UserID: "u"}
		}, ErrResourceClassNotFound},
		{"allocation over the new capacity", func(r *Reshape) {
			r.Inventories["child"].Inventories[VCPU] = inv(5)
		}, ErrInsufficientCapacity},
		{"allocation over the new max_unit", func(r *Reshape) {
			r.Inventories["child"].Inventories[VCPU] = etcdschema.Inventory{Total: 8, MinUnit: 1, MaxUnit: 3, StepSize: 1, AllocationRatio: 1}
		}, ErrInsufficientCapacity},
		{"allocation off the new step", func(r *Reshape) {
			r.Inventories["child"].Inventories[VCPU] = etcdschema.Inventory{Total: 8, MinUnit: 1, MaxUnit: 8, StepSize: 4, AllocationRatio: 1}
		}, ErrInsufficientCapacity},
		{"allocation ratio makes room", func(r *Reshape) {
			r.Inventories["child"].Inventories[VCPU] = etcdschema.Inventory{Total: 4, MinUnit: 1, MaxUnit: 8, StepSize: 1, AllocationRatio: 1.5}
		}, nil},
		{"reserved takes the room", func(r *Reshape) {
			r.Inventories["child"].Inventories[VCPU] = etcdschema.Inventory{Total: 8, Reserved: 3, MinUnit: 1, MaxUnit: 8, StepSize: 1, AllocationRatio: 1}
		}, ErrInsufficientCapacity},
		{"class removed while an untouched consumer uses it", func(r *Reshape) { delete(r.Allocations, "c2") }, ErrInventoryInUse},
		{"class removed without its allocations", func(r *Reshape) { r.Allocations = nil }, ErrInventoryInUse},
		{"allocation left on a class that goes", func(r *Reshape) {
			w := r.Allocations["c2"]
			w.Allocations = alloc("root", map[string]int64{VCPU: 4})
			r.Allocations["c2"] = w
		}, ErrInventoryInUse},
		{"a shrinking usage must still fit the shrunk inventory", func(r *Reshape) {
			// Root keeps VCPU but at 4; c1 2 + c2 3 = 5 is less than the 6
			// before, and still too much, as Placement sees it.
			*r = Reshape{
				Inventories: map[string]ProviderInventories{"root": {Generation: 3, Inventories: map[string]etcdschema.Inventory{VCPU: inv(4), DiskGB: inv(100)}}},
				Allocations: map[string]AllocationWrite{
					"c2": {Allocations: alloc("root", map[string]int64{VCPU: 3}), ProjectID: "p", UserID: "u", ConsumerGeneration: gen(1)},
				},
			}
		}, ErrInsufficientCapacity},
		{"a shrunk inventory under allocations the reshape leaves alone", func(r *Reshape) {
			*r = Reshape{Inventories: map[string]ProviderInventories{"root": {Generation: 3, Inventories: map[string]etcdschema.Inventory{VCPU: inv(4), DiskGB: inv(100)}}}}
		}, nil},
		{"allocations emptied instead of moved", func(r *Reshape) {
			w := r.Allocations["c2"]
			w.Allocations = nil
			r.Allocations["c2"] = w
		}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			s, _ := newStarted(t)
			rshSetup(t, s)
			r := moveVCPU()
			tc.change(&r)
			_, err := s.Reshape(testCtx(t), r)
			if (tc.want == nil) != (err == nil) || (tc.want != nil && !errors.Is(err, tc.want)) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			assertConsistent(t, s)
		})
	}
}

// TestReshapeResult checks what a successful reshape leaves: inventories,
// usages, allocations, generations counted as Placement counts them, and
// an index that has followed all of it.
func TestReshapeResult(t *testing.T) {
	s, _ := newStarted(t)
	ctx := testCtx(t)
	rshSetup(t, s)
	rev, err := s.Reshape(ctx, moveVCPU())
	if err != nil {
		t.Fatal(err)
	}
	root, _ := s.Provider(ctx, "root")
	child, _ := s.Provider(ctx, "child")
	// Interim inventory, allocations, final inventory: +3 each.
	if root.Generation != 6 || child.Generation != 3 {
		t.Errorf("generations root %d child %d, want 6 and 3", root.Generation, child.Generation)
	}
	if _, ok := root.Inventories[VCPU]; ok || len(root.Inventories) != 1 {
		t.Errorf("root inventories %v", root.Inventories)
	}
	if !reflect.DeepEqual(root.Usages, map[string]int64{DiskGB: 10}) || !reflect.DeepEqual(child.Usages, map[string]int64{VCPU: 6}) {
		t.Errorf("usages root %v child %v", root.Usages, child.Usages)
	}
	c2, err := s.GetAllocations(ctx, "c2")
	if err != nil || c2.Generation != 2 || !reflect.DeepEqual(c2.Allocations, map[string]etcdschema.ConsumerAllocation{"child": {Resources: map[string]int64{VCPU: 4}}}) {
		t.Errorf("c2 %+v %v", c2, err)
	}
	if err := s.WaitForRevision(ctx, rev); err != nil {
		t.Fatal(err)
	}
	// The index saw the move: VCPU comes from the child now, and only 2
	// are left there.
	cands, err := s.AllocationCandidates(ctx, CandidateQuery{Groups: []RequestGroup{{Resources: map[string]int64{VCPU: 2}}}})
	if err != nil || len(cands.AllocationRequests) != 1 {
		t.Fatalf("candidates %+v %v", cands, err)
	}
	if _, ok := cands.AllocationRequests[0].Allocations["child"]; !ok {
		t.Errorf("VCPU 2 not placed on the child: %+v", cands.AllocationRequests[0])
	}
	if cands, _ := s.AllocationCandidates(ctx, CandidateQuery{Groups: []RequestGroup{{Resources: map[string]int64{VCPU: 3}}}}); len(cands.AllocationRequests) != 0 {
		t.Errorf("VCPU 3 fits after the move: %+v", cands.AllocationRequests)
	}
	s.idx.mu.RLock()
	_, onRoot := s.idx.st.rpConsumers["root"]["c2"]
	_, onChild := s.idx.st.rpConsumers["child"]["c2"]
	s.idx.mu.RUnlock()
	if onRoot || !onChild {
		t.Errorf("index consumers of c2: on root %v, on child %v", onRoot, onChild)
	}
	// A provider whose new inventory is empty and whose allocations do not
	// change moves by one; one whose allocations change by two.
	rev, err = s.Reshape(ctx, Reshape{
		Inventories: map[string]ProviderInventories{"child": {Generation: 3}},
		Allocations: map[string]AllocationWrite{
			"c1": {Allocations: alloc("root", map[string]int64{DiskGB: 10}), ProjectID: "p", UserID: "u", ConsumerGeneration: gen(2)},
			"c2": {ProjectID: "p", UserID: "u", ConsumerGeneration: gen(2)},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	child, _ = s.Provider(ctx, "child")
	if child.Generation != 5 || len(child.Inventories) != 0 || len(child.Usages) != 0 {
		t.Errorf("child after emptying: %+v", child)
	}
	if _, err := s.GetAllocations(ctx, "c2"); !errors.Is(err, ErrNotFound) {
		t.Errorf("c2 with no allocations still stored: %v", err)
	}
	if err := s.WaitForRevision(ctx, rev); err != nil {
		t.Fatal(err)
	}
	if cands, _ := s.AllocationCandidates(ctx, CandidateQuery{Groups: []RequestGroup{{Resources: map[string]int64{VCPU: 1}}}}); len(cands.AllocationRequests) != 0 {
		t.Errorf("VCPU still offered after its inventory went: %+v", cands.AllocationRequests)
	}
	assertConsistent(t, s)
}

// etcdSnapshot is every key under the test prefix with its value and mod
// revision, and the store revision.
func etcdSnapshot(t *testing.T, cli *clientv3.Client) (map[string]string, int64) {
	t.Helper()
	resp, err := cli.Get(testCtx(t), "/test/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, kv := range resp.Kvs {
		out[string(kv.Key)] = fmt.Sprintf("%d %s", kv.ModRevision, kv.Value)
	}
	return out, resp.Header.Revision
}

// TestReshapeIsAtomic: a reshape whose last consumer fails changes
// nothing at all in etcd, and a successful one is a single transaction.
func TestReshapeIsAtomic(t *testing.T) {
	s, cli := newStarted(t)
	ctx := testCtx(t)
	rshSetup(t, s)
	// "zz" sorts after every other consumer, so everything else has been
	// planned when it fails.
	lastFails := map[string]AllocationWrite{
		"stale generation": {Allocations: alloc("root", map[string]int64{DiskGB: 1}), ProjectID: "p", UserID: "u", ConsumerGeneration: gen(4)},
		"over capacity":    {Allocations: alloc("root", map[string]int64{DiskGB: 91}), ProjectID: "p", UserID: "u"},
		"missing provider": {Allocations: alloc("gone", map[string]int64{DiskGB: 1}), ProjectID: "p", UserID: "u"},
		"no inventory":     {Allocations: alloc("child", map[string]int64{DiskGB: 1}), ProjectID: "p", UserID: "u"},
	}
	for desc, w := range lastFails {
		before, rev := etcdSnapshot(t, cli)
		r := moveVCPU()
		r.Allocations["zz"] = w
		if _, err := s.Reshape(ctx, r); err == nil {
			t.Fatalf("%s: reshape succeeded", desc)
		}
		after, rev2 := etcdSnapshot(t, cli)
		if rev2 != rev || !reflect.DeepEqual(before, after) {
			t.Fatalf("%s: a failed reshape changed etcd (revision %d → %d)", desc, rev, rev2)
		}
	}
	before, rev := etcdSnapshot(t, cli)
	r := moveVCPU()
	r.Allocations["zz"] = AllocationWrite{Allocations: alloc("root", map[string]int64{DiskGB: 5}), ProjectID: "p", UserID: "u"}
	got, err := s.Reshape(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	after, rev2 := etcdSnapshot(t, cli)
	if got != rev+1 || rev2 != rev+1 {
		t.Fatalf("reshape wrote at revision %d, store at %d, before %d: not one transaction", got, rev2, rev)
	}
	changed := 0
	for k, v := range after {
		if before[k] != v {
			changed++
			if !strings.HasPrefix(v, fmt.Sprint(got)+" ") {
				t.Errorf("%s changed outside the reshape's revision: %s", k, v[:20])
			}
		}
	}
	// root, child, c1, c2 and the new zz.
	if changed != 5 {
		t.Errorf("%d keys changed, want 5", changed)
	}
	assertConsistent(t, s)
}

// TestReshapeRacesAllocation runs a reshape that shrinks a provider
// against an allocation that needs the old size, both at once: exactly one
// wins, and the provider is never over its capacity.
func TestReshapeRacesAllocation(t *testing.T) {
	s, _ := newStarted(t)
	ctx := testCtx(t)
	wins := map[string]int{}
	for i := 0; i < 20; i++ {
		rp, a, b := fmt.Sprintf("rp%d", i), fmt.Sprintf("a%d", i), fmt.Sprintf("b%d", i)
		mkProvider(t, s, rp, "", map[string]etcdschema.Inventory{VCPU: inv(8)})
		if err := s.PutAllocations(ctx, a, AllocationWrite{Allocations: alloc(rp, map[string]int64{VCPU: 4}), ProjectID: "p", UserID: "u"}); err != nil {
			t.Fatal(err)
		}
		r := Reshape{
			Inventories: map[string]ProviderInventories{rp: {Generation: 2, Inventories: map[string]etcdschema.Inventory{VCPU: inv(4)}}},
			Allocations: map[string]AllocationWrite{a: {Allocations: alloc(rp, map[string]int64{VCPU: 4}), ProjectID: "p", UserID: "u", ConsumerGeneration: gen(1)}},
		}
		start := make(chan struct{})
		var wg sync.WaitGroup
		var reshapeErr, putErr error
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-start
			_, reshapeErr = s.Reshape(ctx, r)
		}()
		go func() {
			defer wg.Done()
			<-start
			putErr = s.PutAllocations(ctx, b, AllocationWrite{Allocations: alloc(rp, map[string]int64{VCPU: 4}), ProjectID: "p", UserID: "u"})
		}()
		close(start)
		wg.Wait()
		switch {
		case reshapeErr == nil && errors.Is(putErr, ErrInsufficientCapacity):
			wins["reshape"]++
		case putErr == nil && errors.Is(reshapeErr, ErrGenerationConflict):
			wins["allocation"]++
		default:
			t.Fatalf("round %d: reshape %v, allocation %v: not exactly one winner", i, reshapeErr, putErr)
		}
		p, _ := s.Provider(ctx, rp)
		if p.Usages[VCPU] > p.Inventories[VCPU].Capacity() {
			t.Fatalf("round %d: usage %d over capacity %d", i, p.Usages[VCPU], p.Inventories[VCPU].Capacity())
		}
	}
	t.Logf("winners over 20 rounds: %v", wins)
	assertConsistent(t, s)
}

// TestReshapeRetriesAnUnguardedProvider: a provider the reshape touches
// only through a consumer's old allocation has no caller generation, so a
// concurrent claim there makes the reshape re-read and retry, and both
// writes land without losing either's usage.
func TestReshapeRetriesAnUnguardedProvider(t *testing.T) {
	s, _ := newStarted(t)
	ctx := testCtx(t)
	for i := 0; i < 10; i++ {
		from, to, a := fmt.Sprintf("from%d", i), fmt.Sprintf("to%d", i), fmt.Sprintf("a%d", i)
		mkProvider(t, s, from, "", map[string]etcdschema.Inventory{VCPU: inv(64)})
		mkProvider(t, s, to, "", nil)
		if err := s.PutAllocations(ctx, a, AllocationWrite{Allocations: alloc(from, map[string]int64{VCPU: 4}), ProjectID: "p", UserID: "u"}); err != nil {
			t.Fatal(err)
		}
		r := Reshape{
			Inventories: map[string]ProviderInventories{to: {Generation: 0, Inventories: map[string]etcdschema.Inventory{VCPU: inv(8)}}},
			Allocations: map[string]AllocationWrite{a: {Allocations: alloc(to, map[string]int64{VCPU: 4}), ProjectID: "p", UserID: "u", ConsumerGeneration: gen(1)}},
		}
		start := make(chan struct{})
		var wg sync.WaitGroup
		errs := make([]error, 5)
		for j := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				if j == 0 {
					_, errs[j] = s.Reshape(ctx, r)
					return
				}
				errs[j] = s.PutAllocations(ctx, fmt.Sprintf("b%d-%d", i, j), AllocationWrite{Allocations: alloc(from, map[string]int64{VCPU: 1}), ProjectID: "p", UserID: "u"})
			}()
		}
		close(start)
		wg.Wait()
		for j, err := range errs {
			if err != nil {
				t.Fatalf("round %d writer %d: %v", i, j, err)
			}
		}
		p, _ := s.Provider(ctx, from)
		if p.Usages[VCPU] != 4 {
			t.Fatalf("round %d: %s usage %d, want the 4 claims of 1", i, from, p.Usages[VCPU])
		}
	}
	assertConsistent(t, s)
}

// assertConsistent checks that every provider's recorded usages are the
// sum of the consumers' allocations on it, reading etcd at one revision.
func assertConsistent(t *testing.T, s *Service) {
	t.Helper()
	ctx := testCtx(t)
	resp, err := s.cli.Txn(ctx).Then(
		clientv3.OpGet(s.keys.Providers(), clientv3.WithPrefix()),
		clientv3.OpGet(s.keys.Consumers(), clientv3.WithPrefix()),
	).Commit()
	if err != nil {
		t.Fatal(err)
	}
	sums := map[string]map[string]int64{}
	for _, kv := range resp.Responses[1].GetResponseRange().Kvs {
		c := &etcdschema.Consumer{}
		if err := etcdschema.Decode(string(kv.Key), kv.Value, c); err != nil {
			t.Fatal(err)
		}
		if len(c.Allocations) == 0 {
			t.Errorf("consumer %s stored without allocations", c.UUID)
		}
		for rp, a := range c.Allocations {
			if sums[rp] == nil {
				sums[rp] = map[string]int64{}
			}
			for rc, n := range a.Resources {
				sums[rp][rc] += n
			}
		}
	}
	for _, kv := range resp.Responses[0].GetResponseRange().Kvs {
		p := &etcdschema.Provider{}
		if err := etcdschema.Decode(string(kv.Key), kv.Value, p); err != nil {
			t.Fatal(err)
		}
		want := sums[p.UUID]
		if want == nil {
			want = map[string]int64{}
		}
		got := p.Usages
		if got == nil {
			got = map[string]int64{}
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("provider %s usages %v, allocations sum to %v", p.UUID, got, want)
		}
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
	a.inventory(root, map[string]int{VCPU: 8, DiskGB: 100})
	a.inventory(other, map[string]int{DiskGB: 100})
	a.inventory(dst, map[string]int{DiskGB: 100})
	put := func(c string, allocs map[string]any) {
		a.must(204, "PUT", "/allocations/"+c, "1.30", map[string]any{"allocations": allocs,
			"project_id": "p", "user_id": "u", "consumer_generation": nil})
	}
	res := func(rc string, n int) map[string]any {
		return map[string]any{"resources": map[string]any{rc: n}}
	}
	put(c1, map[string]any{root: res(VCPU, 2), other: res(DiskGB, 5)})
	put(c2, map[string]any{root: res(VCPU, 1), other: res(DiskGB, 1)})
	put(c3, map[string]any{root: res(DiskGB, 1)})
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
			root:  map[string]any{"resource_provider_generation": 4, "inventories": map[string]any{DiskGB: total(100)}},
			child: map[string]any{"resource_provider_generation": 0, "inventories": map[string]any{VCPU: total(8)}},
		},
		"allocations": map[string]any{
			c1: map[string]any{"allocations": map[string]any{child: res(VCPU, 2), dst: res(DiskGB, 5)},
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
	if r := a.must(200, "GET", "/resource_providers/"+other+"/usages", "1.30", nil); num(r.body["usages"].(map[string]any)[DiskGB]) != 0 {
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
	a.inventory(root, map[string]int{VCPU: 8})
	a.inventory(dst, map[string]int{DiskGB: 100})
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
		{map[string]any{child: res(DiskGB, 1), dst: res(MemoryMB, 1)}, "Inventory for 'MEMORY_MB, DISK_GB' on resource provider '" + child + "' invalid."},
		{map[string]any{child: res(DiskGB, 1, VCPU, 1), dst: res(MemoryMB, 1)}, "Inventory for 'DISK_GB' on resource provider '" + child + "' invalid."},
		{map[string]any{root: res(VCPU, 1), child: res(MemoryMB, 1)}, "Inventory for 'MEMORY_MB' on resource provider '" + child + "' invalid."},
	}
	for i, tc := range cases {
		r := a.must(409, "POST", "/reshaper", "1.30", map[string]any{
			"inventories": map[string]any{
				child: map[string]any{"resource_provider_generation": 0, "inventories": map[string]any{VCPU: map[string]any{"total": 8}}},
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
