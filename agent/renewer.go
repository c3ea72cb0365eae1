package agent

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// LeaseRenewer renews liveness leases one beat at a time, as messages on
// long-lived LeaseKeepAlive streams shared by the leases it renews: one
// for an agent, several for a fleet (NewLeaseRenewerStreams; a lease
// always on the same one).
//
// Why not clientv3's own calls: KeepAliveOnce opens a new gRPC stream for
// every renewal (stream setup dominated the client's CPU, and etcd's, in
// a 10,000-host fleet: 1,000 streams a second), and KeepAlive renews on
// its own schedule (every TTL/3), not on the agent's report_interval,
// which is what Nova's report_interval means and what the hosts' load
// on etcd is sized by. Here the caller keeps its schedule and each beat
// is one request on the open stream; etcd answers each request on the
// stream in order, with the lease's ID, and the answer goes back to the
// beat waiting on that ID.
//
// A beat that gets no answer within the renewer's timeout fails (the
// caller's next beat tries again). A stream that breaks (etcd restarted,
// lost its leader, the connection dropped) is reopened, and the beats
// waiting on it are sent again on the new one while their time lasts:
// renewing twice is harmless. A stream that answers nothing for half a
// timeout or more while a beat waits on it to the beat's deadline is
// taken as stalled and reopened too.
type LeaseRenewer struct {
	// lanes are the renewer's streams, each with its own goroutines; a
	// lease always beats on the same lane (by its ID).
	lanes []*renewLane

	ctx    context.Context // ends with Close
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// opened counts the streams opened on every lane; tests read it.
	opened atomic.Int64
}

// renewLane keeps one LeaseKeepAlive stream open (reopening it when it
// breaks) for the leases that beat on it.
//
// Why more than one lane: etcd answers a stream's requests one after
// another, and a renewal of a lease that has expired but is not yet
// revoked waits in etcd until the revocation is through raft (revocations
// go at most 1,000 a second). Every beat queued behind it on that stream
// waits too, so one slow answer holds up every lease of a stream, and a
// lease held up past its TTL expires in turn: in a 100,000-host fleet on
// one stream that ran away (thousands of leases lost while registering).
// Real agents each have a stream of their own; a fleet spreads its leases
// over several lanes so a stuck answer holds up a lane, not all.
type renewLane struct {
	lc      pb.LeaseClient
	timeout time.Duration
	log     hclog.Logger
	opened  *atomic.Int64 // the renewer's count

	ctx context.Context // the renewer's; ends with Close

	mu    sync.Mutex
	cur   *renewStream  // nil while (re)opening
	ready chan struct{} // closed once cur is set
	// pending are asynchronous beats (RenewAsync) waiting for the next
	// stream: sent while none was open, or carried over from one that
	// broke before their answer. closed: the lane has stopped; a beat
	// is answered ErrRenewerClosed at once.
	pending []*renewWaiter
	closed  bool
	// sweeping: the lane's sweep (of asynchronous beats past their time)
	// has started. It starts with the first asynchronous beat, so an
	// agent that only beats with Renew runs no ticker for it. wg is the
	// renewer's, which Close waits on.
	sweeping bool
	wg       *sync.WaitGroup
}

// ErrLeaseLost is a renewal's answer for a lease etcd does not have (it
// expired or was revoked): the caller must grant a new one.
var ErrLeaseLost = errors.New("lease not found (expired or revoked)")

// ErrRenewerClosed is the answer to a renewal after Close.
var ErrRenewerClosed = errors.New("lease renewer closed")

// errStreamBroken marks a beat whose stream broke before its answer: it
// is sent again on the next stream.
var errStreamBroken = errors.New("keepalive stream broken")

// leaseClientSource is what an in-process client's Lease offers (see
// internal/embedetcd): it has no gRPC connection to open a stream on.
type leaseClientSource interface{ LeaseClient() pb.LeaseClient }

