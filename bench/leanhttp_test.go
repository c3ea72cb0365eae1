package bench

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-project/berth/api"
)

// connCounter is a test server's count of the connections it accepted.
type connCounter struct {
	mu          sync.Mutex
	opened      int
	closedConns int
}

func (c *connCounter) track(_ net.Conn, s http.ConnState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch s {
	case http.StateNew:
		c.opened++
	case http.StateClosed, http.StateHijacked:
		c.closedConns++
	}
}

func (c *connCounter) counts() (int, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.opened, c.closedConns
}

// leanServer answers POST /v2.1/servers as the compute API does (202 and
// the new server's id), checking what the lean client sent.
func leanServer(t *testing.T, closeAfter func(n int) bool) (*httptest.Server, *connCounter) {
	t.Helper()
	var cc connCounter
	var mu sync.Mutex
	n := 0
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil || r.Method != http.MethodPost || r.URL.Path != "/v2.1/servers" || r.Header.Get("X-Auth-Token") != "bench:bench" ||
			r.Header.Get("OpenStack-API-Version") != novaMicroversion || r.Header.Get("Content-Type") != "application/json" ||
			r.ContentLength != int64(len(body)) || !bytes.Contains(body, []byte(`"flavorRef":"1"`)) {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"badRequest": {"message": "not as sent", "code": 400}}`))
			return
		}
		mu.Lock()
		n++
		i := n
		mu.Unlock()
		if closeAfter != nil && closeAfter(i) {
			w.Header().Set("Connection", "close")
		}
		w.WriteHeader(http.StatusAccepted)
		_, _ = w.Write([]byte(`{"server": {"id": "s-` + strings.Repeat("x", i%7) + `", "adminPass": "p"}}`))
	}))
	srv.Config.ConnState = cc.track
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, &cc
}

func leanClient(t *testing.T, url string) *novaClient {
	t.Helper()
	c := newNovaClient(url, &http.Client{Transport: newTransport(4), Timeout: 30 * time.Second}, nil)
	if c.lean == nil {
		t.Fatal("no lean client for a plain-http endpoint")
	}
	t.Cleanup(c.lean.closeIdle)
	return c
}

// TestLeanClientKeepsAlive: sequential creates share one connection, and
// each answer's id is read.
func TestLeanClientKeepsAlive(t *testing.T) {
	srv, cc := leanServer(t, nil)
	c := leanClient(t, srv.URL)
	for i := 1; i <= 20; i++ {
		id, err := c.createServer(context.Background(), api.CreateRequest{Name: "a", Flavor: "m1.tiny"})
		if want := "s-" + strings.Repeat("x", i%7); err != nil || id != want {
			t.Fatalf("create %d: %q %v, want %q", i, id, err, want)
		}
	}
	if opened, _ := cc.counts(); opened != 1 {
		t.Fatalf("%d connections for 20 sequential creates, want 1", opened)
	}
}

// TestLeanClientConnectionClose: an answer saying Connection: close ends
// its connection; the next request opens another and succeeds.
func TestLeanClientConnectionClose(t *testing.T) {
	srv, cc := leanServer(t, func(n int) bool { return n%2 == 0 })
	c := leanClient(t, srv.URL)
	for i := 0; i < 6; i++ {
		if _, err := c.createServer(context.Background(), api.CreateRequest{Name: "a", Flavor: "m1.tiny"}); err != nil {
			t.Fatalf("create %d: %v", i, err)
		}
	}
	if opened, _ := cc.counts(); opened != 3 {
		t.Fatalf("%d connections, want 3 (one per two creates)", opened)
	}
}

// TestLeanClientServerClosedIdle: a connection the server closed while it
// sat idle is not sent a request: the peek sees the close and the create
// goes on a new connection.
func TestLeanClientServerClosedIdle(t *testing.T) {
	srv, cc := leanServer(t, nil)
	c := leanClient(t, srv.URL)
	ctx := context.Background()
	if _, err := c.createServer(ctx, api.CreateRequest{Name: "a", Flavor: "m1.tiny"}); err != nil {
		t.Fatal(err)
	}
	srv.CloseClientConnections()
	deadline := time.Now().Add(10 * time.Second)
	for _, closed := cc.counts(); closed < 1; _, closed = cc.counts() {
		if time.Now().After(deadline) {
			t.Fatal("the server never closed the connection")
		}
		time.Sleep(time.Millisecond)
	}
	// Older than leanCheckIdle, so its reuse peeks.
	c.lean.mu.Lock()
	for _, ic := range c.lean.idle {
		ic.idleFrom = time.Now().Add(-leanCheckIdle)
	}
	c.lean.mu.Unlock()
	if _, err := c.createServer(ctx, api.CreateRequest{Name: "a", Flavor: "m1.tiny"}); err != nil {
		t.Fatalf("create after the server closed the idle connection: %v", err)
	}
	if opened, _ := cc.counts(); opened != 2 {
		t.Fatalf("%d connections, want 2", opened)
	}
	// One idle too long is closed without a peek.
	c.lean.mu.Lock()
	for _, ic := range c.lean.idle {
		ic.idleFrom = time.Now().Add(-leanMaxIdle)
	}
	c.lean.mu.Unlock()
	if _, err := c.createServer(ctx, api.CreateRequest{Name: "a", Flavor: "m1.tiny"}); err != nil {
		t.Fatal(err)
	}
	if opened, _ := cc.counts(); opened != 3 {
		t.Fatalf("%d connections, want 3", opened)
	}
}

// TestLeanClientErrorsAndCancel: a 4xx answer is the API's error with its
// message; a request whose context ends while the server holds it fails
// with the context's error instead of waiting.
func TestLeanClientErrorsAndCancel(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v2.1/servers/hold" {
			select {
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte(`{"forbidden": {"message": "Quota exceeded", "code": 403}}`))
	}))
	defer srv.Close()
	defer close(release)
	c := leanClient(t, srv.URL)
	_, err := c.createServer(context.Background(), api.CreateRequest{Name: "a", Flavor: "m1.tiny"})
	var ae *api.APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusForbidden || ae.Message != "Quota exceeded" {
		t.Fatalf("create: %v, want the 403 with its message", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.do(ctx, http.MethodGet, "/servers/hold", nil, nil) }()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("held request: %v, want context.Canceled", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a cancelled request still waits")
	}
}

// TestLeanClientOnlyForPlainDirectHTTP: https, a proxy or a cookie jar
// keep net/http's client.
func TestLeanClientOnlyForPlainDirectHTTP(t *testing.T) {
	proxied := newTransport(1)
	proxied.Proxy = func(*http.Request) (*url.URL, error) { return url.Parse("http://proxy.invalid:3128") }
	for _, tc := range []struct {
		desc string
		base string
		hc   *http.Client
		lean bool
	}{
		{"plain http", "http://127.0.0.1:8774", &http.Client{Transport: newTransport(1)}, true},
		{"a mount path", "http://127.0.0.1:8774/compute", http.DefaultClient, true},
		{"https", "https://127.0.0.1:8774", http.DefaultClient, false},
		{"a proxy", "http://10.0.0.1:8774", &http.Client{Transport: proxied}, false},
	} {
		if got := newLeanHTTP(tc.base, tc.hc) != nil; got != tc.lean {
			t.Errorf("%s: lean %v, want %v", tc.desc, got, tc.lean)
		}
	}
}
