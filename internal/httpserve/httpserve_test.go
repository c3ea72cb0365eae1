package httpserve

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/berth-project/berth/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// serve serves h under limits on a loopback port until the test ends;
// each tweak adjusts the server first.
func serve(t *testing.T, limits Limits, h http.Handler, tweak ...func(*Server)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := New("test", h, limits, hclog.NewNullLogger())
	for _, f := range tweak {
		f(srv)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	})
	return ln.Addr().String()
}

var ok = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })

// openFDs is how many descriptors this process holds.
func openFDs(t *testing.T) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("cannot count descriptors: %v", err)
	}
	return len(fds)
}

// keepAlive sends one GET on a new connection, reads the answer and
// leaves the connection open and idle, as a keep-alive client does.
func keepAlive(addr string) (net.Conn, error) {
	conn, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return nil, err
	}
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, "GET / HTTP/1.1\r\nHost: berth\r\n\r\n"); err != nil {
		conn.Close()
		return nil, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("no answer: %w", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return conn, nil
}

// TestIdleConnectionsDoNotExhaustTheProcess opens 2,000 keep-alive
// connections to a listener capped at 100 and leaves each idle: the
// process holds no more than the cap of them, every client is answered,
// and a new client is still served at once. Without a cap the process
// holds all 2,000 (an attacker's thousand idle connections once ran a
// member out of descriptors); with a cap that only blocks Accept, the
// 101st client waits for IdleTimeout.
func TestIdleConnectionsDoNotExhaustTheProcess(t *testing.T) {
	const clients, maxConns = 2000, 100
	addr := serve(t, Limits{ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Hour, MaxConnections: maxConns}, ok)
	before := openFDs(t)

	conns := make(chan net.Conn, clients)
	errs := make(chan error, clients)
	var wg sync.WaitGroup
	next := make(chan struct{}, clients)
	for range clients {
		next <- struct{}{}
	}
	close(next)
	for range 8 {
		wg.Go(func() {
			for range next {
				conn, err := keepAlive(addr)
				if err != nil {
					errs <- err
					return
				}
				conns <- conn
			}
		})
	}
	wg.Wait()
	close(conns)
	close(errs)
	t.Cleanup(func() {
		for c := range conns {
			c.Close()
		}
	})
	for err := range errs {
		t.Fatalf("a keep-alive client was not answered: %v", err)
	}

	// Each client's descriptor is the test's own; the rest are the
	// server's.
	serverHeld := openFDs(t) - before - clients
	t.Logf("descriptors held by the server for %d idle clients: %d (cap %d)", clients, serverHeld, maxConns)
	if serverHeld > maxConns+10 {
		t.Errorf("the server holds %d descriptors for %d idle connections; want at most the cap, %d", serverHeld, clients, maxConns)
	}

	start := time.Now()
	cli := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := cli.Get("http://" + addr + "/")
	if err != nil {
		t.Fatalf("a new client at the cap: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("a new client at the cap: %s", resp.Status)
	}
	t.Logf("a new client at the cap was answered in %v", time.Since(start).Round(time.Millisecond))
}

// TestSilentConnectionsMakeWayAfterTheirGrace fills a listener's cap
// with connections that send nothing: a new client is served once the
// oldest of them has been silent for the grace (5 s; 200 ms here), not
// after ReadHeaderTimeout (a minute here), and none is closed before it.
func TestSilentConnectionsMakeWayAfterTheirGrace(t *testing.T) {
	const maxConns, grace = 4, 200 * time.Millisecond
	addr := serve(t, Limits{ReadHeaderTimeout: time.Minute, MaxConnections: maxConns}, ok,
		func(s *Server) { s.conns.grace = grace })
	var silent []net.Conn
	defer func() {
		for _, c := range silent {
			c.Close()
		}
	}()
	for range maxConns {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		silent = append(silent, c)
	}
	start := time.Now()
	cli := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := cli.Get("http://" + addr + "/")
	if err != nil {
		t.Fatalf("a client behind %d silent connections: %v", maxConns, err)
	}
	resp.Body.Close()
	took := time.Since(start)
	if took < grace/2 || took > 5*time.Second {
		t.Errorf("a client behind %d silent connections was served after %v; want about the grace, %v", maxConns, took, grace)
	}
	t.Logf("served after %v behind %d silent connections (grace %v)", took.Round(time.Millisecond), maxConns, grace)
}

// TestSlowHeadIsCutOff trickles a request head a header a few
// milliseconds apart, as a slowloris client does: the server closes the
// connection at ReadHeaderTimeout instead of waiting for the head's end.
func TestSlowHeadIsCutOff(t *testing.T) {
	const headerTimeout = 300 * time.Millisecond
	addr := serve(t, Limits{ReadHeaderTimeout: headerTimeout, IdleTimeout: time.Minute}, ok)
	// The clock starts before the dial: the server sets its header
	// deadline once it has accepted, which can come before a clock read
	// after Dial returns (the client may be descheduled in between), and
	// the cut then looked early.
	start := time.Now()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// The trickle goes on until the server closes or this deadline.
	_ = conn.SetDeadline(start.Add(headerTimeout + 5*time.Second))
	stop := make(chan struct{})
	trickled := make(chan struct{})
	go func() {
		defer close(trickled)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		if _, err := io.WriteString(conn, "GET / HTTP/1.1\r\nHost: berth\r\n"); err != nil {
			return
		}
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			if _, err := fmt.Fprintf(conn, "X-Slow-%d: 1\r\n", i); err != nil {
				return
			}
		}
	}()
	defer func() { close(stop); <-trickled }()

	// The server answers nothing and closes: the read ends with EOF (or
	// a reset, if a header arrived after the close).
	n, err := conn.Read(make([]byte, 1))
	took := time.Since(start)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the server still read the trickled head after %v (ReadHeaderTimeout %v)", took, headerTimeout)
	}
	if n > 0 {
		t.Fatalf("the server answered a head it never got in full")
	}
	if took < headerTimeout || took > headerTimeout+5*time.Second {
		t.Errorf("the connection was cut after %v; want just after ReadHeaderTimeout (%v)", took, headerTimeout)
	}
	t.Logf("slow head cut off after %v (ReadHeaderTimeout %v): %v", took.Round(time.Millisecond), headerTimeout, err)
}

