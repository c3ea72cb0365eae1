package httpserve

import (
	"container/list"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// connCap holds one listener to max open connections without letting
// idle ones lock new clients out.
//
// A slot is taken before each Accept and given back when the connection
// closes, so beyond the cap new clients wait in the kernel's listen queue
// and cost the process no descriptor (netutil.LimitListener does only
// this). Alone that lets a client that opens max keep-alive connections
// and leaves them idle shut everyone else out until IdleTimeout. So, at
// the cap, the accept loop closes the connection that has waited longest
// for a request:
//   - an idle keep-alive connection (between requests): closing it is
//     what IdleTimeout would do later, and HTTP clients expect it (a
//     client retries an idempotent request on a reused connection the
//     server closed);
//   - a new connection that has sent no complete request head for
//     freshGrace (net/http's Shutdown takes such a connection for idle
//     after the same 5 s: a real client sends its head at once).
//
// A connection in the middle of a request is never closed for another:
// when every connection is busy, new clients wait until one finishes or
// ReadHeaderTimeout/ReadTimeout ends it.
type connCap struct {
	slots chan struct{} // a token per open connection
	log   hclog.Logger
	grace time.Duration // freshGrace; shorter in tests

	mu       sync.Mutex
	idle     list.List // *tracked between requests, longest idle first
	fresh    list.List // *tracked with no request yet, oldest first
	byConn   map[net.Conn]*tracked
	waiting  bool          // the accept loop is waiting at the cap
	wake     chan struct{} // a connection became idle while waiting
	evicted  int           // connections closed at the cap since the last warning
	lastWarn time.Time
}

// freshGrace is how long a new connection may go without a complete
// request head before it may be closed for a waiting client.
const freshGrace = 5 * time.Second

// warnEvery bounds the "at the cap" warnings: one a minute under attack.
const warnEvery = time.Minute

type tracked struct {
	conn  net.Conn
	since time.Time
	in    *list.List // idle, fresh or nil (busy)
	elem  *list.Element
}

func newConnCap(max int, log hclog.Logger) *connCap {
	return &connCap{slots: make(chan struct{}, max), log: log, grace: freshGrace, byConn: map[net.Conn]*tracked{},
		wake: make(chan struct{}, 1)}
}

// track is the http.Server's ConnState hook. A connection is new from
// Accept until its first request head is read, active while a request is
// served, idle between requests; net/http calls the hook on each change.
func (c *connCap) track(conn net.Conn, state http.ConnState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.byConn[conn]
	switch state {
	case http.StateNew:
		t = &tracked{conn: conn}
		c.byConn[conn] = t
		c.move(t, &c.fresh)
	case http.StateActive:
		if t != nil {
			c.move(t, nil)
		}
	case http.StateIdle:
		if t != nil {
			c.move(t, &c.idle)
			if c.waiting {
				select {
				case c.wake <- struct{}{}:
				default:
				}
			}
		}
	case http.StateHijacked, http.StateClosed:
		if t != nil {
			c.move(t, nil)
			delete(c.byConn, conn)
		}
	}
}

// move puts t at the back of l (nil: in no list), since now.
func (c *connCap) move(t *tracked, l *list.List) {
	if t.in != nil {
		t.in.Remove(t.elem)
	}
	t.in, t.elem, t.since = l, nil, time.Now()
	if l != nil {
		t.elem = l.PushBack(t)
	}
}

// acquire takes a slot for the next connection, waiting at the cap and
// closing the connection that has waited longest for a request; it fails
// when done closes (the listener closed).
//
// Each pass tries for a free slot before closing anything: an eviction
// frees its slot at once (capConn.Close), and a wake can be ready beside
// it (a connection went idle meanwhile, or a token left from an earlier
// wait), so a select that picked the wake over the slot would close a
// second connection for one newcomer.
func (c *connCap) acquire(done <-chan struct{}) error {
	for {
		select {
		case c.slots <- struct{}{}:
			c.setWaiting(false)
			return nil
		default:
		}
		var timer <-chan time.Time
		if retry := c.evictOne(); retry > 0 {
			timer = time.After(retry)
		}
		select {
		case c.slots <- struct{}{}:
			c.setWaiting(false)
			return nil
		case <-done:
			c.setWaiting(false)
			return net.ErrClosed
		case <-c.wake:
		case <-timer:
		}
	}
}

func (c *connCap) setWaiting(w bool) {
	c.mu.Lock()
	c.waiting = w
	c.mu.Unlock()
}

// evictOne closes the longest idle connection, or else the oldest new one
// past freshGrace. When it closes none, it returns how long until the
// oldest new connection is past its grace (0: no new connection).
func (c *connCap) evictOne() (retry time.Duration) {
	c.mu.Lock()
	c.waiting = true
	var victim *tracked
	if e := c.idle.Front(); e != nil {
		victim = e.Value.(*tracked)
	} else if e := c.fresh.Front(); e != nil {
		t := e.Value.(*tracked)
		if age := time.Since(t.since); age >= c.grace {
			victim = t
		} else {
			retry = c.grace - age
		}
	}
	if victim != nil {
		// Out of the lists now, so the next call picks another while
		// net/http notices the close.
		c.move(victim, nil)
		c.evicted++
		if time.Since(c.lastWarn) >= warnEvery {
			c.log.Warn("connection cap reached: closing connections that wait for a request, holding new ones in the listen queue",
				"max_connections", cap(c.slots), "closed", c.evicted)
			c.lastWarn, c.evicted = time.Now(), 0
		}
	}
	c.mu.Unlock()
	if victim != nil {
		_ = victim.conn.Close()
	}
	return retry
}

func (c *connCap) release() { <-c.slots }

// listener wraps ln so that each Accept takes a slot first.
func (c *connCap) listener(ln net.Listener) net.Listener {
	return &capListener{Listener: ln, cap: c, done: make(chan struct{})}
}

type capListener struct {
	net.Listener
	cap       *connCap
	closeOnce sync.Once
	done      chan struct{}
}

func (l *capListener) Accept() (net.Conn, error) {
	if err := l.cap.acquire(l.done); err != nil {
		return nil, err
	}
	conn, err := l.Listener.Accept()
	if err != nil {
		l.cap.release()
		return nil, err
	}
	return &capConn{Conn: conn, release: l.cap.release}, nil
}

func (l *capListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// capConn gives its slot back once, on its first Close.
type capConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *capConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
