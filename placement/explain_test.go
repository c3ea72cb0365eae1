package placement

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/berth-project/berth/etcdschema"
)

// explainIndex is an index of providers put straight into its state, as
// the watch would: the explanation reads nothing else.
func explainIndex(ps ...*etcdschema.Provider) *indexState {
	st := newIndexState()
	for i, p := range ps {
		p.RootProviderUUID = p.UUID
		if p.ParentProviderUUID != "" {
			p.RootProviderUUID = st.providers[p.ParentProviderUUID].p.RootProviderUUID
		}
		st.putProvider(p, int64(i+1))
	}
	return st
}

func rp(uuid string, invs map[string]etcdschema.Inventory, used map[string]int64, traits ...string) *etcdschema.Provider {
	return &etcdschema.Provider{UUID: uuid, Name: uuid, Inventories: invs, Usages: used, Traits: traits}
}

func TestExplainCandidates(t *testing.T) {
	capped := func(total, maxUnit int64) etcdschema.Inventory {
		i := inv(total)
		i.MaxUnit = maxUnit
		return i
	}
	stepped := inv(1024)
	stepped.StepSize = 256
	flavor := func(vcpu, mem int64) []RequestGroup {
		return []RequestGroup{{Resources: map[string]int64{VCPU: vcpu, MemoryMB: mem, DiskGB: 10},
			Forbidden: []string{TraitComputeStatusDisabled}}}
	}
	cases := []struct {
		desc      string
		providers []*etcdschema.Provider
		q         CandidateQuery
		want      []RootFit
	}{
		{
			desc: "memory exhausted everywhere: the most free on each",
			providers: []*etcdschema.Provider{
				rp("a", compute(16, 16384, 500), map[string]int64{MemoryMB: 12288}),
				rp("b", compute(16, 16384, 500), map[string]int64{MemoryMB: 8192}),
			},
			q: CandidateQuery{Groups: flavor(8, 16384)},
			want: []RootFit{
				{Root: "a", Name: "a", Miss: Miss{Kind: MissCapacity, Class: MemoryMB, Amount: 16384, Free: 4096}},
				{Root: "b", Name: "b", Miss: Miss{Kind: MissCapacity, Class: MemoryMB, Amount: 16384, Free: 8192}},
			},
		},
		{
			desc: "over max_unit on an empty host is max_unit, not room",
			providers: []*etcdschema.Provider{
				rp("a", map[string]etcdschema.Inventory{VCPU: capped(64, 16), MemoryMB: inv(65536), DiskGB: inv(500)}, nil),
			},
			q:    CandidateQuery{Groups: flavor(32, 1024)},
			want: []RootFit{{Root: "a", Name: "a", Miss: Miss{Kind: MissMaxUnit, Class: VCPU, Amount: 32, Limit: 16}}},
		},
		{
			desc: "a disabled host is disabled even when full; one that fits fits",
			providers: []*etcdschema.Provider{
				rp("off", compute(16, 16384, 500), map[string]int64{MemoryMB: 16384}, TraitComputeStatusDisabled),
				rp("on", compute(16, 16384, 500), nil),
			},
			q: CandidateQuery{Groups: flavor(1, 512)},
			want: []RootFit{
				{Root: "off", Name: "off", Miss: Miss{Kind: MissForbiddenTrait, Class: TraitComputeStatusDisabled}},
				{Root: "on", Name: "on", Fits: true},
			},
		},
		{
			desc:      "a class no provider has",
			providers: []*etcdschema.Provider{rp("a", compute(16, 16384, 500), nil)},
			q:         CandidateQuery{Groups: []RequestGroup{{Resources: map[string]int64{"VGPU": 1}}}},
			want:      []RootFit{{Root: "a", Name: "a", Miss: Miss{Kind: MissNoInventory, Class: "VGPU", Amount: 1}}},
		},
		{
			desc: "min_unit and step_size",
			providers: []*etcdschema.Provider{
				rp("step", map[string]etcdschema.Inventory{MemoryMB: stepped}, nil),
				rp("min", map[string]etcdschema.Inventory{MemoryMB: {Total: 1024, MinUnit: 512, MaxUnit: 1024, StepSize: 1, AllocationRatio: 1}}, nil),
			},
			q: CandidateQuery{Groups: []RequestGroup{{Resources: map[string]int64{MemoryMB: 300}}}},
			want: []RootFit{
				{Root: "min", Name: "min", Miss: Miss{Kind: MissMinUnit, Class: MemoryMB, Amount: 300, Limit: 512}},
				{Root: "step", Name: "step", Miss: Miss{Kind: MissStepSize, Class: MemoryMB, Amount: 300, Limit: 256}},
			},
		},
		{
			desc:      "reserved and allocation_ratio make the capacity",
			providers: []*etcdschema.Provider{rp("a", map[string]etcdschema.Inventory{VCPU: {Total: 8, Reserved: 2, MinUnit: 1, MaxUnit: 8, StepSize: 1, AllocationRatio: 2}}, map[string]int64{VCPU: 6})},
			q:         CandidateQuery{Groups: []RequestGroup{{Resources: map[string]int64{VCPU: 8}}}},
			want:      []RootFit{{Root: "a", Name: "a", Miss: Miss{Kind: MissCapacity, Class: VCPU, Amount: 8, Free: 6}}},
		},
		{
			desc:      "a required trait no provider has",
			providers: []*etcdschema.Provider{rp("a", compute(16, 16384, 500), nil, "HW_CPU_X86_AVX")},
			q:         CandidateQuery{Groups: []RequestGroup{{Resources: map[string]int64{VCPU: 1}, Required: []string{"HW_CPU_X86_AVX2"}}}},
			want:      []RootFit{{Root: "a", Name: "a", Miss: Miss{Kind: MissRequiredTrait, Class: "HW_CPU_X86_AVX2"}}},
		},
		{
			desc:      "member_of: in none of the aggregates",
			providers: []*etcdschema.Provider{rp("a", compute(16, 16384, 500), nil)},
			q:         CandidateQuery{Groups: []RequestGroup{{Resources: map[string]int64{VCPU: 1}, MemberOf: [][]string{{"agg1", "agg2"}}}}},
			want:      []RootFit{{Root: "a", Name: "a", Miss: Miss{Kind: MissMemberOf, Class: "agg1,agg2"}}},
		},
		{
			desc:      "root_required",
			providers: []*etcdschema.Provider{rp("a", compute(16, 16384, 500), nil)},
			q:         CandidateQuery{Groups: flavor(1, 512), RootRequired: []string{"CUSTOM_GOLD"}},
			want:      []RootFit{{Root: "a", Name: "a", Miss: Miss{Kind: MissRootRequiredTrait, Class: "CUSTOM_GOLD"}}},
		},
		{
			desc: "a tree: the child with the most room speaks for the class",
			providers: []*etcdschema.Provider{
				rp("root", compute(16, 16384, 500), nil),
				{UUID: "gpu1", Name: "gpu1", ParentProviderUUID: "root", Inventories: map[string]etcdschema.Inventory{"VGPU": inv(4)}, Usages: map[string]int64{"VGPU": 4}},
				{UUID: "gpu2", Name: "gpu2", ParentProviderUUID: "root", Inventories: map[string]etcdschema.Inventory{"VGPU": inv(4)}, Usages: map[string]int64{"VGPU": 3}},
			},
			q:    CandidateQuery{Groups: []RequestGroup{{Resources: map[string]int64{VCPU: 1, "VGPU": 2}}}},
			want: []RootFit{{Root: "root", Name: "root", Miss: Miss{Kind: MissCapacity, Class: "VGPU", Amount: 2, Free: 1}}},
		},
		{
			desc: "group_policy isolate on one provider: each part fits, no combination does",
			providers: []*etcdschema.Provider{
				rp("root", nil, nil),
				{UUID: "gpu1", Name: "gpu1", ParentProviderUUID: "root", Inventories: map[string]etcdschema.Inventory{"VGPU": inv(4)}},
			},
			q: CandidateQuery{GroupPolicy: "isolate", Groups: []RequestGroup{
				{Suffix: "1", Resources: map[string]int64{"VGPU": 1}}, {Suffix: "2", Resources: map[string]int64{"VGPU": 1}}}},
			want: []RootFit{{Root: "root", Name: "root", Miss: Miss{Kind: MissCombination}}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			st := explainIndex(tc.providers...)
			got := st.explain(tc.q, newSearchBudget(context.Background(), 0, len(tc.q.Groups), new(atomic.Int64)))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("explain (-want +got):\n%s", diff)
			}
			// The explanation agrees with the search on which trees fit.
			_, areqs, _, _ := st.search(tc.q, newSearchBudget(context.Background(), 0, len(tc.q.Groups), new(atomic.Int64)), nil, 0, new(areqSlab))
			anchors := map[string]bool{}
			for _, a := range areqs {
				anchors[st.slots[a.anchor].p.UUID] = true
			}
			for _, rf := range got {
				if rf.Fits != anchors[rf.Root] {
					t.Errorf("%s: explained fits=%v, search %v", rf.Root, rf.Fits, anchors[rf.Root])
				}
			}
		})
	}
}

