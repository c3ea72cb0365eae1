package bench

import (
	"context"
	"sync"

	"github.com/berth-project/berth/internal/rolelabel"
)

// taskPool runs one periodic task's jobs on at most max workers, handing
// each job to the worker that became idle last (a stack, not a queue),
// and starting a worker only when none is idle.
//
// Why last-idle-first: the workers of a fleet's periodic tasks sit
// parked between jobs, and every garbage collection shrinks the stacks
// of parked goroutines, which their next job grows again
// (runtime.newstack and copystack, most of it under the etcd client's
// gRPC calls). A channel hands a job to the worker that has waited
// longest, so at a few hundred jobs a second over a pool sized for
// etcd's worst latency every job went to a worker shrunk since its last
// one. Handed to the worker idle last, the jobs keep to as many workers
// as are in flight at once, each shrunk at most once a collection,
// while the pool still grows to max when etcd slows down and many calls
// wait at once.
type taskPool struct {
	max  int
	role context.Context // the workers' profile role
	run  func(periodicJob)
	wg   *sync.WaitGroup // counts the workers

	mu      sync.Mutex
	idle    []chan periodicJob // idle workers' inboxes, the last idle last
	started int
	closed  bool
	freed   chan struct{} // 1-buffered: a worker became idle
}

func newTaskPool(role context.Context, max int, run func(periodicJob), wg *sync.WaitGroup) *taskPool {
	return &taskPool{max: max, role: role, run: run, wg: wg, freed: make(chan struct{}, 1)}
}

// submit hands j to the worker idle last, or to a new one while fewer
// than max run, or waits for one to become idle; false if ctx ended
// first (j was not run).
func (p *taskPool) submit(ctx context.Context, j periodicJob) bool {
	for {
		p.mu.Lock()
		if k := len(p.idle); k > 0 {
			in := p.idle[k-1]
			p.idle = p.idle[:k-1]
			p.mu.Unlock()
			in <- j // 1-buffered and empty: an idle worker waits on it
			return true
		}
		if p.started < p.max {
			p.started++
			p.mu.Unlock()
			in := make(chan periodicJob, 1)
			in <- j
			p.wg.Add(1)
			rolelabel.Go(p.role, "agent fleet background", func(context.Context) { p.work(in) })
			return true
		}
		p.mu.Unlock()
		select {
		case <-p.freed:
		case <-ctx.Done():
			return false
		}
	}
}

// work runs the jobs handed to in until the pool closes.
func (p *taskPool) work(in chan periodicJob) {
	defer p.wg.Done()
	for j := range in {
		p.run(j)
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return
		}
		p.idle = append(p.idle, in)
		p.mu.Unlock()
		select {
		case p.freed <- struct{}{}:
		default:
		}
	}
}

// close ends the workers once the job each is running is done; no job
// may be submitted after it.
func (p *taskPool) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for _, in := range p.idle {
		close(in)
	}
	p.idle = nil
}
