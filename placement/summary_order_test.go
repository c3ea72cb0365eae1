package placement

import (
	"slices"
	"testing"

	"github.com/berth-project/berth/etcdschema"
)

// TestCandidateSummaryOrder: allocation candidates' provider summaries come
// in the order Placement 8.0 writes them: tree by tree, trees in their
// roots' creation order, a tree's providers in their creation order,
// whatever their uuids. The wants were recorded from the real Placement
// 8.0 (../shared/reference/start-placement.sh, sqlite) given the same
// providers created in the same order, at microversions 1.10 (only the
// providers used) and 1.29/1.39 (whole trees).
func TestCandidateSummaryOrder(t *testing.T) {
	s, cli := newStarted(t)
	const (
		a = "cccccccc-0000-0000-0000-000000000001" // root
		b = "aaaaaaaa-0000-0000-0000-000000000002" // root
		c = "00000000-0000-0000-0000-000000000003" // a's child, created after b
		d = "ffffffff-0000-0000-0000-000000000004" // root
		e = "bbbbbbbb-0000-0000-0000-000000000005" // b's child, created after d
	)
	compute := map[string]etcdschema.Inventory{VCPU: inv(8), MemoryMB: inv(4096)}
	mkProvider(t, s, a, "", compute)
	mkProvider(t, s, b, "", compute)
	mkProvider(t, s, c, a, map[string]etcdschema.Inventory{VCPU: inv(4)})
	mkProvider(t, s, d, "", compute)
	mkProvider(t, s, e, b, map[string]etcdschema.Inventory{DiskGB: inv(100)})
	syncIdx(t, s)
	loaded := startOn(t, cli)

	vcpu := []RequestGroup{{Resources: map[string]int64{VCPU: 1}}}
	vcpuDisk := []RequestGroup{{Resources: map[string]int64{VCPU: 1, DiskGB: 1}}}
	cases := []struct {
		desc string
		q    CandidateQuery
		want []string
	}{
		{"1.10 VCPU:1", CandidateQuery{Groups: vcpu, NotNestedAware: true}, []string{a, c, b, d}},
		{"1.29 VCPU:1", CandidateQuery{Groups: vcpu}, []string{a, c, b, e, d}},
		{"1.29 VCPU:1,DISK_GB:1", CandidateQuery{Groups: vcpuDisk}, []string{b, e}},
	}
	for name, svc := range map[string]*Service{"followed": s, "loaded": loaded} {
		for _, tc := range cases {
			got, err := svc.AllocationCandidates(testCtx(t), tc.q)
			if err != nil {
				t.Fatalf("%s %s: %v", name, tc.desc, err)
			}
			if order := got.SummaryOrder(); !slices.Equal(order, tc.want) {
				t.Errorf("%s index, %s: summaries in order %v, want Placement's %v", name, tc.desc, order, tc.want)
			}
		}
	}
}
