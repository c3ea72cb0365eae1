package workqueue

import (
	"container/heap"
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/informer"
)

// The timer loop is woken only for an id due before the heap's head
// (considerLocked): an id ranked second for us (one grace) that arrives
// after one ranked third (two graces) must still be offered after one
// grace, not with the later one. Three holders are
// registered and none has leased anything, so both are ours once due.
// The queue's handlers are fed directly, as the follow benchmark does.
func TestQueueEarlierDueWakesTheTimer(t *testing.T) {
	for _, tc := range []struct {
		desc        string
		first, then int // ranks of the ids, in arrival order
	}{
		{"an earlier due after a later one", 2, 1},
		{"a later due after an earlier one", 1, 2},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			const grace = 1500 * time.Millisecond
			keys := etcdschema.New("/berth")
			q := New(Config{ItemPrefix: keys.BuildRequests(), LeasePrefix: keys.BuildRequestLeases(),
				LeaseKey: keys.BuildRequestLease, HolderPrefix: keys.BuildRequestHolders(), HolderKey: keys.BuildRequestHolder,
				Holder: "berth-1", Grace: grace, IdleAfter: grace, Log: hclog.NewNullLogger()})
			holdFirstOfThree(q, keys)
			// An id of each rank wanted.
			ids := map[int]string{}
			for n := 0; len(ids) < 2; n++ {
				id := fmt.Sprintf("6a0c9b1e-0000-4000-8000-%012d", n)
				q.mu.Lock()
				r := q.rankLocked(id)
				q.mu.Unlock()
				if (r == tc.first || r == tc.then) && ids[r] == "" {
					ids[r] = id
				}
			}
			// The first id arrives before the loop runs; its wake is
			// drained, and a stale entry heads the heap: once the loop's
			// first pass has dropped it, that pass has set the timer for
			// the first id, and only a wake can make it look again.
			start := time.Now()
			itemHandler{q}.Apply([]informer.Event{{Key: keys.BuildRequest(ids[tc.first]), Value: []byte("{}"), Revision: 1}})
			<-q.wake
			q.mu.Lock()
			heap.Push(&q.delayed, delayed{id: "stale", due: start.Add(-time.Hour)})
			q.mu.Unlock()
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { q.offerWhenDue(ctx); close(done) }()
			defer func() { cancel(); <-done }()
			for passed := false; !passed; {
				if time.Since(start) > grace/2 {
					t.Fatal("the loop's first pass did not run")
				}
				q.mu.Lock()
				passed = q.delayed.Len() == 1
				q.mu.Unlock()
				if !passed {
					time.Sleep(time.Millisecond) // polling the loop's first pass
				}
			}
			itemHandler{q}.Apply([]informer.Event{{Key: keys.BuildRequest(ids[tc.then]), Value: []byte("{}"), Revision: 2}})
			deadline := time.After(30 * time.Second)
			for _, r := range []int{1, 2} {
				select {
				case got := <-q.work:
					at := time.Since(start)
					if got != ids[r] {
						t.Fatalf("offered %s first, want the rank-%d id %s", got, r, ids[r])
					}
					if at < time.Duration(r)*grace {
						t.Fatalf("rank-%d id offered after %v, before its %v", r, at, time.Duration(r)*grace)
					}
					if r == 1 && at >= 2*grace {
						// Woken for it, the loop offers it a grace
						// before the rank-2 id is due (a grace of slack
						// for a loaded machine); not woken, it waits
						// for the rank-2 id's time.
						t.Fatalf("rank-1 id offered after %v, not before the rank-2 id's %v", at, 2*grace)
					}
				case <-deadline:
					t.Fatalf("the rank-%d id was never offered", r)
				}
			}
		})
	}
}

// holdFirstOfThree gives q three running holders of the build request
// queue, itself the first, so that items rank it first, second or third;
// it returns their lease IDs, q's first.
func holdFirstOfThree(q *Queue, keys etcdschema.Keys) []int64 {
	leaseIDs := []int64{7587891349216435205, 7587891349216435311, 7587891349216435467}
	var holders []informer.Event
	for _, id := range leaseIDs {
		holders = append(holders, informer.Event{Key: keys.BuildRequestHolder(strconv.FormatInt(id, 16))})
	}
	q.self = strconv.FormatInt(leaseIDs[0], 16)
	holderHandler{q}.Reset(holders, 1)
	return leaseIDs
}
