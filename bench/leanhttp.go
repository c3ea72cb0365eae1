package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// leanHTTP is the tool's HTTP/1.1 client of a plain-http compute API: the
// same requests on the wire as net/http's Client sends, and the answers
// parsed by net/http (http.ReadResponse), but each round trip runs in the
// calling goroutine: it writes the request in one write and reads the
// answer from the connection it holds. net/http's Transport hands every
// request to the connection's writer goroutine and the answer back from
// its reader goroutine, and tracks each request's cancellation through
// both; on the 2-core machine of a 10k boot that was about 40 µs of CPU a
// create more than this (BenchmarkNovaCreateRoundTrip), some 4% of
// everything the boot's process did, all of it the tool's.
//
// What it keeps of net/http's client:
//   - keep-alive: a connection goes back to the idle list after an answer
//     read whole that did not say Connection: close;
//   - an idle connection the server may have closed is not reused: one
//     idle longer than leanMaxIdle (well under any server's idle timeout,
//     Berth's default a minute) is closed instead, and one idle longer
//     than leanCheckIdle is reused only if a peek at its socket shows the
//     server has not closed it (net/http's reader goroutine notices that
//     as it happens). A request whose write fails on a reused connection
//     (nothing of it reached the server) is sent once more on a new one,
//     as net/http does;
//   - the client's Timeout bounds each round trip (the connection's
//     deadline), and ctx's end cuts it (the deadline moved to the past).
//
// newNovaClient uses it only for an http:// endpoint the transport would
// reach without a proxy; https and proxies go through net/http.
type leanHTTP struct {
	addr    string // host:port to dial
	host    string // the Host header
	prefix  string // the endpoint's path, before each request's
	timeout time.Duration
	dialer  net.Dialer

	mu   sync.Mutex
	idle []*leanConn // most recently used last
}

// leanMaxIdle is how long a connection may sit idle and still be reused;
// leanCheckIdle how long it may before its reuse peeks at the socket.
const (
	leanMaxIdle   = 5 * time.Second
	leanCheckIdle = 50 * time.Millisecond
)

type leanConn struct {
	net.Conn
	br       *bufio.Reader
	idleFrom time.Time
}

// newLeanHTTP is a lean client of base for hc's Timeout when net/http's
// transport would reach base over plain HTTP without a proxy, else nil
// (the caller goes on with hc).
func newLeanHTTP(base string, hc *http.Client) *leanHTTP {
	u, err := url.Parse(base)
	if err != nil || u.Scheme != "http" || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil
	}
	rt := hc.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	tr, ok := rt.(*http.Transport)
	if !ok || hc.Jar != nil {
		return nil
	}
	if tr.Proxy != nil {
		if p, err := tr.Proxy(&http.Request{URL: u}); err != nil || p != nil {
			return nil
		}
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "80")
	}
	return &leanHTTP{addr: addr, host: u.Host, prefix: strings.TrimRight(u.EscapedPath(), "/"), timeout: hc.Timeout,
		dialer: net.Dialer{Timeout: 30 * time.Second}}
}

// errLeanWrite marks a request of which no byte was written.
type errLeanWrite struct{ err error }

func (e errLeanWrite) Error() string { return e.err.Error() }
func (e errLeanWrite) Unwrap() error { return e.err }

// do sends method target (the path after the endpoint's) with headers and
// body, and reads the answer's body into buf; it returns the status.
func (l *leanHTTP) do(ctx context.Context, method, target string, headers http.Header, body []byte, buf *bytes.Buffer) (int, error) {
	if strings.ContainsAny(target, " \r\n") {
		return 0, fmt.Errorf("request target %q: a space or line break", target)
	}
	if method == http.MethodHead {
		// http.ReadResponse without the request would wait for a body.
		return 0, errors.New("lean client: no HEAD")
	}
	req := leanRequests.Get().(*bytes.Buffer)
	defer func() {
		req.Reset()
		leanRequests.Put(req)
	}()
	if err := l.writeRequest(req, method, target, headers, body); err != nil {
		return 0, err
	}
	for {
		c, reused, err := l.conn(ctx)
		if err != nil {
			return 0, err
		}
		status, keep, err := l.roundTrip(ctx, c, req.Bytes(), buf)
		if err == nil && keep {
			l.put(c)
		} else {
			c.Close()
		}
		var we errLeanWrite
		if err != nil && reused && errors.As(err, &we) && ctx.Err() == nil {
			buf.Reset()
			continue // nothing reached the server: once more on a new connection
		}
		return status, err
	}
}

