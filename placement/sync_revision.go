package placement

import (
	"context"
	"sync"
	"time"
)

// revisionReads shares etcd revision reads among concurrent callers
// without weakening what each caller gets. syncIndex reads etcd's
// current revision (a linearizable read) so that a search sees every
// write that finished before the request came, on any placement server:
// Placement's own guarantee, each request reading one database. Every
// candidates request paid that round trip; concurrent ones now share it.
//
// A caller never takes the answer of a read that began before it
// arrived (that read may predate a write the caller has seen finish).
// It joins the read that has not begun yet, if there is one, or starts
// one; a read waits for the one in flight to end before it begins. So
// at most two reads exist at once, every caller's read began after the
// caller arrived, and under load one read serves every request that
// came while the previous one ran. A caller finding no read in flight
// makes its own, on its own goroutine and context, as before.
type revisionReads struct {
	read    func(context.Context) (int64, error)
	timeout time.Duration // the most one read may take

	mu   sync.Mutex
	cur  *revisionRead // in flight
	next *revisionRead // to begin once cur ends; joined by new callers
}

// revisionRead is one read of etcd's revision and its answer, set
// before done is closed.
type revisionRead struct {
	done    chan struct{}
	rev     int64
	err     error
	waiters int // callers sharing it (under revisionReads.mu)
}

// revision returns an etcd revision read after the call began, or ctx's
// error when ctx ends first (a shared read goes on for the others).
func (r *revisionReads) revision(ctx context.Context) (int64, error) {
	r.mu.Lock()
	rd := r.next
	if rd == nil {
		rd = &revisionRead{done: make(chan struct{})}
		if r.cur == nil {
			// Nothing in flight: read now, on this goroutine with the
			// caller's context. Later callers never join a read in
			// flight, so this one is the caller's alone.
			r.cur = rd
			r.mu.Unlock()
			rd.rev, rd.err = r.read(ctx)
			r.finish(rd)
			return rd.rev, rd.err
		}
		r.next = rd
		go r.run(rd, r.cur.done)
	}
	rd.waiters++
	r.mu.Unlock()
	select {
	case <-rd.done:
		return rd.rev, rd.err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// run makes the shared read rd once after (the read in flight) is
// closed. Its context is its own, bounded by timeout: a caller giving up
// must not fail the others sharing the read.
func (r *revisionReads) run(rd *revisionRead, after <-chan struct{}) {
	<-after
	r.mu.Lock()
	r.cur, r.next = rd, nil
	r.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), r.timeout)
	rd.rev, rd.err = r.read(ctx)
	cancel()
	r.finish(rd)
}

// finish ends rd: the next read may begin, and its callers have their
// answer.
func (r *revisionReads) finish(rd *revisionRead) {
	r.mu.Lock()
	if r.cur == rd {
		r.cur = nil
	}
	r.mu.Unlock()
	close(rd.done)
}
