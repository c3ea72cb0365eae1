package placement

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/testwait"
)

// smallTree makes the tree issue 18 found: a root and two children, each
// with 8 VCPU, so every granular VCPU group has three choices and n
// groups 3^n combinations.
func smallTree(t *testing.T, s *Service) {
	t.Helper()
	mkProvider(t, s, "root", "", map[string]etcdschema.Inventory{VCPU: inv(8)})
	mkProvider(t, s, "numa0", "root", map[string]etcdschema.Inventory{VCPU: inv(8)})
	mkProvider(t, s, "numa1", "root", map[string]etcdschema.Inventory{VCPU: inv(8)})
	syncIdx(t, s)
}

// manyGroups is n granular groups of one VCPU each.
func manyGroups(n, limit int) CandidateQuery {
	q := CandidateQuery{GroupPolicy: "none", Limit: limit}
	for i := 1; i <= n; i++ {
		q.Groups = append(q.Groups, RequestGroup{Suffix: fmt.Sprint(i), Resources: map[string]int64{VCPU: 1}})
	}
	return q
}

func TestCandidateSearchBounds(t *testing.T) {
	s, _ := newStarted(t)
	smallTree(t, s)
	// No deadline: the budget must end the search, not the test's
	// deadline (a search under -race is several times slower).
	ctx := context.Background()
	for _, tc := range []struct {
		desc      string
		q         CandidateQuery
		workLimit int64
		wantErr   string // "": an answer of wantN
		wantN     int
	}{
		{desc: "few groups fit the budget", q: manyGroups(3, 0), wantN: 27},
		{desc: "the issue's 14 groups without limit exceed the default budget", q: manyGroups(14, 0),
			wantErr: fmt.Sprintf("The allocation candidate search for 14 request group(s) stopped after %d combinations of providers", DefaultCandidateWorkLimit)},
		{desc: "a small budget names itself", q: manyGroups(5, 0), workLimit: 100,
			wantErr: "placement candidate_work_limit = 100"},
		{desc: "a limit already met returns before the budget runs out", q: manyGroups(14, 5), wantN: 5},
		{desc: "more groups than Placement answers in reason are refused up front", q: manyGroups(MaxRequestGroups+1, 1),
			wantErr: fmt.Sprintf("The request has %d request groups; Placement answers at most %d", MaxRequestGroups+1, MaxRequestGroups)},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			s.SetCandidateWorkLimit(tc.workLimit)
			got, err := s.AllocationCandidates(ctx, tc.q)
			if tc.wantErr != "" {
				if !errors.Is(err, ErrSearchTooLarge) || !strings.Contains(Detail(err), tc.wantErr) {
					t.Fatalf("got %v, want ErrSearchTooLarge saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || len(got.AllocationRequests) != tc.wantN {
				t.Fatalf("got %v and %d answers, want %d", err, len(got.AllocationRequests), tc.wantN)
			}
		})
	}
}

// TestCandidateSearchStopsWithItsCaller: a search with no work limit to
// speak of stops when its caller's context ends, and the steps it counts
// stop with it.
func TestCandidateSearchStopsWithItsCaller(t *testing.T) {
	s, _ := newStarted(t)
	smallTree(t, s)
	s.SetCandidateWorkLimit(math.MaxInt64)
	for _, tc := range []struct {
		desc    string
		ctx     func() (context.Context, context.CancelFunc)
		cancel  bool // the caller goes; else the deadline passes
		wantErr error
	}{
		{"cancelled", func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) }, true, context.Canceled},
		{"past its deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 500*time.Millisecond)
		}, false, ErrSearchTooLarge},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			ctx, cancel := tc.ctx()
			defer cancel()
			done := make(chan error, 1)
			start := s.CandidateStats().Steps
			go func() {
				_, err := s.AllocationCandidates(ctx, manyGroups(30, 0)) // 3^30: forever
				done <- err
			}()
			atCancel := int64(0)
			if tc.cancel {
				testwait.Until(t, "the search to be under way", func() bool { return s.CandidateStats().Steps > start+10_000 })
				atCancel = s.CandidateStats().Steps
				cancel()
			}
			var err error
			testwait.Until(t, "the search to return", func() bool {
				select {
				case err = <-done:
					return true
				default:
					return false
				}
			})
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("got %v, want %v", err, tc.wantErr)
			}
			// A cancelled search stops within a check or two of its
			// cancellation (the count is brought up to date at each).
			if after := s.CandidateStats().Steps - atCancel; tc.cancel && after > 3*checkEvery {
				t.Fatalf("the search took %d steps after its caller went", after)
			}
			if s.CandidateStats().Steps == start {
				t.Fatalf("the search took no step")
			}
		})
	}
}

