package etcdschema

import (
	"math/rand"
	"testing"
)

// TestHostRecordsFastEncodeMatchesJSONMarshal: the encoders of the
// records a host writes in the background write exactly json.Marshal's
// bytes (and fail where it fails) for many random values: odd strings
// and times, inventories with floats at json.Marshal's format
// boundaries, nil against empty lists and maps.
func TestHostRecordsFastEncodeMatchesJSONMarshal(t *testing.T) {
	g := genPlacement{rand.New(rand.NewSource(23)), new(bool)}
	fast := 0
	for i := 0; i < 3000; i++ {
		*g.plain = i%2 == 0
		if checkFastEncode(t, &HostMapping{Host: g.str(), Cell: g.str(), CreatedAt: g.time()}, false) {
			fast++
		}
		hs := &HostSync{Host: g.str(), UUIDs: g.strs(), At: g.time()}
		if g.rng.Intn(2) == 0 {
			hs.FlavorIDs = g.strs()
		}
		if checkFastEncode(t, hs, false) {
			fast++
		}
		p := g.provider()
		if checkFastEncode(t, &HostCapacity{Host: g.str(), Inventories: p.Inventories, Used: p.Usages, At: g.time()}, false) {
			fast++
		}
	}
	// Times json.Marshal refuses (and floats it refuses, in
	// inventories) leave about 7,000 of the 9,000 to the fast path.
	t.Logf("%d of 9000 values took the fast path", fast)
	if fast < 5000 {
		t.Errorf("only %d of 9000 values took the fast path", fast)
	}
}

// BenchmarkEncodeHostRecords: Encode of a host's mapping, instance list
// (10 instances) and capacity against json.Marshal.
func BenchmarkEncodeHostRecords(b *testing.B) {
	hs := &HostSync{Host: "compute-000001", At: providerCreated}
	for i := 0; i < 10; i++ {
		hs.UUIDs = append(hs.UUIDs, "6a0c9b1e-0000-4000-8000-00000000000"+string(rune('0'+i)))
		hs.FlavorIDs = append(hs.FlavorIDs, "2")
	}
	inv := func(n int64, ratio float64) Inventory {
		return Inventory{Total: n, MinUnit: 1, MaxUnit: n, StepSize: 1, AllocationRatio: ratio}
	}
	vals := []Versioned{
		&HostMapping{Host: "compute-000001", Cell: "cell1", CreatedAt: providerCreated}, hs,
		&HostCapacity{Host: "compute-000001", Inventories: map[string]Inventory{"VCPU": inv(16, 16),
			"MEMORY_MB": inv(65536, 1.5), "DISK_GB": inv(1000, 1)},
			Used: map[string]int64{"VCPU": 4, "MEMORY_MB": 8192, "DISK_GB": 80}, At: providerCreated},
	}
	benchEncodeAgainstMarshal(b, vals)
}
