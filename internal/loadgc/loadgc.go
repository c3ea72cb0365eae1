// Package loadgc makes the garbage collector run more often while a
// process loads its initial state from etcd.
//
// A scheduler's cold start reads every provider, consumer and instance
// (millions of keys at 100,000 hosts): the live heap grows to its final
// size while the etcd client's copies of every key and value become
// garbage as fast. With Go's default GOGC of 100 a collection starts only
// when the heap is twice the live heap, so the peak during the load is up
// to twice what the process keeps afterwards (a 1.3 GB live heap peaked
// at 1.9-2.2 GB). Collecting at 50 % growth while loading bounds that
// peak at about one and a half times, for some more GC work during the
// load only; afterwards the default returns. An operator's GOGC (the
// environment variable) is always left alone.
package loadgc

import (
	"os"
	"runtime/debug"
	"sync"
)

// Percent is the GC target while loading.
const Percent = 50

// Loads may overlap (several stacks in one process, in tests and in
// berth bench): the target is tightened by the first and restored by the
// last, to what it was before the first.
var (
	mu      sync.Mutex
	loading int
	prev    int
)

// Tighten sets the GC target to Percent, unless GOGC is set in the
// environment, and returns the function that ends this load's part in it
// (safe to call more than once).
func Tighten() (restore func()) {
	if os.Getenv("GOGC") != "" {
		return func() {}
	}
	mu.Lock()
	if loading == 0 {
		prev = debug.SetGCPercent(Percent)
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
			}
		})
	}
}