// NewLeaseRenewer starts a renewer of one stream on cli's connection (or,
// for an in-process client, on its lease server), as an agent with its
// one lease needs. A renewal waits at most timeout for its answer (the
// agent's Intervals.RenewTimeout). Close stops it.
func NewLeaseRenewer(cli *clientv3.Client, timeout time.Duration, log hclog.Logger) (*LeaseRenewer, error) {
	return NewLeaseRenewerStreams(cli, timeout, 1, log)
}

// NewLeaseRenewerStreams is NewLeaseRenewer with the leases spread over
// streams keepalive streams (see renewLane), for a caller renewing many.
func NewLeaseRenewerStreams(cli *clientv3.Client, timeout time.Duration, streams int, log hclog.Logger) (*LeaseRenewer, error) {
	var lc pb.LeaseClient
	if src, ok := cli.Lease.(leaseClientSource); ok {
		lc = src.LeaseClient()
	} else if conn := cli.ActiveConnection(); conn != nil {
		lc = pb.NewLeaseClient(conn)
	} else {
		return nil, fmt.Errorf("lease renewer: the etcd client has neither a gRPC connection nor an in-process lease server")
	}
	return newLeaseRenewer(lc, timeout, streams, log)
}

func newLeaseRenewer(lc pb.LeaseClient, timeout time.Duration, streams int, log hclog.Logger) (*LeaseRenewer, error) {
	if timeout <= 0 {
		return nil, fmt.Errorf("lease renewer: timeout %s must be positive", timeout)
	}
	if streams < 1 {
		return nil, fmt.Errorf("lease renewer: %d streams: at least one is needed", streams)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &LeaseRenewer{ctx: ctx, cancel: cancel, lanes: make([]*renewLane, streams)}
	log = log.Named("renewer")
	for i := range r.lanes {
		l := &renewLane{lc: lc, timeout: timeout, log: log, opened: &r.opened, ctx: ctx, ready: make(chan struct{}), wg: &r.wg}
		r.lanes[i] = l
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			l.run()
		}()
	}
	return r, nil
}

// Close stops the renewer: the streams are closed, beats waiting fail
// with ErrRenewerClosed, and every goroutine it started has ended when
// Close returns.
func (r *LeaseRenewer) Close() {
	r.cancel()
	r.wg.Wait()
}

// Streams is how many keepalive streams the renewer keeps open.
func (r *LeaseRenewer) Streams() int { return len(r.lanes) }

// lane is the lane lease beats on: the same one every time, so a lease's
// beats are answered in order.
func (r *LeaseRenewer) lane(lease clientv3.LeaseID) *renewLane {
	if len(r.lanes) == 1 {
		return r.lanes[0]
	}
	// etcd's lease IDs count up from a member-derived base: mix the bits
	// so consecutive IDs land on different lanes.
	h := uint64(lease) * 0x9e3779b97f4a7c15
	return r.lanes[(h>>32)%uint64(len(r.lanes))]
}

// Renew renews lease once and returns its TTL. It fails with ErrLeaseLost
// when etcd no longer has the lease, and with another error when no
// answer came within the renewer's timeout (or before ctx ended).
func (r *LeaseRenewer) Renew(ctx context.Context, lease clientv3.LeaseID) (int64, error) {
	// The renewer's timeout is a pooled timer, not a context per beat:
	// a fleet beats thousands of times a second, and each context was a
	// deadline, a timer and a cancel to allocate and collect.
	l := r.lane(lease)
	limit := newBeatLimit(l.timeout)
	defer limit.release()
	for {
		s, err := l.stream(ctx, limit)
		if err != nil {
			return 0, fmt.Errorf("renew lease %x: %w", int64(lease), err)
		}
		// Half the timeout: a beat that first waited for a stream to
		// open has less than the whole left on this one.
		ttl, err := s.renew(ctx, limit, int64(lease), l.timeout/2)
		switch {
		case err == nil && ttl <= 0:
			return 0, fmt.Errorf("renew lease %x: %w", int64(lease), ErrLeaseLost)
		case err == nil:
			return ttl, nil
		case errors.Is(err, errStreamBroken) && ctx.Err() == nil && !limit.expired:
			continue // the next stream sends it again
		default:
			return 0, fmt.Errorf("renew lease %x: %w", int64(lease), err)
		}
	}
}

