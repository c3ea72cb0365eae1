package httpapi

import (
	"slices"
	"testing"

	"github.com/berth-project/berth/internal/pycompat"
)

// TestCandidateSummaryOrderOnTheWire: GET /allocation_candidates writes
// provider_summaries in Placement's order, tree by tree in their roots'
// creation order, a tree's providers by creation, at every microversion
// (only the used providers before 1.29). The wants were recorded from the
// real Placement 8.0 (../shared/reference/start-placement.sh, sqlite) given
// these providers created in this order (abridged to the uuids' first
// eight digits, in the order its answer wrote them).
func TestCandidateSummaryOrderOnTheWire(t *testing.T) {
	a := newAPI(t)
	const (
		rpA = "cccccccc-0000-0000-0000-000000000001" // root
		rpB = "aaaaaaaa-0000-0000-0000-000000000002" // root
		rpC = "00000000-0000-0000-0000-000000000003" // rpA's child, created after rpB
		rpD = "ffffffff-0000-0000-0000-000000000004" // root
		rpE = "bbbbbbbb-0000-0000-0000-000000000005" // rpB's child, created after rpD
	)
	a.provider(rpA)
	a.provider(rpB)
	a.provider(rpC, rpA)
	a.provider(rpD)
	a.provider(rpE, rpB)
	for _, u := range []string{rpA, rpB, rpD} {
		a.inventory(u, map[string]int{"VCPU": 8, "MEMORY_MB": 4096})
	}
	a.inventory(rpC, map[string]int{"VCPU": 4})
	a.inventory(rpE, map[string]int{"DISK_GB": 100})
	for _, tc := range []struct {
		mv, query string
		want      []string // the reference's order
	}{
		{"1.10", "resources=VCPU:1", []string{rpA, rpC, rpB, rpD}},                                    // cccc 0000 aaaa ffff
		{"1.29", "resources=VCPU:1", []string{rpA, rpC, rpB, rpE, rpD}},                               // cccc 0000 aaaa bbbb ffff
		{"1.39", "resources=VCPU:1", []string{rpA, rpC, rpB, rpE, rpD}},                               // cccc 0000 aaaa bbbb ffff
		{"1.29", "resources=VCPU:1,DISK_GB:1", []string{rpB, rpE}},                                    // aaaa bbbb
		{"1.39", "resources1=DISK_GB:1&resources2=MEMORY_MB:1&group_policy=none", []string{rpB, rpE}}, // aaaa bbbb
	} {
		r := a.must(200, "GET", "/allocation_candidates?"+tc.query, tc.mv, nil)
		if got := pycompat.JSONKeyOrder([]byte(r.raw)).Keys("provider_summaries"); !slices.Equal(got, tc.want) {
			t.Errorf("%s at %s: provider_summaries in order %v, want Placement's %v", tc.query, tc.mv, got, tc.want)
		}
	}
}
