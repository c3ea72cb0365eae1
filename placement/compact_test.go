package placement

import (
	"reflect"
	"testing"

	"github.com/berth-project/berth/etcdschema"
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
	// In lent buffers that hold an older, larger answer: the same.
	stale := Candidate{Root: "stale", RootSlot: 99, RootSummary: LazySummary{p: &etcdschema.Provider{UUID: "stale"}},
		Parts: []CandidatePart{{Provider: "stale", Resources: map[string]int64{"X": 1}}}}
	buf := CompactBuffers{cands: make([]Candidate, len(got)+8), parts: make([]CandidatePart, len(got)+8)}
	for i := range buf.cands {
		buf.cands[i], buf.parts[i] = stale, stale.Parts[0]
	}
	for round := 0; round < 2; round++ {
		into, err := s.CompactCandidatesInto(testCtx(t), q, &buf)
		if err != nil {
			t.Fatal(err)
		}
		if len(into) != len(got) || len(got) > 0 && !reflect.DeepEqual(into, got) {
			t.Fatalf("compact into lent buffers (round %d):\n%+v\nfresh:\n%+v", round, into, got)
		}
		for i, c := range into {
			std, ok := buf.RootStandard(into, i)
			sum := want.ProviderSummaries[c.Root]
			if wantStd := [3]ResourceSummary{sum.Resources[VCPU], sum.Resources[MemoryMB], sum.Resources[DiskGB]}; !ok || std != wantStd {
				t.Errorf("compact %d: root's standard classes %+v (%v), rendered %+v", i, std, ok, wantStd)
			}
		}
		if _, ok := buf.RootStandard(got, 0); ok && len(got) > 0 {
			t.Errorf("standard classes for an answer not in the buffers")
		}
	}
	for i, c := range got {
		if ar := c.AllocationRequest(); !reflect.DeepEqual(ar.Allocations, want.AllocationRequests[i].Allocations) {
			t.Errorf("compact %d: allocations %v, rendered %v", i, ar.Allocations, want.AllocationRequests[i].Allocations)
		}
		if root, _ := want.RootOf(i); c.Root != root {
			t.Errorf("compact %d: root %q, rendered %q", i, c.Root, root)
		}
		if sum, ok := want.ProviderSummaries[c.Root]; ok {
			// The rendered one carries the index's memo; the lazy one,
			// the caller's own, none.
			sum.memo = nil
			if got := c.RootSummary.Get(); got == nil || !reflect.DeepEqual(*got, sum) {
				t.Errorf("compact %d: root summary %+v, rendered %+v", i, got, sum)
			}
		}
		for rp, pa := range want.AllocationRequests[i].Allocations {
			if a := c.Amounts(rp); !reflect.DeepEqual(a, pa.Resources) {
				t.Errorf("compact %d: amounts on %s %v, rendered %v", i, rp, a, pa.Resources)
			}
		}
	}
}

// RandomStart walks from a random provider: without a limit the answer is
// the same set; with a limit below what fits, windows differ between
// queries and every fitting provider turns up.
func TestCandidatesRandomStart(t *testing.T) {
	s, _ := newStarted(t)
	ctx := testCtx(t)
	names := []string{"a", "b", "c", "d", "e", "f"}
	for _, n := range names {
		mkProvider(t, s, n, "", compute(8, 8192, 100))
	}
	mkProvider(t, s, "tiny", "", compute(1, 512, 1))
	syncIdx(t, s)
	g := []RequestGroup{{Resources: map[string]int64{VCPU: 2, MemoryMB: 1024}}}
	all, err := s.AllocationCandidates(ctx, CandidateQuery{Groups: g})
	if err != nil {
		t.Fatal(err)
	}
	rnd, err := s.AllocationCandidates(ctx, CandidateQuery{Groups: g, RandomStart: true})
	if err != nil {
		t.Fatal(err)
	}
	if a, b := providersOf(all), providersOf(rnd); !equalStrings(a, b) || len(a) != len(names) {
		t.Fatalf("random start changed the answer: %v, want %v", b, a)
	}
	seen := map[string]bool{}
	for i := 0; i < 500 && len(seen) < len(names); i++ {
		got, err := s.CompactCandidates(ctx, CandidateQuery{Groups: g, Limit: 2, RandomStart: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 {
			t.Fatalf("limit 2: %d candidates", len(got))
		}
		for _, c := range got {
			seen[c.Parts[0].Provider] = true
		}
	}
	if len(seen) != len(names) {
		t.Fatalf("500 sampled windows named %d of %d fitting providers: %v", len(seen), len(names), seen)
	}
}
