package bench

import (
	"sync"
	"testing"
	"time"

	"github.com/berth-project/berth/internal/testwait"
)

// idleWorkers is how many of w's workers wait for a job.
func (w *castWorkers) idleWorkers() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.idle)
}

func TestCastWorkersReuseAnIdleWorker(t *testing.T) {
	var wg sync.WaitGroup
	w := &castWorkers{wg: &wg}
	for i := 0; i < 3; i++ {
		done := make(chan struct{})
		w.run(func() { close(done) })
		<-done
		// One worker, idle again after each job: a goroutine per job
		// would leave as many idle workers as jobs.
		testwait.Equal(t, "idle workers", 1, w.idleWorkers)
	}
	w.close()
	waitGroupWithin(t, &wg, "workers ended by close")
}

func TestCastWorkersRunEveryJobAtOnce(t *testing.T) {
	var wg sync.WaitGroup
	w := &castWorkers{wg: &wg}
	// Each job waits for all of them to have started: a worker pool with
	// a bound or a queue would not finish.
	const jobs = 50
	var started sync.WaitGroup
	started.Add(jobs)
	for i := 0; i < jobs; i++ {
		w.run(func() {
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
	w.run(func() { close(done) })
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
