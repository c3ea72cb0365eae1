package bench

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berth-project/berth/internal/testwait"
)

// TestTaskPoolReusesTheLastIdleWorker: jobs run one after another go to
// one worker, not round the pool; jobs waiting at once get a worker
// each, never more than max, and a submit with every worker busy waits
// for one (or for its context).
func TestTaskPoolReusesTheLastIdleWorker(t *testing.T) {
	var wg sync.WaitGroup
	var running, most atomic.Int64
	release := make(chan struct{})
	var blocking atomic.Bool
	ran := make(chan struct{}, 100)
	p := newTaskPool(context.Background(), 3, func(periodicJob) {
		n := running.Add(1)
		for cur := most.Load(); n > cur && !most.CompareAndSwap(cur, n); cur = most.Load() {
		}
		if blocking.Load() {
			<-release
		}
		running.Add(-1)
		ran <- struct{}{}
	}, &wg)
	ctx := context.Background()

	// One at a time: one worker does them all.
	for i := 0; i < 10; i++ {
		if !p.submit(ctx, periodicJob{}) {
			t.Fatal("submit refused with an idle pool")
		}
		<-ran
		testwait.Until(t, "the worker idle again", func() bool {
			p.mu.Lock()
			defer p.mu.Unlock()
			return len(p.idle) == p.started
		})
	}
	if p.started != 1 {
		t.Fatalf("%d workers started for jobs run one after another, want 1", p.started)
	}

	// Three at once: three workers, the pool's max.
	blocking.Store(true)
	for i := 0; i < 3; i++ {
		if !p.submit(ctx, periodicJob{}) {
			t.Fatal("submit refused below max")
		}
	}
	testwait.Until(t, "three jobs running at once", func() bool { return running.Load() == 3 })
	// A fourth waits for a worker: here until its context ends.
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if p.submit(short, periodicJob{}) {
		t.Fatal("submit with every worker busy ran the job anyway")
	}
	// Or until a worker is freed.
	done := make(chan bool)
	go func() { done <- p.submit(ctx, periodicJob{}) }()
	release <- struct{}{}
	if !<-done {
		t.Fatal("submit refused once a worker was freed")
	}
	close(release)
	for i := 0; i < 4; i++ {
		<-ran
	}
	if p.started != 3 || most.Load() != 3 {
		t.Fatalf("%d workers started, %d jobs at once; want 3 and 3 (the max)", p.started, most.Load())
	}
	p.close()
	wg.Wait() // every worker ended
}