// TestBodyLimit: a body over MaxBodyBytes fails the handler's read with
// an error BodyTooLarge recognises, however the handler reads it, and a
// body within the limit is read whole.
func TestBodyLimit(t *testing.T) {
	const max = 1024
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if limit, ok := BodyTooLarge(err); ok {
			http.Error(w, fmt.Sprintf("body over %d bytes", limit), http.StatusRequestEntityTooLarge)
			return
		}
		fmt.Fprintf(w, "%d", len(b))
	})
	addr := serve(t, Limits{ReadHeaderTimeout: 10 * time.Second, MaxBodyBytes: max}, h)
	for _, tc := range []struct {
		desc    string
		size    int
		chunked bool
		want    int
	}{
		{desc: "within the limit", size: max, want: http.StatusOK},
		{desc: "over the limit, length declared", size: max + 1, want: http.StatusRequestEntityTooLarge},
		{desc: "over the limit, chunked", size: 64 * max, chunked: true, want: http.StatusRequestEntityTooLarge},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			var body io.Reader = strings.NewReader(strings.Repeat("x", tc.size))
			if tc.chunked {
				body = io.MultiReader(body) // unknown length: sent chunked
			}
			req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/", body)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := (&http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("status = %s (%q), want %d", resp.Status, got, tc.want)
			}
		})
	}
}

func TestBodyTooLarge(t *testing.T) {
	if _, ok := BodyTooLarge(io.ErrUnexpectedEOF); ok {
		t.Error("BodyTooLarge(io.ErrUnexpectedEOF) = true")
	}
	if limit, ok := BodyTooLarge(fmt.Errorf("decode: %w", &http.MaxBytesError{Limit: 7})); !ok || limit != 7 {
		t.Errorf("BodyTooLarge(wrapped MaxBytesError) = %d, %v; want 7, true", limit, ok)
	}
}
