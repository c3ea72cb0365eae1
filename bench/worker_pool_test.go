package bench

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berth-project/berth/internal/testwait"
)

// TestBoundedPoolReusesTheLastIdleWorker: jobs run one after another go to
// one worker, not round the pool; jobs waiting at once get a worker
// each, never more than max, and a submit with every worker busy waits
// for one (or for its context).
func TestBoundedPoolReusesTheLastIdleWorker(t *testing.T) {
	var wg sync.WaitGroup
	var running, most atomic.Int64
	release := make(chan struct{})
	var blocking atomic.Bool
	ran := make(chan struct{}, 100)
	p := newWorkerPool(context.Background(), "agent fleet background", 3, func(periodicJob) {
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

// newCastPool is the fleet's cast pool (NewFleet's): unbounded, each
// job a func run as it is.
func newCastPool(wg *sync.WaitGroup) *workerPool[func()] {
	return newWorkerPool(context.Background(), "", 0, func(job func()) { job() }, wg)
}

// idleWorkers is how many of w's workers wait for a job.
func (w *workerPool[J]) idleWorkers() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.idle)
}

func TestCastPoolReuseAnIdleWorker(t *testing.T) {
	var wg sync.WaitGroup
	w := newCastPool(&wg)
	for i := 0; i < 3; i++ {
		done := make(chan struct{})
		w.submit(context.Background(), func() { close(done) })
		<-done
		// One worker, idle again after each job: a goroutine per job
		// would leave as many idle workers as jobs.
		testwait.Equal(t, "idle workers", 1, w.idleWorkers)
	}
	w.close()
	waitGroupWithin(t, &wg, "workers ended by close")
}

func TestCastPoolRunEveryJobAtOnce(t *testing.T) {
	var wg sync.WaitGroup
	w := newCastPool(&wg)
	// Each job waits for all of them to have started: a worker pool with
	// a bound or a queue would not finish.
	const jobs = 50
	var started sync.WaitGroup
	started.Add(jobs)
	for i := 0; i < jobs; i++ {
		w.submit(context.Background(), func() {
			started.Done()
			started.Wait()
		})
	}
	waitGroupWithin(t, &started, "every job started")
	testwait.Equal(t, "idle workers", jobs, w.idleWorkers)
	w.close()
	waitGroupWithin(t, &wg, "workers ended by close")
	// After close a job still runs, on a goroutine of its own.
	done := make(chan struct{})
	w.submit(context.Background(), func() { close(done) })
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("a job run after close did not run")
	}
	waitGroupWithin(t, &wg, "the job after close ended")
}

// waitGroupWithin fails t unless wg is done within 10 s.
func waitGroupWithin(t *testing.T, wg *sync.WaitGroup, what string) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: not within 10s", what)
	}
}

// BenchmarkCastPoolSubmit: one cast handed to an idle worker and run, as
// the fleet's casts are (allocations per cast are what a boot pays).
func BenchmarkCastPoolSubmit(b *testing.B) {
	var wg sync.WaitGroup
	w := newCastPool(&wg)
	done := make(chan struct{})
	job := func() { done <- struct{}{} }
	b.ReportAllocs()
	for b.Loop() {
		w.submit(context.Background(), job)
		<-done
	}
	w.close()
	wg.Wait()
}
