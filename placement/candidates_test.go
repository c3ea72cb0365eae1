package placement

import (
	"sort"
	"testing"

	"github.com/berth-project/berth/etcdschema"
)

func compute(vcpu, mem, disk int64) map[string]etcdschema.Inventory {
	return map[string]etcdschema.Inventory{VCPU: inv(vcpu), MemoryMB: inv(mem), DiskGB: inv(disk)}
}

// providersOf lists, per allocation request, the sorted "rp:RC=n" pairs.
func providersOf(c *Candidates) []string {
	var out []string
	for _, ar := range c.AllocationRequests {
		var parts []string
		for rp, a := range ar.Allocations {
			rcs := make([]string, 0, len(a.Resources))
			for rc := range a.Resources {
				rcs = append(rcs, rc)
			}
			sort.Strings(rcs)
			for _, rc := range rcs {
				parts = append(parts, rp+":"+rc)
			}
		}
		sort.Strings(parts)
		s := ""
		for i, p := range parts {
			if i > 0 {
				s += ","
			}
			s += p
		}
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

func TestCandidatesFlat(t *testing.T) {
	s, _ := newStarted(t)
	ctx := testCtx(t)
	mkProvider(t, s, "big", "", compute(16, 32768, 500))
	mkProvider(t, s, "small", "", compute(1, 1024, 10))
	mkProvider(t, s, "disabled", "", compute(16, 32768, 500), TraitComputeStatusDisabled)
	mkProvider(t, s, "ssd", "", compute(16, 32768, 500), "STORAGE_DISK_SSD")
	if err := s.PutAllocations(ctx, "x", AllocationWrite{Allocations: alloc("ssd", map[string]int64{VCPU: 15})}); err != nil {
		t.Fatal(err)
	}
	syncIdx(t, s)
	res := map[string]int64{VCPU: 2, MemoryMB: 4096, DiskGB: 20}
	cases := []struct {
		desc string
		q    CandidateQuery
		want []string
	}{
		{"fits and not disabled", CandidateQuery{Groups: []RequestGroup{{Resources: res, Forbidden: []string{TraitComputeStatusDisabled}}}},
			[]string{"big:DISK_GB,big:MEMORY_MB,big:VCPU"}},
		{"disabled allowed", CandidateQuery{Groups: []RequestGroup{{Resources: res}}},
			[]string{"big:DISK_GB,big:MEMORY_MB,big:VCPU", "disabled:DISK_GB,disabled:MEMORY_MB,disabled:VCPU"}},
		{"limit", CandidateQuery{Limit: 1, Groups: []RequestGroup{{Resources: res}}}, nil},
		{"required trait but used up", CandidateQuery{Groups: []RequestGroup{{Resources: res, Required: []string{"STORAGE_DISK_SSD"}}}}, nil},
		{"required trait", CandidateQuery{Groups: []RequestGroup{{Resources: map[string]int64{VCPU: 1}, Required: []string{"STORAGE_DISK_SSD"}}}},
			[]string{"ssd:VCPU"}},
		{"unknown class", CandidateQuery{Groups: []RequestGroup{{Resources: map[string]int64{"CUSTOM_X": 1}}}}, nil},
		{"unknown required trait", CandidateQuery{Groups: []RequestGroup{{Resources: res, Required: []string{"CUSTOM_NOPE"}}}}, nil},
		{"any-of traits", CandidateQuery{Groups: []RequestGroup{{Resources: map[string]int64{VCPU: 1}, RequiredAny: [][]string{{"STORAGE_DISK_SSD", TraitComputeStatusDisabled}}}}},
			[]string{"disabled:VCPU", "ssd:VCPU"}},
	}
	for _, tc := range cases {
		got, err := s.AllocationCandidates(ctx, tc.q)
		if err != nil {
			t.Fatal(err)
		}
		checkCompact(t, s, tc.q, got)
		if tc.desc == "limit" {
			if len(got.AllocationRequests) != 1 || len(got.ProviderSummaries) != 1 {
				t.Errorf("%s: %d requests %d summaries", tc.desc, len(got.AllocationRequests), len(got.ProviderSummaries))
			}
			continue
		}
		if g := providersOf(got); !equalStrings(g, tc.want) {
			t.Errorf("%s: got %v want %v", tc.desc, g, tc.want)
		}
	}
	got, _ := s.AllocationCandidates(ctx, CandidateQuery{Groups: []RequestGroup{{Resources: map[string]int64{VCPU: 1}, Required: []string{"STORAGE_DISK_SSD"}}}})
	sum := got.ProviderSummaries["ssd"]
	if sum.Resources[VCPU] != (ResourceSummary{Capacity: 16, Used: 15}) || sum.RootProviderUUID != "ssd" || len(sum.Traits) != 1 {
		t.Fatalf("summary %+v", sum)
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestCandidatesNestedAndGranular(t *testing.T) {
	s, _ := newStarted(t)
	ctx := testCtx(t)
	mkProvider(t, s, "cn", "", map[string]etcdschema.Inventory{VCPU: inv(8), MemoryMB: inv(4096)})
	mkProvider(t, s, "pf1", "cn", map[string]etcdschema.Inventory{"SRIOV_NET_VF": inv(2)}, "CUSTOM_PHYSNET1")
	mkProvider(t, s, "pf2", "cn", map[string]etcdschema.Inventory{"SRIOV_NET_VF": inv(2)}, "CUSTOM_PHYSNET2")
	syncIdx(t, s)
	cases := []struct {
		desc string
		q    CandidateQuery
		want []string
	}{
		{"unsuffixed spans the tree", CandidateQuery{Groups: []RequestGroup{{Resources: map[string]int64{VCPU: 1, "SRIOV_NET_VF": 1}}}},
			[]string{"cn:VCPU,pf1:SRIOV_NET_VF", "cn:VCPU,pf2:SRIOV_NET_VF"}},
		{"unsuffixed trait collectively", CandidateQuery{Groups: []RequestGroup{{Resources: map[string]int64{VCPU: 1, "SRIOV_NET_VF": 1}, Required: []string{"CUSTOM_PHYSNET2"}}}},
			[]string{"cn:VCPU,pf2:SRIOV_NET_VF"}},
		{"not nested aware", CandidateQuery{NotNestedAware: true, Groups: []RequestGroup{{Resources: map[string]int64{VCPU: 1, "SRIOV_NET_VF": 1}}}}, nil},
		{"granular isolate", CandidateQuery{GroupPolicy: "isolate", Groups: []RequestGroup{
			{Resources: map[string]int64{VCPU: 1}},
			{Suffix: "1", Resources: map[string]int64{"SRIOV_NET_VF": 1}},
			{Suffix: "2", Resources: map[string]int64{"SRIOV_NET_VF": 1}},
		}}, []string{"cn:VCPU,pf1:SRIOV_NET_VF,pf2:SRIOV_NET_VF", "cn:VCPU,pf1:SRIOV_NET_VF,pf2:SRIOV_NET_VF"}}, // mappings differ
		{"granular none may share", CandidateQuery{GroupPolicy: "none", Groups: []RequestGroup{
			{Suffix: "1", Resources: map[string]int64{"SRIOV_NET_VF": 1}},
			{Suffix: "2", Resources: map[string]int64{"SRIOV_NET_VF": 1}},
		}}, []string{"pf1:SRIOV_NET_VF", "pf1:SRIOV_NET_VF,pf2:SRIOV_NET_VF", "pf1:SRIOV_NET_VF,pf2:SRIOV_NET_VF", "pf2:SRIOV_NET_VF"}},
		{"granular too much in one", CandidateQuery{GroupPolicy: "none", Groups: []RequestGroup{
			{Suffix: "1", Resources: map[string]int64{"SRIOV_NET_VF": 2}},
			{Suffix: "2", Resources: map[string]int64{"SRIOV_NET_VF": 1}},
		}}, []string{"pf1:SRIOV_NET_VF,pf2:SRIOV_NET_VF", "pf1:SRIOV_NET_VF,pf2:SRIOV_NET_VF"}},
		{"root required", CandidateQuery{RootRequired: []string{"CUSTOM_PHYSNET1"}, Groups: []RequestGroup{{Resources: map[string]int64{VCPU: 1}}}}, nil},
	}
	for _, tc := range cases {
		got, err := s.AllocationCandidates(ctx, tc.q)
		if err != nil {
			t.Fatal(err)
		}
		checkCompact(t, s, tc.q, got)
		if g := providersOf(got); !equalStrings(g, tc.want) {
			t.Errorf("%s: got %v want %v", tc.desc, g, tc.want)
		}
		if len(got.AllocationRequests) > 0 && len(got.ProviderSummaries) != 3 {
			t.Errorf("%s: %d summaries, want the whole tree", tc.desc, len(got.ProviderSummaries))
		}
	}
}

func TestCandidatesSharing(t *testing.T) {
	s, _ := newStarted(t)
	ctx := testCtx(t)
	mkProvider(t, s, "cn1", "", map[string]etcdschema.Inventory{VCPU: inv(8)})
	mkProvider(t, s, "cn2", "", map[string]etcdschema.Inventory{VCPU: inv(8)})
	mkProvider(t, s, "nfs", "", map[string]etcdschema.Inventory{DiskGB: inv(1000)}, TraitSharesViaAggregate)
	for _, rp := range []string{"cn1", "nfs"} {
		if err := s.UpdateProvider(ctx, rp, func(p *etcdschema.Provider) error {
			p.Aggregates = append(p.Aggregates, "agg1")
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	syncIdx(t, s)
	sq := CandidateQuery{Groups: []RequestGroup{{Resources: map[string]int64{VCPU: 1, DiskGB: 10}}}}
	got, _ := s.AllocationCandidates(ctx, sq)
	checkCompact(t, s, sq, got)
	if g := providersOf(got); !equalStrings(g, []string{"cn1:VCPU,nfs:DISK_GB"}) {
		t.Fatalf("sharing: %v", g)
	}
	if len(got.ProviderSummaries) != 2 {
		t.Fatalf("summaries %v", got.ProviderSummaries)
	}
}