// RenewAsync sends one renewal of lease and returns at once; done is
// called once with what Renew would have returned: the lease's TTL, or
// an error wrapping ErrLeaseLost (etcd no longer has the lease), a
// timeout (no answer within the renewer's timeout), or ErrRenewerClosed.
// As with Renew, a beat whose stream breaks before its answer is sent
// again on the next stream while its time lasts, and a beat that times
// out on a stream silent since it was sent fails the stream.
//
// done runs on the renewer's own goroutines (the one reading the
// answers, or the lane's sweeper for a timeout), never on the caller's:
// it must not block, and must hand anything slow (granting a lost
// lease again) to a goroutine of its own.
//
// Why: a fleet of simulated hosts beats 5,000 times a second a process,
// and a synchronous beat was a worker goroutine waiting per beat (woken
// by the dispatcher, then by its answer), a timer, and a channel: most of
// the fleet's CPU per beat went to the Go scheduler's hand-offs and the
// threads they woke. Here a beat is a queued ID and a callback, its
// timeout the lane's sweep.
func (r *LeaseRenewer) RenewAsync(lease clientv3.LeaseID, done func(ttl int64, err error)) {
	l := r.lane(lease)
	w := asyncWaiters.Get().(*renewWaiter)
	w.done, w.id, w.next = done, int64(lease), nil
	w.deadline = time.Now().Add(l.timeout).UnixNano()
	l.sendAsync(w)
}

// asyncWaiters are RenewAsync's waiters, as renewWaiters are Renew's
// (without a channel): one is given back once its done has been called,
// when nothing links to it any more.
var asyncWaiters = sync.Pool{New: func() any { return &renewWaiter{} }}

// finish answers an asynchronous beat and gives its waiter back: it must
// be unlinked from every stream and list first.
func (w *renewWaiter) finish(ttl int64, err error) {
	done, id := w.done, w.id
	w.done, w.next = nil, nil
	asyncWaiters.Put(w)
	switch {
	case err == nil && ttl <= 0:
		done(0, fmt.Errorf("renew lease %x: %w", id, ErrLeaseLost))
	case err != nil:
		done(0, fmt.Errorf("renew lease %x: %w", id, err))
	default:
		done(ttl, nil)
	}
}

// sendAsync queues w on the lane's open stream, or keeps it for the next
// one while none is open.
func (r *renewLane) sendAsync(w *renewWaiter) {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		w.finish(0, ErrRenewerClosed)
		return
	}
	if !r.sweeping {
		// Under the lock and before closed: run has not ended, so the
		// renewer's wait group is not at zero and Close waits for this.
		r.sweeping = true
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			r.sweep()
		}()
	}
	s := r.cur
	if s == nil || !s.enqueue(w, time.Now().UnixNano()) {
		r.pending = append(r.pending, w)
		r.mu.Unlock()
		return
	}
	r.mu.Unlock()
	s.wakeSender()
}

// sweepEvery is how often a lane looks for asynchronous beats past their
// time: a tenth of the timeout, within [10ms, 1s]. A beat fails up to
// that much after its limit.
func sweepEvery(timeout time.Duration) time.Duration {
	return min(max(timeout/10, 10*time.Millisecond), time.Second)
}

