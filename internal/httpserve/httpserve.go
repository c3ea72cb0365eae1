// Package httpserve is the one way a Berth process serves HTTP: every
// listener (the compute API, Placement, the scheduler's
// select_destinations, identity, the status port) is an httpserve.Server,
// so that no client, careless or hostile, can stall the process or run it
// out of file descriptors. Each limit, and why:
//
//   - ReadHeaderTimeout: a client that trickles its request head (slowloris)
//     holds a connection and a goroutine for as long as it likes without it.
//   - ReadTimeout: bounds the whole request, body included. net/http's
//     background read also ends the request's context when it passes, so it
//     must exceed the slowest handler (the compute API's service update
//     waits up to 10 s for an agent; a scheduler answers within its
//     superconductor's select_timeout, 30 s by default; a big Placement list
//     takes seconds).
//   - WriteTimeout: a client that reads its answer slowly, or not at all,
//     would hold the handler's goroutine in a blocked write. Set above
//     ReadTimeout, so a handler whose context ReadTimeout ended still gets
//     its answer out.
//   - IdleTimeout: an idle keep-alive connection is a descriptor held for
//     nothing.
//   - RequestTimeout: every request's deadline. Its context ends then, so
//     the etcd calls under it are cancelled: while etcd has no quorum, a
//     read (which the etcd client retries for as long as its context
//     lasts) or a write would otherwise hold the client until
//     ReadTimeout. Each API answers a request so cut 503 in its own error
//     shape (etcdretry.Unavailable tells it the error is that). It must
//     not exceed ReadTimeout, which ends the context anyway.
//   - MaxHeaderBytes: net/http's default is 1 MiB a request head.
//   - MaxBodyBytes: every request body is read through http.MaxBytesReader;
//     each API may bound its own bodies tighter and answers 413 in its own
//     error shape (BodyTooLarge tells it the error is that).
//   - MaxConnections: the open connections of one listener; see connCap.
//
// A zero limit is net/http's "none"; configs.Defaults holds the values a
// process runs with (the http block).
//
// TLS (tls.go): Listener ends TLS on a listener with the process's
// Certificates, which SIGHUP reloads without closing a connection, and
// ClientConfig is how Berth's own HTTP clients verify its servers.
package httpserve

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Limits are one listener's bounds (see the package comment for why each).
type Limits struct {
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	WriteTimeout      time.Duration
	IdleTimeout       time.Duration
	RequestTimeout    time.Duration
	MaxHeaderBytes    int
	MaxBodyBytes      int64
	MaxConnections    int
}

// Server is one listener's HTTP server with its limits.
type Server struct {
	name  string
	http  *http.Server
	conns *connCap // nil without MaxConnections
}

// New is a server of h under limits; name is the listener's name in the
// log ("compute API", "status").
func New(name string, h http.Handler, limits Limits, log hclog.Logger) *Server {
	if limits.MaxBodyBytes > 0 {
		h = limitBodies(h, limits.MaxBodyBytes)
	}
	if limits.RequestTimeout > 0 {
		h = withDeadline(h, limits.RequestTimeout)
	}
	log = log.With("listener", name)
	s := &Server{name: name, http: &http.Server{
		Handler:           h,
		ReadHeaderTimeout: limits.ReadHeaderTimeout,
		ReadTimeout:       limits.ReadTimeout,
		WriteTimeout:      limits.WriteTimeout,
		IdleTimeout:       limits.IdleTimeout,
		MaxHeaderBytes:    limits.MaxHeaderBytes,
		// net/http's own complaints (accept errors such as running out of
		// descriptors, a handler's panic) belong in the process log.
		ErrorLog: log.StandardLogger(&hclog.StandardLoggerOptions{ForceLevel: hclog.Warn}),
	}}
	if limits.MaxConnections > 0 {
		s.conns = newConnCap(limits.MaxConnections, log)
		s.http.ConnState = s.conns.track
	}
	return s
}

// Serve accepts connections on ln until Shutdown, holding them to the
// server's MaxConnections. It returns http.ErrServerClosed after Shutdown.
func (s *Server) Serve(ln net.Listener) error {
	if s.conns != nil {
		ln = s.conns.listener(ln)
	}
	return s.http.Serve(ln)
}

// Shutdown stops accepting, closes idle connections and waits for the
// requests in progress until ctx ends (http.Server.Shutdown).
func (s *Server) Shutdown(ctx context.Context) error {
	return s.http.Shutdown(ctx)
}

// Close closes the listener and every connection at once, requests in
// progress too (http.Server.Close): a crash, as tests stage one.
func (s *Server) Close() error {
	return s.http.Close()
}

// limitBodies reads every request body through http.MaxBytesReader, so no
// handler reads more than max bytes, however it reads: beyond it the read
// fails with *http.MaxBytesError and the connection closes after the
// answer.
func limitBodies(h http.Handler, max int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil && r.Body != http.NoBody {
			r.Body = http.MaxBytesReader(w, r.Body, max)
		}
		h.ServeHTTP(w, r)
	})
}

// withDeadline gives every request a context that ends after d.
func withDeadline(h http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), d)
		defer cancel()
		h.ServeHTTP(w, r.WithContext(ctx))
	})
}

// BodyTooLarge reports whether err (from reading a request body) is a body
// over its limit, and the limit: the handler answers 413 in its API's
// error shape.
func BodyTooLarge(err error) (limit int64, ok bool) {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return mbe.Limit, true
	}
	return 0, false
}