// TestCandidateViewMatchesIndex runs multi-group queries over nested
// trees, sharing providers and aggregates twice: with every merge under
// the index's lock, and with every merge on a view. The answers must be
// the same, byte for byte.
func TestCandidateViewMatchesIndex(t *testing.T) {
	s, _ := newStarted(t)
	ctx := testCtx(t)
	for r := 0; r < 4; r++ {
		root := fmt.Sprintf("cn%d", r)
		mkProvider(t, s, root, "", map[string]etcdschema.Inventory{VCPU: inv(16), MemoryMB: inv(4096)})
		for c := 0; c < r%3+1; c++ {
			mkProvider(t, s, fmt.Sprintf("%s-numa%d", root, c), root,
				map[string]etcdschema.Inventory{"CUSTOM_PCPU": inv(4), "CUSTOM_VF": inv(int64(2 + c))}, "HW_NUMA_ROOT")
		}
		if err := s.UpdateProvider(ctx, root, func(p *etcdschema.Provider) error {
			p.Aggregates = []string{fmt.Sprintf("agg%d", r%2)}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	mkProvider(t, s, "ss", "", map[string]etcdschema.Inventory{DiskGB: inv(100)}, TraitSharesViaAggregate)
	if err := s.UpdateProvider(ctx, "ss", func(p *etcdschema.Provider) error {
		p.Aggregates = []string{"agg0"}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	syncIdx(t, s)
	pcpu := func(sfx string, n int64) RequestGroup {
		return RequestGroup{Suffix: sfx, Resources: map[string]int64{"CUSTOM_PCPU": n}}
	}
	vf := func(sfx string) RequestGroup {
		return RequestGroup{Suffix: sfx, Resources: map[string]int64{"CUSTOM_VF": 1}}
	}
	compute := RequestGroup{Resources: map[string]int64{VCPU: 2, MemoryMB: 512}}
	queries := []CandidateQuery{
		{GroupPolicy: "none", Groups: []RequestGroup{compute, pcpu("1", 2), pcpu("2", 2), vf("3")}},
		{GroupPolicy: "isolate", Groups: []RequestGroup{compute, pcpu("1", 1), pcpu("2", 1), vf("3")}},
		{GroupPolicy: "none", Limit: 3, Groups: []RequestGroup{compute, pcpu("1", 3), vf("2")}},
		{GroupPolicy: "none", Groups: []RequestGroup{{Resources: map[string]int64{VCPU: 1, DiskGB: 10}}, vf("1"), vf("2")}},
		{GroupPolicy: "none", SameSubtree: [][]string{{"1", "2"}}, Groups: []RequestGroup{compute, pcpu("1", 1), vf("2")}},
		{GroupPolicy: "none", NotNestedAware: true, Groups: []RequestGroup{{Resources: map[string]int64{"CUSTOM_PCPU": 1}}, vf("1")}},
		{GroupPolicy: "none", Groups: []RequestGroup{{Resources: map[string]int64{VCPU: 1, "CUSTOM_PCPU": 1, "CUSTOM_VF": 1}}, vf("1")}},
	}
	for i, q := range queries {
		s.SetSearchViewAbove(math.MaxInt64)
		locked, err := s.AllocationCandidates(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		views := s.CandidateStats().Views
		s.SetSearchViewAbove(0)
		onView, err := s.AllocationCandidates(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if s.CandidateStats().Views != views+1 {
			t.Fatalf("query %d: the search did not move to a view", i)
		}
		if len(locked.AllocationRequests) == 0 {
			t.Fatalf("query %d: no answer to compare", i)
		}
		if !sameCandidates(locked, onView) {
			t.Fatalf("query %d: the view answers\n%+v\nthe index\n%+v", i, onView, locked)
		}
		lc, _ := s.CompactCandidates(ctx, q)
		s.SetSearchViewAbove(math.MaxInt64)
		vc, _ := s.CompactCandidates(ctx, q)
		if !reflect.DeepEqual(lc, vc) {
			t.Fatalf("query %d: compact answers differ", i)
		}
	}
}

// sameCandidates compares two answers as their readers see them: the
// summaries' places are noted in the order the search met them, so they
// are compared as SummaryOrder sorts them.
func sameCandidates(a, b *Candidates) bool {
	return reflect.DeepEqual(a.AllocationRequests, b.AllocationRequests) &&
		reflect.DeepEqual(a.ProviderSummaries, b.ProviderSummaries) &&
		reflect.DeepEqual(a.roots, b.roots) &&
		reflect.DeepEqual(a.SummaryOrder(), b.SummaryOrder())
}