// sweep fails the lane's asynchronous beats that run out of time, until
// the renewer closes: those waiting for a stream, and those sent on the
// open one. A beat that ran out on a stream that has answered nothing
// since it was sent, after waiting half the timeout or more (as Renew's
// stallAfter), fails the stream: it is stuck, not busy.
func (r *renewLane) sweep() {
	t := time.NewTicker(sweepEvery(r.timeout))
	defer t.Stop()
	var expired []*renewWaiter
	for {
		select {
		case <-t.C:
		case <-r.ctx.Done():
			return
		}
		now := time.Now().UnixNano()
		r.mu.Lock()
		kept := r.pending[:0]
		for _, w := range r.pending {
			if w.deadline <= now {
				expired = append(expired, w)
			} else {
				kept = append(kept, w)
			}
		}
		clear(r.pending[len(kept):])
		r.pending = kept
		s := r.cur
		r.mu.Unlock()
		waiting := len(expired)
		var stalled error
		if s != nil {
			expired, stalled = s.expire(expired, now, int64(r.timeout/2))
		}
		for _, w := range expired {
			w.finish(0, fmt.Errorf("no answer: %w", context.DeadlineExceeded))
		}
		if stalled != nil {
			s.fail(stalled)
		}
		if n := len(expired); n > 0 && r.ctx.Err() == nil {
			r.log.Debug("beats got no answer in time", "waiting_for_stream", waiting, "sent", n-waiting)
		}
		clear(expired)
		expired = expired[:0]
	}
}

// beatLimit is one beat's time limit: a timer taken from a pool and
// given back when the beat ends. Its channel delivers once; expired
// remembers that it did, for the selects that follow.
type beatLimit struct {
	t       *time.Timer
	expired bool
}

var beatLimits sync.Pool // of *beatLimit, stopped

func newBeatLimit(d time.Duration) *beatLimit {
	if l, ok := beatLimits.Get().(*beatLimit); ok {
		l.t.Reset(d) // stopped when released: no stale tick (Go 1.23 timers)
		l.expired = false
		return l
	}
	return &beatLimit{t: time.NewTimer(d)}
}

// c is the channel a select waits on for the limit: the timer's, or one
// already closed once the limit has passed.
func (l *beatLimit) c() <-chan time.Time {
	if l.expired {
		return closedTimeChan
	}
	return l.t.C
}

// err is the limit's error once it has passed, as a context's deadline.
func (l *beatLimit) err() error { return context.DeadlineExceeded }

func (l *beatLimit) release() {
	l.t.Stop()
	beatLimits.Put(l)
}

var closedTimeChan = func() chan time.Time { c := make(chan time.Time); close(c); return c }()

// Opened is how many streams the renewer has opened so far, on all its
// lanes.
func (r *LeaseRenewer) Opened() int64 { return r.opened.Load() }

// stream waits for the lane's open stream, until ctx ends or limit
// passes.
func (r *renewLane) stream(ctx context.Context, limit *beatLimit) (*renewStream, error) {
	for {
		r.mu.Lock()
		s, ready := r.cur, r.ready
		r.mu.Unlock()
		if s != nil && !s.isBroken() {
			return s, nil
		}
		if s != nil { // broken: wait for run to clear it and open the next
			select {
			case <-s.done:
			case <-ctx.Done():
				return nil, fmt.Errorf("keepalive stream being reopened: %w", ctx.Err())
			case <-limit.c():
				limit.expired = true
				return nil, fmt.Errorf("keepalive stream being reopened: %w", limit.err())
			case <-r.ctx.Done():
				return nil, ErrRenewerClosed
			}
			continue
		}
		select {
		case <-ready:
		case <-ctx.Done():
			return nil, fmt.Errorf("no keepalive stream open: %w", ctx.Err())
		case <-limit.c():
			limit.expired = true
			return nil, fmt.Errorf("no keepalive stream open: %w", limit.err())
		case <-r.ctx.Done():
			return nil, ErrRenewerClosed
		}
	}
}

// Reopen waits, after a stream that broke, at least this long before
// opening the next one (doubling up to the maximum while opening fails
// or streams keep breaking at once), so an etcd that is down is not
// dialled in a tight loop.
const (
	reopenMinWait = 50 * time.Millisecond
	reopenMaxWait = 2 * time.Second
)

