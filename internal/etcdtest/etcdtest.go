// Package etcdtest starts a real embedded etcd for a test, on free loopback
// ports in the test's temp dir, and tears it down when the test ends.
package etcdtest

import (
	"fmt"
	"net"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/internal/embedetcd"
)

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Start runs a fresh member and returns it; it is closed at cleanup.
func Start(t testing.TB) *embedetcd.Server {
	t.Helper()
	var lastErr error
	for try := 0; try < 3; try++ { // a "free" port can be taken between probe and bind
		srv, err := embedetcd.Start(embedetcd.Config{
			DataDir:   t.TempDir(),
			ClientURL: fmt.Sprintf("http://127.0.0.1:%d", FreePort(t)),
			PeerURL:   fmt.Sprintf("http://127.0.0.1:%d", FreePort(t)),
		})
		if err == nil {
			t.Cleanup(srv.Close)
			return srv
		}
		lastErr = err
	}
	t.Fatalf("start embedded etcd: %v", lastErr)
	return nil
}

// Client starts a fresh member and returns its in-process client.
func Client(t testing.TB) *clientv3.Client {
	t.Helper()
	return Start(t).Client()
}

// NetClient starts a fresh member and returns a gRPC client to it, for tests
// that must exercise the networked path (leases expiring, watches cancelled).
func NetClient(t testing.TB) (*embedetcd.Server, *clientv3.Client) {
	t.Helper()
	srv := Start(t)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{srv.ClientURL()}})
	if err != nil {
		t.Fatalf("etcd client: %v", err)
	}
	t.Cleanup(func() { cli.Close() })
	return srv, cli
}
