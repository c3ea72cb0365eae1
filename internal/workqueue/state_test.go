package workqueue

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// offlineQueue is a queue that never reaches etcd: its handlers, workers'
// dequeue and transitions are driven by the test. Missteps are recorded,
// not panicked on, so that refused transitions can be asserted.
func offlineQueue(t *testing.T, c Config) (*Queue, *[]string) {
	t.Helper()
	if c.ItemPrefix == "" {
		c.ItemPrefix, c.LeasePrefix = "/q/items/", "/q/leases/"
		c.LeaseKey = func(id string) string { return "/q/leases/" + id }
	}
	c.Holder, c.Log = "offline", hclog.NewNullLogger()
	q := New(c)
	var missteps []string
	q.misstep = func(id, transition string, from phase) {
		missteps = append(missteps, fmt.Sprintf("%s %s from %s", transition, id, from))
	}
	return q, &missteps
}

// recordIn makes a known record for id and walks it to p through the
// transitions themselves, so that the channel, heap and deferred index
// hold what they would.
func recordIn(t *testing.T, q *Queue, missteps *[]string, id string, p phase) *record {
	t.Helper()
	r := q.recordOf(id)
	r.known = true
	r.item = Item{ID: id, Key: "/q/items/" + id, LeaseKey: "/q/leases/" + id}
	now := time.Now()
	switch p {
	case waiting:
		q.wait(r, now.Add(time.Hour), now)
	case queued:
		q.offer(r, false)
	case deferred:
		q.park(r)
	case inFlight:
		q.fly(r)
	case finished:
		q.fly(r)
		q.finish(r)
	}
	if r.phase != p || len(*missteps) > 0 {
		t.Fatalf("setting up %s: record in %s, missteps %q", p, r.phase, *missteps)
	}
	return r
}

var allPhases = []phase{pending, waiting, queued, deferred, inFlight, finished}

// TestTransitionsFromEachPhase asks every transition of a record in every
// phase. The allowed phases are written out again here, from the diagram
// in doc.go: a transition allowed moves the record to its phase; one
// refused is reported once and changes nothing, neither the record nor
// the channel, heap and index around it.
func TestTransitionsFromEachPhase(t *testing.T) {
	later := time.Now().Add(2 * time.Hour)
	for _, tr := range []struct {
		name string
		do   func(q *Queue, r *record)
		from []phase
		to   phase
	}{
		{"wait", func(q *Queue, r *record) { q.wait(r, later, time.Now()) }, []phase{pending, waiting, deferred}, waiting},
		{"offer", func(q *Queue, r *record) { q.offer(r, false) }, []phase{pending, waiting, deferred}, queued},
		{"take", (*Queue).take, []phase{queued}, pending},
		{"park", (*Queue).park, []phase{pending}, deferred},
		{"retract", (*Queue).retract, []phase{waiting, queued, deferred}, pending},
		{"fly", (*Queue).fly, []phase{pending, waiting, queued, deferred}, inFlight},
		{"land", (*Queue).land, []phase{inFlight}, pending},
		{"finish", (*Queue).finish, []phase{pending, waiting, queued, deferred, inFlight}, finished},
		{"forget", (*Queue).forget, []phase{finished}, pending},
	} {
		for _, from := range allPhases {
			allowed := slices.Contains(tr.from, from)
			t.Run(fmt.Sprintf("%s from %s", tr.name, from), func(t *testing.T) {
				q, missteps := offlineQueue(t, Config{})
				r := recordIn(t, q, missteps, "x", from)
				work, heapLen, parked, due := len(q.work), q.delayed.Len(), len(q.parked), r.due
				tr.do(q, r)
				if !allowed {
					want := []string{fmt.Sprintf("%s x from %s", tr.name, from)}
					if !slices.Equal(*missteps, want) {
						t.Fatalf("missteps %q, want %q", *missteps, want)
					}
					if r.phase != from || len(q.work) != work || q.delayed.Len() != heapLen || len(q.parked) != parked || !r.due.Equal(due) {
						t.Fatalf("refused %s changed the record or its surroundings: phase %s, work %d->%d, heap %d->%d, parked %d->%d",
							tr.name, r.phase, work, len(q.work), heapLen, q.delayed.Len(), parked, len(q.parked))
					}
					return
				}
				if len(*missteps) > 0 {
					t.Fatalf("allowed %s reported missteps %q", tr.name, *missteps)
				}
				if r.phase != tr.to {
					t.Fatalf("%s from %s: phase %s, want %s", tr.name, from, r.phase, tr.to)
				}
				// What belongs to a phase follows it.
				if _, in := q.parked[r.id]; in != (r.phase == deferred) {
					t.Errorf("in %s, deferred index holds it: %v", r.phase, in)
				}
				if (r.phase == waiting) == r.due.IsZero() || (r.phase == waiting) == r.since.IsZero() {
					t.Errorf("in %s, due %v since %v", r.phase, r.due, r.since)
				}
				if tr.name == "offer" && len(q.work) != work+1 {
					t.Errorf("offer put %d ids on the work channel, want 1", len(q.work)-work)
				}
				if tr.name == "wait" && q.delayed.Len() != heapLen+1 {
					t.Errorf("wait pushed %d heap entries, want 1", q.delayed.Len()-heapLen)
				}
			})
		}
	}
}

// TestFinishOfAGoneItemLeavesNothing: the item watch showed the deletion
// before Done (our final transaction's event raced Done): there is
// nothing to guard, the record goes back to pending and is dropped.
func TestFinishOfAGoneItemLeavesNothing(t *testing.T) {
	q, missteps := offlineQueue(t, Config{})
	r := recordIn(t, q, missteps, "x", inFlight)
	r.known = false
	q.Done(r.item)
	if r.phase != pending || len(*missteps) > 0 {
		t.Fatalf("phase %s, missteps %q", r.phase, *missteps)
	}
	if len(q.recs) != 0 {
		t.Fatalf("%d records left", len(q.recs))
	}
}

// TestWaitKeepsItsAgeWhenRetimed: a waiting item set a new time keeps the
// age it has waited (stealing counts it), one that waits afresh starts
// over.
func TestWaitKeepsItsAgeWhenRetimed(t *testing.T) {
	q, missteps := offlineQueue(t, Config{})
	r := recordIn(t, q, missteps, "x", waiting)
	since := r.since
	q.wait(r, r.due.Add(time.Minute), since.Add(time.Second))
	if !r.since.Equal(since) {
		t.Fatalf("re-timed wait moved since from %v to %v", since, r.since)
	}
	q.retract(r)
	q.wait(r, time.Now().Add(time.Hour), since.Add(time.Minute))
	if !r.since.Equal(since.Add(time.Minute)) {
		t.Fatalf("a new wait kept the old age %v", r.since)
	}
}

// TestMisstepPanicsInTests: the default report of a refused transition
// panics in a test binary, so a faulty path in any package's tests fails
// where it goes wrong.
func TestMisstepPanicsInTests(t *testing.T) {
	q, _ := offlineQueue(t, Config{})
	q.misstep = q.logMisstep
	r := q.recordOf("x")
	defer func() {
		msg, _ := recover().(string)
		if !strings.Contains(msg, "take of item x from phase pending") {
			t.Fatalf("recovered %q, want the refused take", msg)
		}
	}()
	q.take(r)
	t.Fatal("a take from pending did not panic")
}