// run keeps the lane's stream open until Close: it opens it, reads its
// answers until it breaks, fails what waits on it, and opens the next.
func (r *renewLane) run() {
	wait := reopenMinWait
	for r.ctx.Err() == nil {
		// Require a leader: a member that loses its leader ends the stream
		// at once, and the next one may reach a member that has one.
		sctx, cancel := context.WithCancel(clientv3.WithRequireLeader(r.ctx))
		st, err := r.lc.LeaseKeepAlive(sctx)
		if err != nil {
			cancel()
			if r.ctx.Err() == nil {
				r.log.Debug("open keepalive stream", "error", err)
			}
		} else {
			r.opened.Add(1)
			s := newRenewStream(sctx, st, cancel)
			r.mu.Lock()
			r.cur = s
			close(r.ready)
			// The asynchronous beats that waited for a stream go on this
			// one (the sweep fails those past their time).
			now := time.Now().UnixNano()
			for _, w := range r.pending {
				s.enqueue(w, now)
			}
			queued := len(r.pending)
			clear(r.pending)
			r.pending = r.pending[:0]
			r.mu.Unlock()
			if queued > 0 {
				s.wakeSender()
			}
			opened := time.Now()
			s.wg.Add(1)
			go s.sendLoop()
			s.fail(s.recvLoop())
			// Why it broke first: a stall found by a beat (which cancels
			// the stream, so Recv then says only "context canceled"), or
			// Recv's own error.
			err = s.brokenBy()
			cancel()
			s.wg.Wait()
			r.mu.Lock()
			r.cur, r.ready = nil, make(chan struct{})
			// The asynchronous beats it broke under wait for the next.
			r.pending = append(r.pending, s.takeOrphans()...)
			r.mu.Unlock()
			close(s.done)
			if r.ctx.Err() != nil {
				break
			}
			r.log.Debug("keepalive stream broke, reopening", "error", err)
			if time.Since(opened) > reopenMaxWait {
				wait = reopenMinWait // it had worked for a while
			}
		}
		select {
		case <-time.After(wait):
		case <-r.ctx.Done():
		}
		wait = min(2*wait, reopenMaxWait)
	}
	// Whoever still waits for a stream sees r.ctx end; the asynchronous
	// beats are told here.
	r.mu.Lock()
	r.closed = true
	left := r.pending
	r.pending = nil
	r.mu.Unlock()
	for _, w := range left {
		w.finish(0, ErrRenewerClosed)
	}
}

// renewStream is one open LeaseKeepAlive stream: a queue of lease IDs to
// send (one sender goroutine, as a gRPC stream takes one Send at a time
// and a Send held up by flow control must not hold the caller past its
// timeout), and the beats waiting for answers, by lease ID.
type renewStream struct {
	ctx    context.Context // the stream's; cancel ends it
	st     pb.Lease_LeaseKeepAliveClient
	cancel context.CancelFunc
	wg     sync.WaitGroup
	done   chan struct{} // closed once run has cleared it as current
	wake   chan struct{} // a send is queued (1-buffered, coalesced)

	mu      sync.Mutex
	err     error   // set once broken
	queue   []int64 // IDs to send
	spare   []int64 // the sender's last batch, reused
	waiting map[int64]*renewWaiter
	// async counts the asynchronous beats in waiting (the sweep skips a
	// stream with none); orphans are those fail unlinked, for the lane
	// to send again on its next stream.
	async   int
	orphans []*renewWaiter
	// lastAnswer is when the stream last answered anything (unix ns),
	// to tell a stalled stream from a busy one.
	lastAnswer atomic.Int64
}

// renewWaiter is one beat waiting for its answer. Beats of one lease
// (two callers renewing the same lease at once) queue in order behind
// each other through next, as etcd answers a stream's requests in
// order.
type renewWaiter struct {
	ch   chan renewResult // 1-buffered: the answer is never blocked on
	next *renewWaiter
	// An asynchronous beat (RenewAsync) has done instead of ch, its
	// lease, when it was last sent and when its time runs out (unix
	// ns).
	done           func(ttl int64, err error)
	id             int64
	sent, deadline int64
}

