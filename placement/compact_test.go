package placement

import (
	"reflect"
	"testing"
)

// checkCompact asserts CompactCandidates answers q with the same
// candidates, in the same order, as the rendered answer want: the same
// allocations, the same tree root, and the root's summary as rendered.
func checkCompact(t *testing.T, s *Service, q CandidateQuery, want *Candidates) {
	t.Helper()
	got, err := s.CompactCandidates(testCtx(t), q)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want.AllocationRequests) {
		t.Fatalf("compact: %d candidates, rendered %d", len(got), len(want.AllocationRequests))
	}
	for i, c := range got {
		if ar := c.AllocationRequest(); !reflect.DeepEqual(ar.Allocations, want.AllocationRequests[i].Allocations) {
			t.Errorf("compact %d: allocations %v, rendered %v", i, ar.Allocations, want.AllocationRequests[i].Allocations)
		}
		if root, _ := want.RootOf(i); c.Root != root {
			t.Errorf("compact %d: root %q, rendered %q", i, c.Root, root)
		}
		if sum, ok := want.ProviderSummaries[c.Root]; ok && (c.RootSummary == nil || !reflect.DeepEqual(*c.RootSummary, sum)) {
			t.Errorf("compact %d: root summary %+v, rendered %+v", i, c.RootSummary, sum)
		}
		for rp, pa := range want.AllocationRequests[i].Allocations {
			if a := c.Amounts(rp); !reflect.DeepEqual(a, pa.Resources) {
				t.Errorf("compact %d: amounts on %s %v, rendered %v", i, rp, a, pa.Resources)
			}
		}
	}
}
