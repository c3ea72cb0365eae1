package gctune

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// The bound: after every collection the soft memory limit is set so that
// the next collection starts at the latest when the heap is
// max(live, Headroom) past the live heap the last one left, plus what the
// runtime holds besides heap objects (stacks, metadata, free pages it has
// not returned). The GC percent's goal still applies when it is lower:
// the runtime collects at whichever goal comes first.
//
// The callback is a cleanup of an object nothing references, as in
// package loadgc: the runtime runs it after the collection that found the
// object dead, with no goroutine of our own waiting.

var (
	boundMu sync.Mutex
	// boundRound is bumped by every start and stop: a callback armed in
	// an earlier round does nothing and arms nothing.
	boundRound int
	// headroom is Headroom; tests lower it.
	headroom uint64 = Headroom
)

// startBound starts the bound, under ceiling (a configured limit; 0 for
// none), and returns its stop.
func startBound(ceiling int64) (stop func()) {
	boundMu.Lock()
	boundRound++
	r := boundRound
	boundMu.Unlock()
	armBound(r, ceiling)
	var once sync.Once
	return func() {
		once.Do(func() {
			boundMu.Lock()
			if boundRound == r {
				boundRound++
			}
			boundMu.Unlock()
		})
	}
}

func armBound(r int, ceiling int64) {
	runtime.AddCleanup(new([64]byte), func(r int) { afterGC(r, ceiling) }, r)
}

// boundSamples are the metrics afterGC reads.
var boundSamples = []string{
	"/gc/heap/live:bytes",
	"/memory/classes/total:bytes",
	"/memory/classes/heap/released:bytes",
	"/memory/classes/heap/objects:bytes",
	"/memory/classes/heap/unused:bytes",
	"/memory/classes/heap/free:bytes",
}

// afterGC moves the limit from the collection that just ended.
func afterGC(r int, ceiling int64) {
	boundMu.Lock()
	defer boundMu.Unlock()
	if r != boundRound {
		return
	}
	s := make([]metrics.Sample, len(boundSamples))
	for i, name := range boundSamples {
		s[i].Name = name
	}
	metrics.Read(s)
	v := make([]uint64, len(s))
	for i := range s {
		if s[i].Value.Kind() != metrics.KindUint64 {
			armBound(r, ceiling)
			return
		}
		v[i] = s[i].Value.Uint64()
	}
	live, total, released, objects, unused, free := v[0], v[1], v[2], v[3], v[4], v[5]
	limit := int64(limitFor(live, total-released-objects-unused-free))
	if ceiling > 0 && ceiling < limit {
		limit = ceiling
	}
	debug.SetMemoryLimit(limit)
	armBound(r, ceiling)
}

// limitFor is the memory limit that lets the heap grow max(live,
// headroom) past a live heap of live bytes, with other bytes of the
// runtime's memory besides the heap.
func limitFor(live, other uint64) uint64 {
	return other + live + max(live, headroom)
}
