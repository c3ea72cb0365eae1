package etcdgrpc_test

import (
	"context"
	"encoding/binary"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/berth-project/berth/internal/etcdgrpc"
	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// TestNoPingsPerMessage: a client and member with Berth's settings
// exchange many small requests, one at a time, and neither end sends a
// PING (gRPC's bandwidth estimator, with dynamic windows, answered about
// every message with one).
func TestNoPingsPerMessage(t *testing.T) {
	srv := etcdtest.Start(t)
	var mu sync.Mutex
	var conns []*pingCounter
	dial := func(ctx context.Context, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", strings.TrimPrefix(addr, "http://"))
		if err != nil {
			return nil, err
		}
		pc := &pingCounter{Conn: c, sent: frameScanner{preface: true}}
		mu.Lock()
		conns = append(conns, pc)
		mu.Unlock()
		return pc, nil
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{srv.ClientURL()}, DialTimeout: 5 * time.Second,
		DialOptions: append(etcdgrpc.DialOptions(), grpc.WithContextDialer(dial))})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const requests = 100
	for i := range requests {
		if _, err := cli.Put(ctx, "/k", strings.Repeat("v", i)); err != nil {
			t.Fatal(err)
		}
		if _, err := cli.Get(ctx, "/k"); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(conns) == 0 {
		t.Fatal("the client dialled no connection through the counting dialer")
	}
	var sent, received, frames int
	for _, c := range conns {
		c.mu.Lock()
		sent += c.sent.pings
		received += c.received.pings
		frames += c.sent.frames + c.received.frames
		c.mu.Unlock()
	}
	if frames < 4*2*requests {
		t.Fatalf("saw %d HTTP/2 frames for %d requests: the counter does not see the traffic", frames, 2*requests)
	}
	if sent != 0 || received != 0 {
		t.Errorf("%d requests one at a time: the client sent %d PINGs and the member %d, want none", 2*requests, sent, received)
	}
}

// pingCounter counts the HTTP/2 frames, and the PINGs (not their ACKs),
// each way on a client's connection.
type pingCounter struct {
	net.Conn
	mu             sync.Mutex
	sent, received frameScanner
}

func (c *pingCounter) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.sent.feed(p)
	c.mu.Unlock()
	return c.Conn.Write(p)
}

func (c *pingCounter) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.mu.Lock()
	c.received.feed(p[:n])
	c.mu.Unlock()
	return n, err
}

// frameScanner walks an HTTP/2 byte stream's frames (after the client's
// connection preface, when preface is set).
type frameScanner struct {
	preface bool
	buf     []byte
	frames  int
	pings   int
}

const (
	clientPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
	framePing     = 0x6
	flagAck       = 0x1
)

func (s *frameScanner) feed(p []byte) {
	s.buf = append(s.buf, p...)
	if s.preface {
		if len(s.buf) < len(clientPreface) {
			return
		}
		s.buf, s.preface = s.buf[len(clientPreface):], false
	}
	for len(s.buf) >= 9 {
		length := int(binary.BigEndian.Uint32(append([]byte{0}, s.buf[:3]...)))
		if len(s.buf) < 9+length {
			return
		}
		s.frames++
		if s.buf[3] == framePing && s.buf[4]&flagAck == 0 {
			s.pings++
		}
		s.buf = s.buf[9+length:]
	}
}
