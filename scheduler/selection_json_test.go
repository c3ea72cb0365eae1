package scheduler

import (
	"encoding/json"
	"testing"

	"github.com/berth-project/berth/placement"
)

// TestAllocationRequestJSONIsMarshals: the direct writer gives exactly
// json.Marshal's bytes, on its own path and on the fallbacks.
func TestAllocationRequestJSONIsMarshals(t *testing.T) {
	one := func(rp string, res map[string]int64) placement.Candidate {
		return placement.Candidate{Root: rp, Parts: []placement.CandidatePart{{Provider: rp, Resources: res}}}
	}
	cases := []struct {
		desc string
		c    placement.Candidate
	}{
		{"the usual flavor", one("00000000-0000-0000-0000-000000000042",
			map[string]int64{placement.VCPU: 1, placement.MemoryMB: 2048, placement.DiskGB: 20})},
		{"one class", one("rp-1", map[string]int64{placement.VCPU: 4})},
		{"no resources", one("rp-1", map[string]int64{})},
		{"nil resources", one("rp-1", nil)},
		{"negative and large amounts", one("rp", map[string]int64{"CUSTOM_A": -1, "CUSTOM_B": 1 << 62})},
		{"more classes than the name array", one("rp", map[string]int64{"A": 1, "B": 2, "C": 3, "D": 4, "E": 5,
			"F": 6, "G": 7, "H": 8, "I": 9, "J": 10})},
		{"a name JSON escapes", one("rp<&>", map[string]int64{"CUSTOM_\"X\"": 1})},
		{"a class JSON escapes", one("rp", map[string]int64{"CUSTOM_<": 1, placement.VCPU: 2})},
		{"two parts", placement.Candidate{Root: "a", Parts: []placement.CandidatePart{
			{Provider: "a", Resources: map[string]int64{placement.VCPU: 1}},
			{Provider: "b", Resources: map[string]int64{"SRIOV_NET_VF": 1}}}}},
		{"two parts on one provider", placement.Candidate{Root: "a", Parts: []placement.CandidatePart{
			{Provider: "a", Resources: map[string]int64{placement.VCPU: 1}},
			{Provider: "a", Resources: map[string]int64{placement.VCPU: 2, placement.MemoryMB: 5}}}}},
		{"no parts", placement.Candidate{Root: "a"}},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			want, err := json.Marshal(tc.c.AllocationRequest())
			if err != nil {
				t.Fatal(err)
			}
			if got := allocationRequestJSON(tc.c); got != string(want) {
				t.Fatalf("got  %s\nwant %s", got, want)
			}
		})
	}
}

// BenchmarkAllocationRequestJSON: a Selection's allocation request for
// the usual candidate, written directly and through json.Marshal.
func BenchmarkAllocationRequestJSON(b *testing.B) {
	c := placement.Candidate{Root: "00000000-0000-0000-0000-000000000042", Parts: []placement.CandidatePart{{
		Provider:  "00000000-0000-0000-0000-000000000042",
		Resources: map[string]int64{placement.VCPU: 1, placement.MemoryMB: 2048, placement.DiskGB: 20}}}}
	b.Run("direct", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			_ = allocationRequestJSON(c)
		}
	})
	b.Run("json.Marshal", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			_ = marshalAllocationRequest(c)
		}
	})
}
