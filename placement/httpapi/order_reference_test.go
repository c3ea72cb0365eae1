package httpapi

import (
	"slices"
	"strings"
	"testing"

	"github.com/berth-project/berth/internal/pycompat"
)

// TestPlacementOrders checks the orders Placement answers in where it
// does not sort: a consumer's allocations in the order they were written
// (its rows' order), resource classes in class id order (the standard
// classes in os-resource-classes' order, then custom ones by creation) in
// usages, a provider's allocations and messages, and providers by
// creation. The wants were recorded from the real Placement 8.0
// (../shared/reference/start-placement.sh, sqlite) answering this script;
// the raw answers are quoted beside each step. JSON spacing and the order
// of fixed keys ("generation" beside "resources") are not compared:
// Berth writes those as encoding/json does.
func TestPlacementOrders(t *testing.T) {
	a := newAPI(t)
	const (
		rpA = "aaaaaaaa-0000-0000-0000-000000000000"
		rpB = "bbbbbbbb-0000-0000-0000-000000000000"
		rpC = "cccccccc-0000-0000-0000-000000000000"
		rpD = "dddddddd-0000-0000-0000-000000000000"
		c1  = "11111111-0000-0000-0000-000000000000"
		c2  = "22222222-0000-0000-0000-000000000000"
		c3  = "33333333-0000-0000-0000-000000000000"
		c4  = "44444444-0000-0000-0000-000000000000"
		c5  = "55555555-0000-0000-0000-000000000000"
	)
	// Created c, a, b: creation order is not uuid order.
	for _, u := range []string{rpC, rpA, rpB} {
		a.must(200, "POST", "/resource_providers", "1.39", map[string]any{"name": "n-" + u, "uuid": u})
		a.must(200, "PUT", "/resource_providers/"+u+"/inventories", "1.39",
			`{"resource_provider_generation":0,"inventories":{"VCPU":{"total":8},"MEMORY_MB":{"total":1024},"DISK_GB":{"total":100}}}`)
	}
	a.must(204, "PUT", "/allocations/"+c1, "1.39", `{"allocations":{"`+rpB+`":{"resources":{"DISK_GB":1,"VCPU":1}},"`+rpA+`":{"resources":{"MEMORY_MB":1,"VCPU":1}},"`+rpC+`":{"resources":{"VCPU":1}}},"project_id":"p","user_id":"u","consumer_generation":null,"consumer_type":"INSTANCE"}`)
	a.must(204, "PUT", "/allocations/"+c2, "1.39", `{"allocations":{"`+rpA+`":{"resources":{"VCPU":1}},"`+rpC+`":{"resources":{"MEMORY_MB":1, "VCPU":1}},"`+rpB+`":{"resources":{"VCPU":1}}},"project_id":"p","user_id":"u","consumer_generation":null,"consumer_type":"INSTANCE"}`)
	// Before 1.12: the list's order.
	a.must(204, "PUT", "/allocations/"+c4, "1.11", `{"allocations":[{"resource_provider":{"uuid":"`+rpB+`"},"resources":{"VCPU":1,"DISK_GB":1}},{"resource_provider":{"uuid":"`+rpA+`"},"resources":{"VCPU":1}}],"project_id":"p","user_id":"u"}`)
	a.must(204, "POST", "/allocations", "1.39", `{"`+c5+`":{"allocations":{"`+rpC+`":{"resources":{"MEMORY_MB":2,"VCPU":1}},"`+rpA+`":{"resources":{"DISK_GB":1}}},"project_id":"p","user_id":"u","consumer_generation":null,"consumer_type":"INSTANCE"}}`)

	type order struct {
		path []any
		want []string
	}
	for _, tc := range []struct {
		desc, method, path, mv, body string
		// ref is the reference's answer (abridged with ... where long).
		ref    string
		orders []order
		detail string // a substring of the error detail, in order
	}{
		{desc: "a consumer's allocations in the order they were written", method: "GET", path: "/allocations/" + c1, mv: "1.39",
			ref:    `{"allocations": {"bbbbbbbb-0000-0000-0000-000000000000": {"resources": {"DISK_GB": 1, "VCPU": 1}, "generation": 4}, "aaaaaaaa-0000-0000-0000-000000000000": {"resources": {"MEMORY_MB": 1, "VCPU": 1}, "generation": 5}, "cccccccc-0000-0000-0000-000000000000": {"resources": {"VCPU": 1}, "generation": 4}}, "project_id": "p", "user_id": "u", "consumer_generation": 1, "consumer_type": "INSTANCE"}`,
			orders: []order{{[]any{"allocations"}, []string{rpB, rpA, rpC}}, {[]any{"allocations", rpB, "resources"}, []string{"DISK_GB", "VCPU"}}}},
		{desc: "another write order", method: "GET", path: "/allocations/" + c2, mv: "1.39",
			ref:    `{"allocations": {"aaaaaaaa-0000-0000-0000-000000000000": {"resources": {"VCPU": 1}, "generation": 5}, "cccccccc-0000-0000-0000-000000000000": {"resources": {"MEMORY_MB": 1, "VCPU": 1}, "generation": 4}, "bbbbbbbb-0000-0000-0000-000000000000": {"resources": {"VCPU": 1}, "generation": 4}}, "project_id": "p", "user_id": "u", "consumer_generation": 1, "consumer_type": "INSTANCE"}`,
			orders: []order{{[]any{"allocations"}, []string{rpA, rpC, rpB}}}},
		{desc: "the pre-1.12 list's order", method: "GET", path: "/allocations/" + c4, mv: "1.39",
			ref:    `{"allocations": {"bbbbbbbb-0000-0000-0000-000000000000": {"resources": {"VCPU": 1, "DISK_GB": 1}, "generation": 4}, "aaaaaaaa-0000-0000-0000-000000000000": {"resources": {"VCPU": 1}, "generation": 5}}, "project_id": "p", "user_id": "u", "consumer_generation": 1, "consumer_type": "unknown"}`,
			orders: []order{{[]any{"allocations"}, []string{rpB, rpA}}, {[]any{"allocations", rpB, "resources"}, []string{"VCPU", "DISK_GB"}}}},
		{desc: "POST /allocations keeps each consumer's order", method: "GET", path: "/allocations/" + c5, mv: "1.39",
			ref:    `{"allocations": {"cccccccc-0000-0000-0000-000000000000": {"resources": {"MEMORY_MB": 2, "VCPU": 1}, "generation": 4}, "aaaaaaaa-0000-0000-0000-000000000000": {"resources": {"DISK_GB": 1}, "generation": 5}}, "project_id": "p", "user_id": "u", "consumer_generation": 1, "consumer_type": "INSTANCE"}`,
			orders: []order{{[]any{"allocations"}, []string{rpC, rpA}}}},
		{desc: "a provider's usages by class id", method: "GET", path: "/resource_providers/" + rpB + "/usages", mv: "1.39",
			ref:    `{"resource_provider_generation": 4, "usages": {"VCPU": 3, "MEMORY_MB": 0, "DISK_GB": 2}}`,
			orders: []order{{[]any{"usages"}, []string{"VCPU", "MEMORY_MB", "DISK_GB"}}}},
		{desc: "a project's usages: first class, consumer_count, the rest", method: "GET", path: "/usages?project_id=p", mv: "1.39",
			ref: `{"usages": {"unknown": {"VCPU": 2, "consumer_count": 1, "DISK_GB": 1}, "INSTANCE": {"VCPU": 7, "consumer_count": 3, "MEMORY_MB": 4, "DISK_GB": 2}}}`,
			orders: []order{{[]any{"usages"}, []string{"unknown", "INSTANCE"}},
				{[]any{"usages", "INSTANCE"}, []string{"VCPU", "consumer_count", "MEMORY_MB", "DISK_GB"}},
				{[]any{"usages", "unknown"}, []string{"VCPU", "consumer_count", "DISK_GB"}}}},
		{desc: "a provider's allocations by class id", method: "GET", path: "/resource_providers/" + rpB + "/allocations", mv: "1.39",
			ref:    `{"allocations": {"11111111-0000-0000-0000-000000000000": {"resources": {"VCPU": 1, "DISK_GB": 1}, "consumer_generation": 1}, "22222222-0000-0000-0000-000000000000": {"resources": {"VCPU": 1}, "consumer_generation": 1}, "44444444-0000-0000-0000-000000000000": {"resources": {"VCPU": 1, "DISK_GB": 1}, "consumer_generation": 1}}, "resource_provider_generation": 4}`,
			orders: []order{{[]any{"allocations", c1, "resources"}, []string{"VCPU", "DISK_GB"}}}},
		{desc: "classes in use named by class id", method: "PUT", path: "/resource_providers/" + rpB + "/inventories", mv: "1.39",
			body:   `{"resource_provider_generation":4,"inventories":{"MEMORY_MB":{"total":1024}}}`,
			ref:    `update conflict: Inventory for 'VCPU, DISK_GB' on resource provider 'bbbbbbbb-0000-0000-0000-000000000000' in use.`,
			detail: "Inventory for 'VCPU, DISK_GB' on resource provider '" + rpB + "' in use."},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			var body any
			if tc.body != "" {
				body = tc.body
			}
			r := a.call(tc.method, tc.path, tc.mv, body)
			if tc.detail != "" {
				if !strings.Contains(r.errDetail(), tc.detail) {
					t.Fatalf("status %d, detail %q; the reference says %s", r.status, r.errDetail(), tc.ref)
				}
				return
			}
			if r.status != 200 {
				t.Fatalf("status %d: %s", r.status, r.raw)
			}
			got := pycompat.JSONKeyOrder([]byte(r.raw))
			for _, o := range tc.orders {
				if k := got.Keys(o.path...); !slices.Equal(k, o.want) {
					t.Errorf("%v in order %v, want %v as the reference: %s\nBerth: %s", o.path, k, o.want, tc.ref, r.raw)
				}
			}
		})
	}
	t.Run("providers by creation", func(t *testing.T) {
		// Reference: ['cccc', 'aaaa', 'bbbb'], filtered or not.
		for _, path := range []string{"/resource_providers", "/resource_providers?resources=VCPU:1"} {
			r := a.must(200, "GET", path, "1.39", nil)
			var got []string
			for _, p := range r.body["resource_providers"].([]any) {
				got = append(got, p.(map[string]any)["uuid"].(string))
			}
			if want := []string{rpC, rpA, rpB}; !slices.Equal(got, want) {
				t.Errorf("%s lists %v, want %v", path, got, want)
			}
		}
	})

	// Custom classes, created CUSTOM_ZED then CUSTOM_ALPHA: their ids, so
	// their order, are their creation's.
	a.must(201, "PUT", "/resource_classes/CUSTOM_ZED", "1.39", nil)
	a.must(201, "PUT", "/resource_classes/CUSTOM_ALPHA", "1.39", nil)
	a.must(200, "POST", "/resource_providers", "1.39", map[string]any{"name": "n-" + rpD, "uuid": rpD})
	a.must(200, "PUT", "/resource_providers/"+rpD+"/inventories", "1.39",
		`{"resource_provider_generation":0,"inventories":{"CUSTOM_ALPHA":{"total":8},"DISK_GB":{"total":100},"CUSTOM_ZED":{"total":8},"VCPU":{"total":8}}}`)
	a.must(204, "PUT", "/allocations/"+c3, "1.39", `{"allocations":{"`+rpD+`":{"resources":{"CUSTOM_ALPHA":1,"CUSTOM_ZED":1,"DISK_GB":1,"VCPU":1}}},"project_id":"q","user_id":"u","consumer_generation":null,"consumer_type":"INSTANCE"}`)
	classes := []string{"VCPU", "DISK_GB", "CUSTOM_ZED", "CUSTOM_ALPHA"}
	for _, tc := range []struct {
		desc, path, mv, ref string
		at                  []any
		want                []string
	}{
		{"usages", "/resource_providers/" + rpD + "/usages", "1.39",
			`{"resource_provider_generation": 2, "usages": {"VCPU": 1, "DISK_GB": 1, "CUSTOM_ZED": 1, "CUSTOM_ALPHA": 1}}`,
			[]any{"usages"}, classes},
		{"project usages", "/usages?project_id=q", "1.39",
			`{"usages": {"INSTANCE": {"VCPU": 1, "consumer_count": 1, "DISK_GB": 1, "CUSTOM_ZED": 1, "CUSTOM_ALPHA": 1}}}`,
			[]any{"usages", "INSTANCE"}, []string{"VCPU", "consumer_count", "DISK_GB", "CUSTOM_ZED", "CUSTOM_ALPHA"}},
		{"project usages before 1.38", "/usages?project_id=q", "1.9",
			`{"usages": {"VCPU": 1, "DISK_GB": 1, "CUSTOM_ZED": 1, "CUSTOM_ALPHA": 1}}`,
			[]any{"usages"}, classes},
		{"provider allocations", "/resource_providers/" + rpD + "/allocations", "1.39",
			`{"allocations": {"33333333-0000-0000-0000-000000000000": {"resources": {"VCPU": 1, "DISK_GB": 1, "CUSTOM_ZED": 1, "CUSTOM_ALPHA": 1}, "consumer_generation": 1}}, "resource_provider_generation": 2}`,
			[]any{"allocations", c3, "resources"}, classes},
	} {
		t.Run("custom classes by creation: "+tc.desc, func(t *testing.T) {
			r := a.must(200, "GET", tc.path, tc.mv, nil)
			if k := pycompat.JSONKeyOrder([]byte(r.raw)).Keys(tc.at...); !slices.Equal(k, tc.want) {
				t.Errorf("%v in order %v, want %v as the reference: %s\nBerth: %s", tc.at, k, tc.want, tc.ref, r.raw)
			}
		})
	}
	t.Run("custom classes by creation: in use", func(t *testing.T) {
		// Reference: "update conflict: Inventory for 'VCPU, DISK_GB, CUSTOM_ZED, CUSTOM_ALPHA' on resource provider 'dddddddd-0000-0000-0000-000000000000' in use."
		r := a.call("PUT", "/resource_providers/"+rpD+"/inventories", "1.39", `{"resource_provider_generation":2,"inventories":{"MEMORY_MB":{"total":8}}}`)
		if want := "Inventory for 'VCPU, DISK_GB, CUSTOM_ZED, CUSTOM_ALPHA' on resource provider '" + rpD + "' in use."; r.status != 409 || !strings.Contains(r.errDetail(), want) {
			t.Errorf("status %d, detail %q, want %q", r.status, r.errDetail(), want)
		}
	})
	t.Run("custom classes by creation: listed", func(t *testing.T) {
		// Reference: [..., 'NET_PACKET_RATE_IGR_KILOPACKET_PER_SEC', 'CUSTOM_ZED', 'CUSTOM_ALPHA'].
		r := a.must(200, "GET", "/resource_classes", "1.39", nil)
		list := r.body["resource_classes"].([]any)
		var last []string
		for _, rc := range list[len(list)-2:] {
			last = append(last, rc.(map[string]any)["name"].(string))
		}
		if want := []string{"CUSTOM_ZED", "CUSTOM_ALPHA"}; !slices.Equal(last, want) {
			t.Errorf("GET /resource_classes ends %v, want %v", last, want)
		}
	})
	t.Run("inventories: read by class id, written in the body's order", func(t *testing.T) {
		// Reference, GET: ['VCPU', 'DISK_GB', 'CUSTOM_ZED', 'CUSTOM_ALPHA'];
		// the PUT above answered {"CUSTOM_ALPHA": ..., "DISK_GB": ...,
		// "CUSTOM_ZED": ..., "VCPU": ...}, its body's order.
		r := a.must(200, "GET", "/resource_providers/"+rpD+"/inventories", "1.39", nil)
		if k := pycompat.JSONKeyOrder([]byte(r.raw)).Keys("inventories"); !slices.Equal(k, classes) {
			t.Errorf("GET inventories in order %v, want %v", k, classes)
		}
		r = a.must(200, "PUT", "/resource_providers/"+rpD+"/inventories", "1.39",
			`{"resource_provider_generation":2,"inventories":{"CUSTOM_ALPHA":{"total":8},"DISK_GB":{"total":100},"CUSTOM_ZED":{"total":8},"VCPU":{"total":8}}}`)
		if k, want := pycompat.JSONKeyOrder([]byte(r.raw)).Keys("inventories"), []string{"CUSTOM_ALPHA", "DISK_GB", "CUSTOM_ZED", "VCPU"}; !slices.Equal(k, want) {
			t.Errorf("PUT inventories answered in order %v, want %v", k, want)
		}
	})
}
