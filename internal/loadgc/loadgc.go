// Package loadgc makes the garbage collector run more often while a
// process loads its initial state from etcd.
//
// A scheduler's cold start reads every provider, consumer and instance
// (millions of keys at 100,000 hosts): the live heap grows to its final
// size while the etcd client's copies of every key and value become
// garbage as fast. With Go's default GOGC of 100 a collection starts only
// when the heap is twice the live heap, so the peak during the load is up
// to twice what the process keeps afterwards (a 1.3 GB live heap peaked
// at 1.9-2.2 GB). Collecting at 50 % growth while loading bounded that
// peak at about one and a half times.
//
// But the garbage a load makes between two collections does not grow
// with what it keeps: it is the pages in flight (a page being decoded and
// the next being fetched, per list; about 25 MB each at 50,000 keys), so
// an allowance in proportion to the live heap is mostly unused memory
// once that heap is large. After each collection during a load the
// target is set so the next one starts Headroom past the live heap
// (MaxPercent at most, MinPercent at least): a 1 GB heap collects at
// about 25 % growth, for some more GC work late in the load only;
// afterwards the default returns. An operator's GOGC (the
// environment variable) is always left alone.
//
// Since the lists read etcd's chunks without a protobuf message per key
// (informer.ListKVs) most of what a load allocates is what it keeps: at
// 100,000 hosts 1.1 GB allocated for a 700 MB live heap. The peak is then
// the live heap plus the little garbage made after the last collection,
// whatever the headroom, while every collection marks the whole live
// heap: 256 MB of headroom (was 128) took about 1 s of the child's CPU
// off that cold start (9.8 -> 8.8 s, three runs each) for a peak RSS 30-40
// MB higher (788-840 -> 833-875 MB).
//
// Headroom used to apply only once it was under 50 % of the live heap
// (a 512 MB one): below that the load collected at every 50 % of growth,
// 22 collections for that cold start, marking 2.8 GB of live heap in all
// while most of what they freed was never more than a few pages. With
// the headroom from the first collection on there are about 7, and the
// peak is still the live heap plus Headroom.
//
// Headroom is now 512 MB (was 256). Once the lists borrow etcd's chunks
// and the host manager keeps what syncs share (session 16), that cold
// start allocates about 1.0 GB for its 690 MB: a third of it garbage, and
// the heap can never exceed the live heap plus the garbage made since the
// last collection. At 256 MB the load still collected six times, marking
// 1.7-1.8 GB of live heap in all, the last collections (500-700 MB live,
// the costliest) while the consumers' list ends; at 512 MB it collects
// three times, the last at about 390 MB live, and ends without another:
// 1.7 GB -> 0.47 GB marked, for a peak RSS 15-25 MB higher (787-798 ->
// 812-814 MB, under the 1 GiB the issue allows).
package loadgc

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

const (
	// Percent is the GC target a load starts with, before the first
	// collection measures its live heap.
	Percent = 50
	// MaxPercent is the highest target Headroom sets. The runtime never
	// collects below 4 MB × GOGC/100 (its minimum heap), so a small heap's
	// target is capped where that minimum is a quarter of Headroom (128
	// MB at 3,200 %), not past it.
	MaxPercent = 100 * (Headroom / 4) / (4 << 20)
	// MinPercent is the lowest target Headroom sets.
	MinPercent = 10
	// Headroom is the heap growth allowed between collections while
	// loading: a few pages in flight for each of the lists a scheduler
	// runs at once, and the records they keep meanwhile.
	Headroom = 512 << 20
)

// Loads may overlap (several stacks in one process, in tests and in
// berth bench): the target is tightened by the first and restored by the
// last, to what it was before the first.
var (
	mu      sync.Mutex
	loading int
	prev    int
	// round counts the loads' rounds (first Tighten to last restore): a
	// collection's callback from an earlier round does nothing.
	round int
	// headroom is Headroom; tests lower it.
	headroom uint64 = Headroom
)

// Tighten sets the GC target to Percent, unless GOGC is set in the
// environment, and then after each collection to what Headroom allows;
// it returns the function that ends this load's part in it (safe to call
// more than once).
func Tighten() (restore func()) {
	if os.Getenv("GOGC") != "" {
		return func() {}
	}
	mu.Lock()
	if loading == 0 {
		prev = debug.SetGCPercent(Percent)
		round++
		armAfterGC(round)
	}
	loading++
	mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			mu.Lock()
			defer mu.Unlock()
			loading--
			if loading == 0 {
				debug.SetGCPercent(prev)
				round++
			}
		})
	}
}

// percentFor is the GC target that starts the next collection Headroom
// past a live heap of live bytes, within [MinPercent, MaxPercent].
func percentFor(live uint64) int {
	if live == 0 {
		return Percent
	}
	return int(min(max(headroom*100/live, MinPercent), MaxPercent))
}

// armAfterGC runs afterGC(r) once the next collection has finished (the
// runtime's cleanup of an object nothing references).
func armAfterGC(r int) {
	runtime.AddCleanup(new([64]byte), afterGC, r)
}

// afterGC sets the target from the live heap the last collection left,
// while round r of loads lasts, and waits for the next collection.
func afterGC(r int) {
	mu.Lock()
	defer mu.Unlock()
	if r != round || loading == 0 {
		return
	}
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(sample)
	if sample[0].Value.Kind() == metrics.KindUint64 {
		debug.SetGCPercent(percentFor(sample[0].Value.Uint64()))
	}
	armAfterGC(r)
}
