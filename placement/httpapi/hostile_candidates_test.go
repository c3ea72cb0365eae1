package httpapi

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strings"
	gosync "sync"
	"testing"
	"time"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/testwait"
	"github.com/berth-project/berth/placement"
)

// Hostile clients of GET /allocation_candidates (issue 18): many request
// groups over a small nested tree, whose search grows as 3^groups.

// hostileTree is a root and two children with 8 VCPU each, and four
// compute hosts for claims to land on.
func hostileTree(t *testing.T, s *placement.Service) []string {
	t.Helper()
	mkProvider(t, s, "10000000-0000-0000-0000-000000000000", "", map[string]etcdschema.Inventory{placement.VCPU: inv(8)})
	for i := 1; i <= 2; i++ {
		mkProvider(t, s, fmt.Sprintf("10000000-0000-0000-0000-00000000000%d", i), "10000000-0000-0000-0000-000000000000",
			map[string]etcdschema.Inventory{placement.VCPU: inv(8)})
	}
	var hosts []string
	for i := 0; i < 4; i++ {
		h := fmt.Sprintf("20000000-0000-0000-0000-00000000000%d", i)
		mkProvider(t, s, h, "", map[string]etcdschema.Inventory{placement.MemoryMB: inv(1 << 20)})
		hosts = append(hosts, h)
	}
	return hosts
}

// manyGroupsPath asks for n granular groups of one VCPU each.
func manyGroupsPath(n int) string {
	var b strings.Builder
	b.WriteString("/allocation_candidates?group_policy=none")
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "&resources%d=VCPU:1", i)
	}
	return b.String()
}

// claimLoop claims and frees on hosts until stop closes, and reports the
// latency of each claim and free (a free's index update waits for the
// index's write lock like a claim's).
func claimLoop(ctx context.Context, t *testing.T, s *placement.Service, hosts []string, stop <-chan struct{}) func() []time.Duration {
	var mu gosync.Mutex
	var lat []time.Duration
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			c := fmt.Sprintf("30000000-0000-0000-0000-%012d", i)
			start := time.Now()
			err := s.PutAllocations(ctx, c, placement.AllocationWrite{ProjectID: "p", UserID: "u",
				Allocations: map[string]placement.ProviderAllocation{hosts[i%len(hosts)]: {Resources: map[string]int64{placement.MemoryMB: 64}}}})
			if err != nil {
				t.Errorf("claim %s: %v", c, err)
				return
			}
			if err := s.DeleteAllocations(ctx, c); err != nil {
				t.Errorf("free %s: %v", c, err)
				return
			}
			mu.Lock()
			lat = append(lat, time.Since(start))
			mu.Unlock()
		}
	}()
	return func() []time.Duration {
		<-done
		mu.Lock()
		defer mu.Unlock()
		return lat
	}
}

func maxDuration(ds []time.Duration) time.Duration {
	var m time.Duration
	for _, d := range ds {
		m = max(m, d)
	}
	return m
}

// TestHostileManyGroupsWhileClaiming sends the many-group request
// while claims run: the claims keep completing at their usual latency
// (the search's merge runs off the index's lock), and the request ends
// in bounded time with a 400 that says why. Before the fix the search
// walked all 3^20 combinations under the read lock: the request did not
// end, and claims waited behind it.
func TestHostileManyGroupsWhileClaiming(t *testing.T) {
	a := newAPI(t)
	hosts := hostileTree(t, a.s)
	ctx := testCtx(t)

	stop := make(chan struct{})
	before := claimLoop(ctx, t, a.s, hosts, stop)
	testwait.Until(t, "a first claim", func() bool { return a.s.ClaimStats().Writes >= 20 })
	close(stop)
	quiet := before()

	stop = make(chan struct{})
	during := claimLoop(ctx, t, a.s, hosts, stop)
	start := time.Now()
	r := a.call("GET", manyGroupsPath(20), "1.25", nil)
	took := time.Since(start)
	close(stop)
	busy := during()

	if r.status != 400 || !strings.Contains(r.errDetail(), "candidate_work_limit") || !strings.Contains(r.errDetail(), "20 request group(s)") {
		t.Fatalf("status %d, detail %q: want a 400 naming the work limit", r.status, r.errDetail())
	}
	// The default budget is a few seconds of a core (12 s under -race on a
	// busy machine); without it the 3^20 combinations take hours.
	if took > time.Minute {
		t.Errorf("the request took %s", took)
	}
	if len(busy) < 5 {
		t.Fatalf("only %d claims completed during the %s search", len(busy), took)
	}
	st := a.s.CandidateStats()
	t.Logf("search: %s, %d steps, read lock held at most %s; claims before: %d, max %s; during: %d, max %s",
		took, st.Steps, st.LockHeldMax, len(quiet), maxDuration(quiet), len(busy), maxDuration(busy))
	// A claim that waited for the search would take about as long as it.
	if maxDuration(busy) > took/2 {
		t.Errorf("a claim took %s during the %s search: claims waited for it", maxDuration(busy), took)
	}
	if st.LockHeldMax > 100*time.Millisecond {
		t.Errorf("the search held the index's read lock for %s", st.LockHeldMax)
	}
	if st.Views == 0 {
		t.Errorf("the search's merge did not move to a view")
	}
}

// TestHostileClientGoes: a client that gives up on a search with no
// work limit to speak of stops it; the steps it counts stop growing.
func TestHostileClientGoes(t *testing.T) {
	a := newAPI(t)
	hostileTree(t, a.s)
	a.s.SetCandidateWorkLimit(math.MaxInt64)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", a.url+manyGroupsPath(30), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Auth-Token", "admin")
	req.Header.Set("OpenStack-API-Version", "placement 1.25")
	go func() {
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			t.Errorf("the 3^30 search answered %d", resp.StatusCode)
		}
	}()
	testwait.Until(t, "the search to be under way", func() bool { return a.s.CandidateStats().Steps > 50_000 })
	cancel()
	atCancel := a.s.CandidateStats().Steps
	// The count stands still once the search has stopped: two looks a
	// poll apart, the second at least 200ms after the count last moved.
	last, lastChange := atCancel, time.Now()
	testwait.Poll(t, 10*time.Second, "the search to stop", func() (bool, string) {
		cur := a.s.CandidateStats().Steps
		if cur != last {
			last, lastChange = cur, time.Now()
		}
		return time.Since(lastChange) > 200*time.Millisecond, fmt.Sprintf("%d steps, %d since the client went", cur, cur-atCancel)
	})
	t.Logf("the search stopped %d steps after its client went", last-atCancel)
}
