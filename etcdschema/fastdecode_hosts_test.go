package etcdschema

import (
	"encoding/json"
	"math/rand"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestHostRecordsFastDecodeMatchesEncodingJSON: Service, HostSync and
// HostMapping, as the placement records: random encoded values,
// reshaped, and edge cases decode exactly as encoding/json decodes them,
// or are declined.
func TestHostRecordsFastDecodeMatchesEncodingJSON(t *testing.T) {
	g := genPlacement{rand.New(rand.NewSource(3)), new(bool)}
	var svcs, syncs, maps [][]byte
	for i := 0; i < 1500; i++ {
		*g.plain = i%2 == 0
		s := &Service{Host: g.str(), Cell: g.str(), ProviderUUID: g.str(), Disabled: g.rng.Intn(2) == 0,
			ForcedDown: g.rng.Intn(2) == 0, CanLiveMigrate: g.rng.Intn(2) == 0, AgentVersion: g.str(), FailedBuilds: int(g.int64()), CreatedAt: g.time(), UpdatedAt: g.time()}
		if g.rng.Intn(2) == 0 {
			s.DisabledReason = g.str()
		}
		if b, err := Encode(s); err == nil {
			svcs = append(svcs, b, reshape(g.rng, b))
		}
		if b, err := Encode(&HostSync{Host: g.str(), UUIDs: g.strs(), At: g.time()}); err == nil {
			syncs = append(syncs, b, reshape(g.rng, b))
		}
		if b, err := Encode(&HostSync{Host: g.str(), UUIDs: g.strs(), FlavorIDs: g.strs(), At: g.time()}); err == nil {
			syncs = append(syncs, b, reshape(g.rng, b))
		}
		if b, err := Encode(&HostMapping{Host: g.str(), Cell: g.str(), CreatedAt: g.time()}); err == nil {
			maps = append(maps, b, reshape(g.rng, b))
		}
	}
	svc := MustEncode(&Service{Host: "compute-000001", Cell: "cell1", ProviderUUID: "2f9c0d1e-0000-4000-8000-000000000001",
		Disabled: true, DisabledReason: "maintenance", AgentVersion: "1.0", FailedBuilds: 2,
		CreatedAt: providerCreated, UpdatedAt: providerCreated})
	sync := MustEncode(&HostSync{Host: "compute-000001", UUIDs: []string{"a", "b"}, FlavorIDs: []string{"1", ""}, At: providerCreated})
	oldSync := MustEncode(&HostSync{Host: "compute-000001", UUIDs: []string{"a", "b"}, At: providerCreated})
	svcs = append(svcs, placementEdgeCases(svc)...)
	for _, v := range []string{"false", `"true"`, "null", "1", "tru", "TRUE", "true1", "truefalse"} {
		svcs = append(svcs, []byte(strings.Replace(svc, `"disabled":true`, `"disabled":`+v, 1)))
	}
	syncs = append(syncs, placementEdgeCases(sync)...)
	syncs = append(syncs, placementEdgeCases(oldSync)...)
	for _, v := range []string{"null", "[]", `[ "a" ]`, `["a",null]`, `"a"`, `{}`, `["a"`} {
		syncs = append(syncs, []byte(strings.Replace(sync, `"uuids":["a","b"]`, `"uuids":`+v, 1)),
			[]byte(strings.Replace(sync, `"flavor_ids":["1",""]`, `"flavor_ids":`+v, 1)))
	}
	mapping := MustEncode(&HostMapping{Host: "compute-000001", Cell: "cell1", CreatedAt: providerCreated})
	maps = append(maps, placementEdgeCases(mapping)...)
	fast := 0
	for _, in := range maps {
		if decodeBoth(t, in, HostMapping{}) {
			fast++
		}
		decodeBoth(t, in, HostMapping{Host: "old", Cell: "old", CreatedAt: time.Unix(5, 0).UTC()})
	}
	for _, in := range svcs {
		if decodeBoth(t, in, Service{}) {
			fast++
		}
		decodeBoth(t, in, Service{Host: "old", Disabled: true, FailedBuilds: 9})
	}
	for _, in := range syncs {
		if decodeBoth(t, in, HostSync{}) {
			fast++
		}
		decodeBoth(t, in, HostSync{Host: "old"})
		decodeBoth(t, in, HostSync{UUIDs: []string{"x", "y", "z"}})
		decodeBoth(t, in, HostSync{FlavorIDs: []string{"x"}})
		syncSharingMatchesDecode(t, in)
	}
	t.Logf("%d of %d values took the fast path", fast, len(svcs)+len(syncs)+len(maps))
	if fast < 2000 {
		t.Errorf("only %d of %d values took the fast path", fast, len(svcs)+len(syncs)+len(maps))
	}
	var s Service
	var hs HostSync
	var hm HostMapping
	var old HostSync
	if !s.decodeFast([]byte(svc)) || !hs.decodeFast([]byte(sync)) || !hm.decodeFast([]byte(mapping)) || !old.decodeFast([]byte(oldSync)) {
		t.Errorf("the fast path refused a Service, HostSync or HostMapping as Berth writes them")
	}
}

// TestHostCapacityFastDecodeMatchesEncodingJSON: random capacity records
// (inventories with floats at the format boundaries, nil against empty
// maps), reshaped, and edge cases decode exactly as encoding/json
// decodes them, or are declined; into empty destinations and into ones
// whose maps are set.
func TestHostCapacityFastDecodeMatchesEncodingJSON(t *testing.T) {
	g := genPlacement{rand.New(rand.NewSource(29)), new(bool)}
	var caps [][]byte
	for i := 0; i < 1500; i++ {
		*g.plain = i%2 == 0
		p := g.provider()
		if b, err := Encode(&HostCapacity{Host: g.str(), Inventories: p.Inventories, Used: p.Usages, At: g.time()}); err == nil {
			caps = append(caps, b, reshape(g.rng, b))
		}
	}
	valid := MustEncode(&HostCapacity{Host: "compute-000001", Inventories: map[string]Inventory{
		"VCPU": {Total: 16, MinUnit: 1, MaxUnit: 16, StepSize: 1, AllocationRatio: 16}},
		Used: map[string]int64{"VCPU": 4}, At: providerCreated})
	caps = append(caps, placementEdgeCases(valid)...)
	for _, v := range []string{"null", "{}", `{"VCPU":1.5}`, `{"VCPU":"1"}`, `{"VCPU":1,"VCPU":2}`, `[]`} {
		caps = append(caps, []byte(strings.Replace(valid, `"used":{"VCPU":4}`, `"used":`+v, 1)),
			[]byte(strings.Replace(valid, `"inventories":{`, `"inventories":`+v+`,"x":{`, 1)))
	}
	fast := 0
	for _, in := range caps {
		if decodeBoth(t, in, HostCapacity{}) {
			fast++
		}
		decodeBoth(t, in, HostCapacity{Host: "old", At: time.Unix(5, 0).UTC()})
		decodeBoth(t, in, HostCapacity{Inventories: map[string]Inventory{"OLD": {Total: 1}}})
		decodeBoth(t, in, HostCapacity{Used: map[string]int64{"OLD": 1}})
		// The host manager's decoder (shared inventories and usage) reads
		// the same value, or fails as Decode does.
		var want HostCapacity
		wantErr := Decode("/k", in, &want)
		got, err := DecodeHostCapacityShared("/k", in)
		if (err != nil) != (wantErr != nil) || (err == nil && !reflect.DeepEqual(*got, want)) {
			t.Errorf("DecodeHostCapacityShared(%s) = %+v, %v; Decode %+v, %v", in, got, err, want, wantErr)
		}
	}
	t.Logf("%d of %d values took the fast path", fast, len(caps))
	if fast < 700 {
		t.Errorf("only %d of %d values took the fast path", fast, len(caps))
	}
	if !new(HostCapacity).decodeFast([]byte(valid)) {
		t.Errorf("the fast path refused a HostCapacity as Berth writes it:\n%s", valid)
	}
}

// BenchmarkDecodeHostCapacity: Decode (fast path) of a host's capacity
// against encoding/json.
func BenchmarkDecodeHostCapacity(b *testing.B) {
	inv := func(n int64, ratio float64) Inventory {
		return Inventory{Total: n, MinUnit: 1, MaxUnit: n, StepSize: 1, AllocationRatio: ratio}
	}
	data := []byte(MustEncode(&HostCapacity{Host: "compute-000001", Inventories: map[string]Inventory{"VCPU": inv(16, 16),
		"MEMORY_MB": inv(65536, 1.5), "DISK_GB": inv(1000, 1)},
		Used: map[string]int64{"VCPU": 4, "MEMORY_MB": 8192, "DISK_GB": 80}, At: providerCreated}))
	b.Run("Decode", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if err := Decode("k", data, &HostCapacity{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("json.Unmarshal", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if err := json.Unmarshal(data, &HostCapacity{}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
