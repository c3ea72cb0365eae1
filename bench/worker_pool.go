package bench

import (
	"context"
	"sync"

	"github.com/berth-project/berth/internal/rolelabel"
)

// workerPool runs jobs on workers kept between jobs, handing each job to
// the worker that became idle last (a stack of 1-buffered inboxes, not a
// queue) and starting a worker only when none is idle. A bounded pool
// (max > 0: a periodic task's, periodic.go) runs at most max at once,
// and a job waits for a worker to become idle; an unbounded one (max 0:
// the fleet's casts) runs every job at once, with no queue, as a
// goroutine per job would. A bounded pool has one submitter at a time
// (each periodic task's dispatcher): freed holds one wake-up, so a
// second submitter waiting beside the first could miss a worker freed
// while the first had not yet taken its wake-up.
//
// Why workers kept, handed jobs last-idle-first: a goroutine started per
// job grows its stack again under the agent's etcd calls (gRPC's
// createHeaderFields, the build's records): runtime.newstack was ~0.12 s
// of the agent fleet's ~0.8 s in a 10,000-host boot profile. And every
// garbage collection shrinks the stacks of parked goroutines, which
// their next job grows again (runtime.newstack and copystack, most of it
// under the etcd client's gRPC calls); a channel hands a job to the
// worker that has waited longest, so at a few hundred periodic jobs a
// second over a pool sized for etcd's worst latency every job went to a
// worker shrunk since its last one. Handed to the worker idle last, the
// jobs keep to as many workers as are in flight at once, each shrunk at
// most once a collection, while a pool still grows (to max, if bounded)
// when etcd slows down and many calls wait at once.
type workerPool[J any] struct {
	max int // 0: no bound
	// role and roleName are the workers' profile role: roleName on
	// role's labels (rolelabel.Go), or "" for the labels of the
	// goroutine that submits the job starting a worker, inherited.
	role     context.Context
	roleName string
	run      func(J)
	wg       *sync.WaitGroup // counts the workers

	mu      sync.Mutex
	idle    []chan J // idle workers' inboxes, the last idle last
	started int
	closed  bool
	freed   chan struct{} // 1-buffered: a worker became idle (a bounded pool's submit waits on it)
}

func newWorkerPool[J any](role context.Context, roleName string, max int, run func(J), wg *sync.WaitGroup) *workerPool[J] {
	return &workerPool[J]{max: max, role: role, roleName: roleName, run: run, wg: wg, freed: make(chan struct{}, 1)}
}

// submit hands j to the worker idle last, or to a new one while fewer
// than max run (always, unbounded), or waits for one to become idle;
// false if ctx ended first (j was not run). After close, j runs on a
// worker of its own that ends with it.
func (p *workerPool[J]) submit(ctx context.Context, j J) bool {
	for {
		p.mu.Lock()
		if k := len(p.idle); k > 0 {
			in := p.idle[k-1]
			p.idle = p.idle[:k-1]
			p.mu.Unlock()
			in <- j // 1-buffered and empty: an idle worker waits on it
			return true
		}
		if p.max == 0 || p.started < p.max || p.closed {
			p.started++
			p.mu.Unlock()
			p.start(j)
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

// start starts a worker with j in its inbox.
func (p *workerPool[J]) start(j J) {
	in := make(chan J, 1)
	in <- j
	p.wg.Add(1)
	if p.roleName == "" {
		go p.work(in)
		return
	}
	rolelabel.Go(p.role, p.roleName, func(context.Context) { p.work(in) })
}

// work runs the jobs handed to in until the pool closes.
func (p *workerPool[J]) work(in chan J) {
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
		if p.max > 0 {
			select {
			case p.freed <- struct{}{}:
			default:
			}
		}
	}
}

// close ends the idle workers, and each busy one once its job is done.
func (p *workerPool[J]) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for _, in := range p.idle {
		close(in)
	}
	p.idle = nil
}
