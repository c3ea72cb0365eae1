package bench

import "sync"

// castWorkers runs the fleet's casts, each at once, on goroutines kept
// between casts: a cast goes to the worker that became idle last (a
// stack), and a new worker starts only when none is idle, so as many run
// at once as before (a goroutine per cast), with no bound and no queue.
//
// Why: a goroutine started per cast grew its stack again under the
// agent's etcd calls (gRPC's createHeaderFields, the build's records):
// runtime.newstack was ~0.12 s of the agent fleet's ~0.8 s in a
// 10,000-host boot profile. A kept worker keeps its grown stack; handed
// the next cast last-idle-first (not by a channel, which hands it to the
// worker parked longest), it is shrunk by a collection at most once
// between casts, as taskPool's workers are (periodic_pool.go).
type castWorkers struct {
	wg *sync.WaitGroup // counts the workers

	mu     sync.Mutex
	idle   []chan func() // idle workers' inboxes, the last idle last
	closed bool
}

// run runs job on the worker idle last, or on a new one. After close it
// runs job on a goroutine of its own.
func (w *castWorkers) run(job func()) {
	w.mu.Lock()
	if k := len(w.idle); k > 0 && !w.closed {
		in := w.idle[k-1]
		w.idle = w.idle[:k-1]
		w.mu.Unlock()
		in <- job // 1-buffered and empty: the idle worker waits on it
		return
	}
	closed := w.closed
	w.mu.Unlock()
	w.wg.Add(1)
	if closed {
		go func() {
			defer w.wg.Done()
			job()
		}()
		return
	}
	in := make(chan func(), 1)
	in <- job
	go w.work(in)
}

// work runs the jobs handed to in until close.
func (w *castWorkers) work(in chan func()) {
	defer w.wg.Done()
	for job := range in {
		job()
		w.mu.Lock()
		if w.closed {
			w.mu.Unlock()
			return
		}
		w.idle = append(w.idle, in)
		w.mu.Unlock()
	}
}

// close ends the idle workers, and each busy one once its job is done.
func (w *castWorkers) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	for _, in := range w.idle {
		close(in)
	}
	w.idle = nil
}