// renewWaiters are waiters no beat holds, their channels empty. A fleet
// beats ~10,000 times a second at 100,000 hosts, and a waiter with its
// channel was two allocations of every beat. A beat gives its waiter back
// only once no one can reach it: unlinked from the stream's waiting list
// (by recvLoop or fail, which read next before they answer, or by
// forget) and its one answer received or never to be sent.
var renewWaiters = sync.Pool{New: func() any { return &renewWaiter{ch: make(chan renewResult, 1)} }}

type renewResult struct {
	ttl int64
	err error
}

func newRenewStream(ctx context.Context, st pb.Lease_LeaseKeepAliveClient, cancel context.CancelFunc) *renewStream {
	s := &renewStream{ctx: ctx, st: st, cancel: cancel, done: make(chan struct{}), wake: make(chan struct{}, 1),
		waiting: map[int64]*renewWaiter{}}
	s.lastAnswer.Store(time.Now().UnixNano())
	return s
}

func (s *renewStream) isBroken() bool { return s.brokenBy() != nil }

// brokenBy is the first reason the stream failed, nil while it works.
func (s *renewStream) brokenBy() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// renew queues one request for id and waits for its answer. A beat that
// runs out of time (its limit, not a caller giving up) after waiting
// stallAfter or longer, without any answer on the stream meanwhile,
// fails the stream.
func (s *renewStream) renew(ctx context.Context, limit *beatLimit, id int64, stallAfter time.Duration) (int64, error) {
	w := renewWaiters.Get().(*renewWaiter)
	defer renewWaiters.Put(w)
	sent := time.Now().UnixNano()
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		return 0, errStreamBroken
	}
	s.linkLocked(w, id) // under the lock: fail may still walk its last chain
	s.mu.Unlock()
	s.wakeSender()
	var why error
	select {
	case res := <-w.ch:
		return res.ttl, res.err
	case <-ctx.Done():
		why = ctx.Err()
	case <-limit.c():
		limit.expired = true
		why = limit.err()
	}
	if !s.forget(id, w) {
		// The answer (or the stream's failure) came as the time ran out.
		res := <-w.ch
		return res.ttl, res.err
	}
	waited := time.Duration(time.Now().UnixNano() - sent)
	if limit.expired && waited >= stallAfter && s.lastAnswer.Load() < sent {
		// Not one answer in a whole timeout since this request was
		// queued: the stream is stuck (a half-open connection, a member
		// that stopped answering), not just busy. The next beat gets a
		// new one. (A caller that gave up sooner, as one stopping does,
		// says nothing about the stream.)
		s.fail(fmt.Errorf("no answer on the keepalive stream for %s", waited))
	}
	return 0, fmt.Errorf("no answer: %w", why)
}

// enqueue links the asynchronous beat w behind its lease's waiters and
// queues its request; false if the stream is broken (w not taken).
func (s *renewStream) enqueue(w *renewWaiter, now int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return false
	}
	w.sent = now
	s.linkLocked(w, w.id)
	s.async++
	return true
}

// linkLocked links w behind id's waiters, in the order their requests
// go out, and queues id's request; s.mu is held.
func (s *renewStream) linkLocked(w *renewWaiter, id int64) {
	w.next = nil
	if head := s.waiting[id]; head == nil {
		s.waiting[id] = w
	} else {
		for head.next != nil {
			head = head.next
		}
		head.next = w
	}
	s.queue = append(s.queue, id)
}