// Through the service, on a real index fed from etcd.
func TestExplainCandidatesService(t *testing.T) {
	s, _ := newStarted(t)
	mkProvider(t, s, "full", "", compute(16, 4096, 100))
	if err := s.PutAllocations(testCtx(t), "c1", AllocationWrite{Allocations: alloc("full", map[string]int64{MemoryMB: 3072})}); err != nil {
		t.Fatal(err)
	}
	syncIdx(t, s)
	got, err := s.ExplainCandidates(testCtx(t), CandidateQuery{Groups: []RequestGroup{{Resources: map[string]int64{MemoryMB: 2048}}}})
	if err != nil {
		t.Fatal(err)
	}
	want := []RootFit{{Root: "full", Name: "name-full", Miss: Miss{Kind: MissCapacity, Class: MemoryMB, Amount: 2048, Free: 1024}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// BenchmarkExplainCandidates is what a failed request pays at 10,000
// hosts for its reason: when none fits (the cloud is full), and when
// nine in ten fit (a request the filters refused, explained against
// every host).
func BenchmarkExplainCandidates(b *testing.B) {
	for _, tc := range []struct {
		desc   string
		memory int64
	}{{"none fits", 300000}, {"most fit", 4096}} {
		b.Run(tc.desc, func(b *testing.B) {
			ps := make([]*etcdschema.Provider, 10000)
			for i := range ps {
				ps[i] = rp(fmt.Sprintf("host%05d", i), compute(64, 262144, 2000), map[string]int64{MemoryMB: 131072})
				if i%10 == 0 {
					ps[i].Traits = []string{TraitComputeStatusDisabled}
				}
			}
			st := explainIndex(ps...)
			q := CandidateQuery{Limit: 1000, Groups: []RequestGroup{{
				Resources: map[string]int64{VCPU: 2, MemoryMB: tc.memory, DiskGB: 20}}},
				RootForbidden: []string{TraitComputeStatusDisabled}}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if got := st.explain(q, newSearchBudget(context.Background(), 0, len(q.Groups), new(atomic.Int64))); len(got) != len(ps) {
					b.Fatalf("%d roots explained, want %d", len(got), len(ps))
				}
			}
		})
	}
}