// writeRequest formats an HTTP/1.1 request as net/http's Request.Write
// would for these fields: the request line, Host, User-Agent, the
// headers, and Content-Length when there is a body.
func (l *leanHTTP) writeRequest(w *bytes.Buffer, method, target string, headers http.Header, body []byte) error {
	w.WriteString(method)
	w.WriteByte(' ')
	w.WriteString(l.prefix)
	w.WriteString(target)
	w.WriteString(" HTTP/1.1\r\nHost: ")
	w.WriteString(l.host)
	w.WriteString("\r\nUser-Agent: Go-http-client/1.1\r\n")
	for k, vs := range headers {
		for _, v := range vs {
			if strings.ContainsAny(v, "\r\n") {
				return fmt.Errorf("header %s: a line break in its value", k)
			}
			w.WriteString(k)
			w.WriteString(": ")
			w.WriteString(v)
			w.WriteString("\r\n")
		}
	}
	if len(body) > 0 || method == http.MethodPost || method == http.MethodPut || method == http.MethodPatch {
		w.WriteString("Content-Length: ")
		w.WriteString(strconv.Itoa(len(body)))
		w.WriteString("\r\n")
	}
	w.WriteString("\r\n")
	w.Write(body)
	return nil
}

var leanRequests = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// conn is an idle connection young enough to reuse (reused true), else a
// new one.
func (l *leanHTTP) conn(ctx context.Context) (*leanConn, bool, error) {
	now := time.Now()
	l.mu.Lock()
	for n := len(l.idle); n > 0; n = len(l.idle) {
		c := l.idle[n-1]
		l.idle[n-1] = nil
		l.idle = l.idle[:n-1]
		if idle := now.Sub(c.idleFrom); idle < leanMaxIdle {
			l.mu.Unlock()
			if idle < leanCheckIdle || !peerClosed(c.Conn) {
				return c, true, nil
			}
			c.Close()
			l.mu.Lock()
			continue
		}
		// The oldest are at the front: every one left is older still.
		l.closeIdleLocked()
		c.Close()
	}
	l.mu.Unlock()
	nc, err := l.dialer.DialContext(ctx, "tcp", l.addr)
	if err != nil {
		return nil, false, err
	}
	return &leanConn{Conn: nc, br: bufio.NewReaderSize(nc, 4096)}, false, nil
}

func (l *leanHTTP) put(c *leanConn) {
	c.idleFrom = time.Now()
	l.mu.Lock()
	l.idle = append(l.idle, c)
	l.mu.Unlock()
}

// roundTrip writes req on c and reads the answer's body into buf; keep
// says whether c may carry another request.
func (l *leanHTTP) roundTrip(ctx context.Context, c *leanConn, req []byte, buf *bytes.Buffer) (status int, keep bool, err error) {
	var deadline time.Time
	if l.timeout > 0 {
		deadline = time.Now().Add(l.timeout)
	}
	if d, ok := ctx.Deadline(); ok && (deadline.IsZero() || d.Before(deadline)) {
		deadline = d
	}
	if err := c.SetDeadline(deadline); err != nil {
		return 0, false, err
	}
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if n, err := c.Write(req); err != nil {
		if n > 0 {
			return 0, false, l.wrap(ctx, err) // part of it may have reached the server
		}
		return 0, false, errLeanWrite{l.wrap(ctx, err)}
	}
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil {
		return 0, false, l.wrap(ctx, err)
	}
	_, err = buf.ReadFrom(io.LimitReader(resp.Body, 16<<20))
	if err == nil {
		// The body must have ended within the limit for the connection to
		// be at the next answer's start.
		var one [1]byte
		if n, _ := resp.Body.Read(one[:]); n > 0 {
			err = errors.New("answer body over 16 MiB")
		}
	}
	resp.Body.Close()
	if err != nil {
		return 0, false, l.wrap(ctx, fmt.Errorf("read the answer: %w", err))
	}
	return resp.StatusCode, !resp.Close, nil
}

// wrap is err, or ctx's error when ctx's end is what cut the round trip.
func (l *leanHTTP) wrap(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("%w (%v)", cerr, err)
	}
	return err
}

// closeIdle closes the idle connections (the end of a run).
func (l *leanHTTP) closeIdle() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closeIdleLocked()
}

// closeIdleLocked closes and forgets every idle connection (l.mu held).
func (l *leanHTTP) closeIdleLocked() {
	for _, c := range l.idle {
		c.Close()
	}
	clear(l.idle)
	l.idle = l.idle[:0]
}

// peerClosed reports whether c's peer has closed it, or sent something
// unasked (either way c cannot carry a request): one peek at the socket
// that does not wait.
func peerClosed(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return true
	}
	closed := true
	err = rc.Read(func(fd uintptr) bool {
		var b [1]byte
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		closed = !errors.Is(err, syscall.EAGAIN) || n > 0
		return true // never wait for the socket to be readable
	})
	return err != nil || closed
}