// wakeSender tells sendLoop there is something queued.
func (s *renewStream) wakeSender() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// expire unlinks the asynchronous beats whose deadline has passed by now
// and appends them to out. stalled is why the stream is stuck, if one of
// them waited stallAfter ns or more with no answer on the stream since it
// was sent.
func (s *renewStream) expire(out []*renewWaiter, now, stallAfter int64) (_ []*renewWaiter, stalled error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.async == 0 {
		return out, nil
	}
	last := s.lastAnswer.Load()
	for id, head := range s.waiting {
		var prev *renewWaiter
		for w := head; w != nil; {
			next := w.next
			if w.done == nil || w.deadline > now {
				prev, w = w, next
				continue
			}
			if prev != nil {
				prev.next = next
			} else if next != nil {
				s.waiting[id] = next
			} else {
				delete(s.waiting, id)
			}
			s.async--
			if waited := now - w.sent; stalled == nil && waited >= stallAfter && last < w.sent {
				stalled = fmt.Errorf("no answer on the keepalive stream for %s", time.Duration(waited))
			}
			out = append(out, w)
			w = next
		}
	}
	return out, stalled
}

// takeOrphans returns the asynchronous beats fail unlinked.
func (s *renewStream) takeOrphans() []*renewWaiter {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.orphans
	s.orphans = nil
	return o
}

// forget unlinks w from id's waiters; false if it was answered already.
// A late answer to a forgotten beat goes to the lease's next beat, if
// any: it is still an answer about that lease (renewed a little earlier,
// or lost, which a lease stays).
func (s *renewStream) forget(id int64, w *renewWaiter) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	var prev *renewWaiter
	for cur := s.waiting[id]; cur != nil; prev, cur = cur, cur.next {
		if cur != w {
			continue
		}
		switch {
		case prev != nil:
			prev.next = cur.next
		case cur.next != nil:
			s.waiting[id] = cur.next
		default:
			delete(s.waiting, id)
		}
		return true
	}
	return false
}

// sendLoop sends the queued requests until the stream breaks.
func (s *renewStream) sendLoop() {
	defer s.wg.Done()
	for {
		select {
		case <-s.wake:
		case <-s.ctx.Done():
			return
		}
		s.mu.Lock()
		batch := s.queue
		s.queue, s.spare = s.spare[:0], nil
		s.mu.Unlock()
		for _, id := range batch {
			// A request of its own each time: an in-process stream hands
			// the message itself to etcd's goroutine, not a copy.
			if err := s.st.Send(&pb.LeaseKeepAliveRequest{ID: id}); err != nil {
				// Recv reports the stream's real error; this ends it.
				s.fail(fmt.Errorf("send: %w", err))
				return
			}
		}
		s.mu.Lock()
		if s.spare == nil {
			s.spare = batch[:0]
		}
		s.mu.Unlock()
	}
}

// recvLoop hands each answer to the first beat waiting on its lease
// until the stream breaks, and returns why it broke.
func (s *renewStream) recvLoop() error {
	for {
		resp, err := s.st.Recv()
		if err != nil {
			return err
		}
		s.lastAnswer.Store(time.Now().UnixNano())
		s.mu.Lock()
		w := s.waiting[resp.ID]
		if w != nil {
			if w.next != nil {
				s.waiting[resp.ID] = w.next
			} else {
				delete(s.waiting, resp.ID)
			}
			if w.done == nil {
				w.ch <- renewResult{ttl: resp.TTL}
				w = nil
			} else {
				s.async--
			}
		}
		s.mu.Unlock()
		if w != nil {
			w.finish(resp.TTL, nil) // unlinked: its done runs outside the lock
		}
	}
}

// fail breaks the stream (once): its context is cancelled, so Recv and
// Send return, and every beat waiting on it is told to try the next.
func (s *renewStream) fail(err error) {
	if err == nil {
		err = errStreamBroken
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return
	}
	s.err = err
	s.cancel()
	for id, w := range s.waiting {
		for w != nil {
			// next before the answer: once answered, w may be reused.
			next := w.next
			if w.done != nil {
				w.next = nil
				s.orphans = append(s.orphans, w) // sent again on the next stream
			} else {
				w.ch <- renewResult{err: fmt.Errorf("%w: %w", errStreamBroken, err)}
			}
			w = next
		}
		delete(s.waiting, id)
	}
	s.async = 0
	s.queue = nil
}
