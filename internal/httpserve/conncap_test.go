package httpserve

import (
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/berth-project/berth/internal/testwait"
)

// TestTheLongestIdleConnectionMakesWay: at the cap the accept loop closes
// the connection idle longest, to have a slot for the next client before
// it arrives. Each client is waited for until the server has taken it for
// idle, not only until the client read its answer: net/http marks a
// connection idle after writing the answer, so a client can be done
// before the server is, and under load an earlier connection can still
// count as busy when a later one is idle (as internal/stack's test once
// found, asserting which one went).
func TestTheLongestIdleConnectionMakesWay(t *testing.T) {
	const maxConns = 4
	var srv *Server
	addr := serve(t, Limits{ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Hour, MaxConnections: maxConns}, ok,
		func(s *Server) { srv = s })
	idle := func() int {
		srv.conns.mu.Lock()
		defer srv.conns.mu.Unlock()
		return srv.conns.idle.Len()
	}
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	open := func(i int) {
		t.Helper()
		conn, err := keepAlive(addr)
		if err != nil {
			t.Fatalf("client %d: %v", i+1, err)
		}
		conns = append(conns, conn)
	}
	closed := func(i int) {
		t.Helper()
		if n, err := conns[i].Read(make([]byte, 1)); n != 0 || !errors.Is(err, io.EOF) {
			t.Errorf("client %d, idle longest: read %d, %v; want it closed (EOF)", i+1, n, err)
		}
	}
	for i := range maxConns - 1 {
		open(i)
		testwait.Equal(t, fmt.Sprintf("client %d idle at the server", i+1), i+1, idle)
	}
	// The client that fills the cap: the first, idle longest, goes.
	open(maxConns - 1)
	closed(0)
	testwait.Equal(t, "the remaining clients idle at the server", maxConns-1, idle)
	// One more: the second, now idle longest, goes; the others stay.
	open(maxConns)
	closed(1)
	testwait.Equal(t, "the remaining clients idle at the server", maxConns-1, idle)
	for i := 2; i <= maxConns; i++ {
		_ = conns[i].SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		if _, err := conns[i].Read(make([]byte, 1)); !isTimeout(err) {
			t.Errorf("client %d, idle for less long: read %v; want it still open (a timeout)", i+1, err)
		}
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
