package workqueue

import "time"

// delayed is one entry of the delay heap: a waiting record's id and the
// due time it was pushed with. The record may have moved on since (offered,
// re-timed, gone); the entry is then stale and skipped (offerDueLocked).
type delayed struct {
	id  string
	due time.Time
}

// delayHeap orders waiting ids by due time.
type delayHeap []delayed

func (h delayHeap) Len() int           { return len(h) }
func (h delayHeap) Less(i, j int) bool { return h[i].due.Before(h[j].due) }
func (h delayHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *delayHeap) Push(x any)        { *h = append(*h, x.(delayed)) }
func (h *delayHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
