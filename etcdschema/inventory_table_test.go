package etcdschema

import (
	"reflect"
	"testing"
	"unsafe"
)

func mapID(m map[string]Inventory) uintptr { return reflect.ValueOf(m).Pointer() }

// TestSharedInventories: the indexes' decoders give equal inventories one
// map (of the value Decode gives), unequal ones their own, and the plain
// Decode a fresh map its caller may mutate.
func TestSharedInventories(t *testing.T) {
	invs := func(vcpu int64) map[string]Inventory {
		return map[string]Inventory{
			"VCPU":      {Total: vcpu, MinUnit: 1, MaxUnit: vcpu, StepSize: 1, AllocationRatio: 16},
			"MEMORY_MB": {Total: 65536, Reserved: 512, MinUnit: 1, MaxUnit: 65536, StepSize: 1, AllocationRatio: 1.5},
			"DISK_GB":   {Total: 1000, MinUnit: 1, MaxUnit: 1000, StepSize: 1, AllocationRatio: 1},
		}
	}
	provider := func(uuid string, vcpu int64) []byte {
		return []byte(MustEncode(&Provider{UUID: uuid, Name: "n-" + uuid, RootProviderUUID: uuid, Generation: 3,
			Inventories: invs(vcpu), Usages: map[string]int64{"VCPU": 2}}))
	}
	a, err := DecodeProviderAfter("/a", provider("a", 48), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := DecodeProviderAfterKey([]byte("/b"), provider("b", 48), nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := DecodeProviderAfter("/c", provider("c", 96), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a.Inventories, invs(48)) || !reflect.DeepEqual(c.Inventories, invs(96)) {
		t.Fatalf("decoded %v and %v", a.Inventories, c.Inventories)
	}
	if mapID(a.Inventories) != mapID(b.Inventories) {
		t.Error("two providers' equal inventories were decoded into two maps")
	}
	if mapID(a.Inventories) == mapID(c.Inventories) {
		t.Error("unequal inventories share a map")
	}
	// A provider's next record with other inventories gets the table's.
	a2, err := DecodeProviderAfter("/a", provider("a", 96), a)
	if err != nil {
		t.Fatal(err)
	}
	if mapID(a2.Inventories) != mapID(c.Inventories) {
		t.Error("a provider's new inventories did not share the equal ones decoded before")
	}
	hc := []byte(MustEncode(&HostCapacity{Host: "h1", Inventories: invs(48), Used: map[string]int64{"VCPU": 2}}))
	h1, err := DecodeHostCapacityShared("/h1", hc)
	if err != nil {
		t.Fatal(err)
	}
	h2, err := DecodeHostCapacityShared("/h2", hc)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(h1.Inventories, invs(48)) || mapID(h1.Inventories) != mapID(h2.Inventories) {
		t.Errorf("host capacities' equal inventories: %v, shared %v", h1.Inventories, mapID(h1.Inventories) == mapID(h2.Inventories))
	}
	var fresh Provider
	if err := Decode("/a", provider("a", 48), &fresh); err != nil {
		t.Fatal(err)
	}
	if mapID(fresh.Inventories) == mapID(a.Inventories) {
		t.Error("Decode returned the shared map, which its caller may mutate")
	}
	var freshCap HostCapacity
	if err := Decode("/h1", hc, &freshCap); err != nil {
		t.Fatal(err)
	}
	if mapID(freshCap.Inventories) == mapID(h1.Inventories) {
		t.Error("Decode returned a host capacity's shared map")
	}
}

// TestSharedInventoriesBounded: past maxSharedValues distinct
// values the table holds no more, and decoding still gives each its own.
func TestSharedInventoriesBounded(t *testing.T) {
	for i := range maxSharedValues + 100 {
		total := int64(1_000_000 + i)
		in := []byte(MustEncode(&HostCapacity{Host: "h", Inventories: map[string]Inventory{"VCPU": {Total: total, MinUnit: 1, MaxUnit: 1, StepSize: 1, AllocationRatio: 1}}}))
		got, err := DecodeHostCapacityShared("/h", in)
		if err != nil {
			t.Fatal(err)
		}
		if got.Inventories["VCPU"].Total != total {
			t.Fatalf("value %d decoded as %v", total, got.Inventories)
		}
	}
	sharedInventories.mu.RLock()
	n := len(sharedInventories.m)
	sharedInventories.mu.RUnlock()
	if n > maxSharedValues {
		t.Errorf("the table holds %d values, bound %d", n, maxSharedValues)
	}
}

// TestSharedProviderParts: an index's decoder gives providers' equal
// usages, traits and aggregates one map or slice (of Decode's value),
// a root equal to the uuid the uuid's string, and the plain Decode
// fresh ones its caller may mutate.
func TestSharedProviderParts(t *testing.T) {
	provider := func(uuid string, vcpu int64, traits ...string) []byte {
		return []byte(MustEncode(&Provider{UUID: uuid, Name: "host-" + uuid, RootProviderUUID: uuid, Generation: 3,
			Inventories: map[string]Inventory{"VCPU": {Total: 8, MinUnit: 1, MaxUnit: 8, StepSize: 1, AllocationRatio: 1}},
			Traits:      traits, Aggregates: []string{"agg-1"}, Usages: map[string]int64{"VCPU": vcpu}}))
	}
	decode := func(uuid string, vcpu int64, traits ...string) *Provider {
		t.Helper()
		p, err := DecodeProviderAfter("/"+uuid, provider(uuid, vcpu, traits...), nil)
		if err != nil {
			t.Fatal(err)
		}
		var want Provider
		if err := Decode("/"+uuid, provider(uuid, vcpu, traits...), &want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(*p, want) {
			t.Fatalf("shared decode %+v, Decode %+v", *p, want)
		}
		return p
	}
	sliceID := func(s []string) uintptr { return reflect.ValueOf(s).Pointer() }
	usageID := func(m map[string]int64) uintptr { return reflect.ValueOf(m).Pointer() }
	a := decode("a", 2, "COMPUTE_X", "HW_CPU_Y")
	b := decode("b", 2, "COMPUTE_X", "HW_CPU_Y")
	c := decode("c", 3, "COMPUTE_X")
	if usageID(a.Usages) != usageID(b.Usages) || usageID(a.Usages) == usageID(c.Usages) {
		t.Errorf("usages: equal ones shared %v, unequal ones shared %v",
			usageID(a.Usages) == usageID(b.Usages), usageID(a.Usages) == usageID(c.Usages))
	}
	if sliceID(a.Traits) != sliceID(b.Traits) || sliceID(a.Aggregates) != sliceID(c.Aggregates) {
		t.Error("equal traits or aggregates were decoded into slices of their own")
	}
	if sliceID(a.Traits) == sliceID(c.Traits) {
		t.Error("unequal traits share a slice")
	}
	if cap(a.Traits) != len(a.Traits) {
		t.Errorf("a shared slice has room to append in place: len %d cap %d", len(a.Traits), cap(a.Traits))
	}
	if unsafe.StringData(a.RootProviderUUID) != unsafe.StringData(a.UUID) {
		t.Error("a root provider's root uuid is a string of its own")
	}
	if unsafe.StringData(a.Name) != (*byte)(unsafe.Add(unsafe.Pointer(unsafe.StringData(a.UUID)), len(a.UUID))) {
		t.Error("a new provider's uuid and name are two strings")
	}
	var fresh Provider
	if err := Decode("/a", provider("a", 2, "COMPUTE_X", "HW_CPU_Y"), &fresh); err != nil {
		t.Fatal(err)
	}
	if usageID(fresh.Usages) == usageID(a.Usages) || sliceID(fresh.Traits) == sliceID(a.Traits) {
		t.Error("Decode returned a shared map or slice, which its caller may mutate")
	}
	// A field the record leaves out keeps the destination's value, as
	// encoding/json leaves it.
	kept := Provider{Name: "kept", ParentProviderUUID: "parent"}
	if err := Decode("/x", []byte(`{"version":1,"uuid":"x","root_provider_uuid":"x"}`), &kept); err != nil {
		t.Fatal(err)
	}
	if kept.Name != "kept" || kept.ParentProviderUUID != "parent" || kept.UUID != "x" || kept.RootProviderUUID != "x" {
		t.Errorf("decoded over a set value: %+v", kept)
	}
}
