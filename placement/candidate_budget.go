package placement

import (
	"context"
	"errors"
	"sync/atomic"
	"time"
)

// A candidate search is bounded by the work it does, not only by the
// answers it keeps. Its combinatorial parts, the product of an
// unsuffixed group's per-class choices in one tree (multiProvider) and
// the product of the groups' requests per anchor (merge), can grow as
// the number of providers raised to the number of classes or groups:
// fourteen groups over a three-provider tree are 3^14 = 4.8 million
// combinations, and Placement itself builds every one before it applies
// limit. Each combination tried is a step; a search that needs more
// steps than its budget ends with ErrSearchTooLarge (a 400 that says
// why), and one whose caller has gone, or whose deadline has passed,
// stops at the next check. The linear scans (one look at each provider
// per group) are not counted: they are bounded by the index's size.

// DefaultCandidateWorkLimit is the steps a candidate search may take
// unless configured (placement { candidate_work_limit }): about two
// seconds of one core at fourteen groups (a merge step costs a few
// microseconds, more with more groups), well within the request
// deadline, and more than requests Nova makes need: four groups over
// ten thousand NUMA trees, every candidate without limit, take 80,000;
// with Nova's limit (max_placement_results) the merge stops at limit.
const DefaultCandidateWorkLimit = 200_000

// MaxRequestGroups is the most request groups one candidate search
// accepts. The work grows as a product over the groups; Nova asks for one
// group per flavor, port with a resource request, and device, a handful
// per server.
const MaxRequestGroups = 32

// ErrSearchTooLarge: the candidate search would take more work than it
// may (400 placement.undefined_code, the message says why).
var ErrSearchTooLarge = errors.New("placement: allocation candidate search too large")

// checkEvery is how many steps pass between looks at the request's
// context: a look costs a lock, a step well under a microsecond.
const checkEvery = 1024

// searchBudget counts one search's steps against its limit and watches
// its caller's context.
type searchBudget struct {
	ctx    context.Context
	limit  int64 // <= 0: unbounded
	steps  int64
	groups int
	// total is the service's running count of steps (CandidateStats),
	// brought up to date at every check, so that a search that stopped
	// shows as a counter that stopped.
	total   *atomic.Int64
	counted int64
	err     error
}

func newSearchBudget(ctx context.Context, limit int64, groups int, total *atomic.Int64) *searchBudget {
	return &searchBudget{ctx: ctx, limit: limit, groups: groups, total: total}
}

// step counts one combination; false means stop (b.err says why).
func (b *searchBudget) step() bool {
	if b.err != nil {
		return false
	}
	b.steps++
	if b.limit > 0 && b.steps > b.limit {
		b.err = detailf(ErrSearchTooLarge, "The allocation candidate search for %d request group(s) stopped after %d combinations of providers, the most one request may try (placement candidate_work_limit = %d). "+
			"Ask for fewer request groups, narrow them (in_tree, member_of, required traits), or ask for fewer candidates with limit.", b.groups, b.limit, b.limit)
		return false
	}
	if b.steps%checkEvery == 0 {
		b.flush()
		if err := b.ctx.Err(); err != nil {
			b.stopped(err)
			return false
		}
	}
	return true
}

// stopped records why the caller's context ended the search.
func (b *searchBudget) stopped(err error) {
	if errors.Is(err, context.DeadlineExceeded) {
		b.err = detailf(ErrSearchTooLarge, "The allocation candidate search for %d request group(s) ran past the request deadline after %d combinations of providers. "+
			"Ask for fewer request groups, narrow them (in_tree, member_of, required traits), or ask for fewer candidates with limit.", b.groups, b.steps)
		return
	}
	b.err = err // the caller has gone: no one reads the answer
}

// check looks at the context between phases.
func (b *searchBudget) check() bool {
	if b.err != nil {
		return false
	}
	if err := b.ctx.Err(); err != nil {
		b.stopped(err)
		return false
	}
	return true
}

// flush adds the steps not yet counted to the service's total.
func (b *searchBudget) flush() {
	if b.total != nil {
		b.total.Add(b.steps - b.counted)
		b.counted = b.steps
	}
}

// SetCandidateWorkLimit sets the steps one candidate search may take
// (placement { candidate_work_limit }); n <= 0 restores the default.
func (s *Service) SetCandidateWorkLimit(n int64) {
	if n <= 0 {
		n = DefaultCandidateWorkLimit
	}
	s.candidateWorkLimit.Store(n)
}

// CandidateStats counts a service's candidate searches since New.
type CandidateStats struct {
	// Steps is the combinations tried, brought up to date every few
	// thousand while a search runs: a search that stopped (its client
	// gone, its budget spent) shows as a count that stopped.
	Steps int64
	// LockHeldMax is the longest one search held the index's read lock.
	LockHeldMax time.Duration
	// Views is how many searches moved off the lock onto a view.
	Views int64
}

// CandidateStats returns the service's candidate search counters.
func (s *Service) CandidateStats() CandidateStats {
	return CandidateStats{Steps: s.candidateSteps.Load(), LockHeldMax: time.Duration(s.searchLockMax.Load()), Views: s.searchViews.Load()}
}

// noteSearchLock records how long a search held the index's read lock.
func (s *Service) noteSearchLock(d time.Duration) {
	for {
		cur := s.searchLockMax.Load()
		if int64(d) <= cur || s.searchLockMax.CompareAndSwap(cur, int64(d)) {
			return
		}
	}
}
