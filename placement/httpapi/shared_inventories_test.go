package httpapi

import (
	"maps"
	"reflect"
	"testing"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/placement"
)

// TestHTTPInventoryWritesLeaveSharedMapsAlone: the placement index gives
// providers with equal inventories one decoded map
// (etcdschema.DecodeProviderAfter), so every inventory write the API
// makes on one provider must build a new map, never write through the
// record it read: the other provider's indexed inventories stay as they
// were.
func TestHTTPInventoryWritesLeaveSharedMapsAlone(t *testing.T) {
	a := newAPI(t)
	a.provider(rpA)
	a.provider(rpB)
	totals := map[string]int{"VCPU": 8, "MEMORY_MB": 4096, "DISK_GB": 100}
	a.inventory(rpA, totals)
	a.inventory(rpB, totals)
	indexed := func() map[string]*etcdschema.Provider {
		t.Helper()
		ps, err := a.s.ListProviders(testCtx(t), placement.ProviderQuery{})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]*etcdschema.Provider{}
		for _, p := range ps {
			out[p.UUID] = p
		}
		return out
	}
	before := indexed()
	if reflect.ValueOf(before[rpA].Inventories).Pointer() != reflect.ValueOf(before[rpB].Inventories).Pointer() {
		t.Fatal("the index holds two maps for equal inventories: this test would prove nothing")
	}
	wantB := maps.Clone(before[rpB].Inventories)
	base := "/resource_providers/" + rpA + "/inventories"
	gen := func() int { return a.generation(rpA) }
	writes := []struct {
		name, method, path, mv string
		body                   func() map[string]any
		check                  func(invs map[string]etcdschema.Inventory) bool
	}{
		{"POST one", "POST", base, "1.0",
			func() map[string]any { return map[string]any{"resource_class": "VGPU", "total": 4} },
			func(m map[string]etcdschema.Inventory) bool { return m["VGPU"].Total == 4 }},
		{"PUT one", "PUT", base + "/VCPU", "1.0",
			func() map[string]any { return map[string]any{"resource_provider_generation": gen(), "total": 16} },
			func(m map[string]etcdschema.Inventory) bool { return m["VCPU"].Total == 16 }},
		{"DELETE one", "DELETE", base + "/MEMORY_MB", "1.0", nil,
			func(m map[string]etcdschema.Inventory) bool { _, ok := m["MEMORY_MB"]; return !ok }},
		{"PUT all", "PUT", base, "1.0",
			func() map[string]any {
				return map[string]any{"resource_provider_generation": gen(), "inventories": map[string]any{"DISK_GB": map[string]any{"total": 7}}}
			},
			func(m map[string]etcdschema.Inventory) bool { return len(m) == 1 && m["DISK_GB"].Total == 7 }},
		{"DELETE all", "DELETE", base, "1.5", nil,
			func(m map[string]etcdschema.Inventory) bool { return len(m) == 0 }},
	}
	for _, w := range writes {
		var body any
		if w.body != nil {
			body = w.body()
		}
		r := a.call(w.method, w.path, w.mv, body)
		if r.status >= 300 {
			t.Fatalf("%s: %d %s", w.name, r.status, r.raw)
		}
		now := indexed()
		if !w.check(now[rpA].Inventories) {
			t.Errorf("%s: the index has %s's inventories %v", w.name, rpA, now[rpA].Inventories)
		}
		if !reflect.DeepEqual(now[rpB].Inventories, wantB) {
			t.Fatalf("%s on %s changed %s's indexed inventories: %v, want %v", w.name, rpA, rpB, now[rpB].Inventories, wantB)
		}
	}
}
