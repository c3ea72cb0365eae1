package stack

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/berth-project/berth/configs"
	"github.com/berth-project/berth/internal/httpserve"
	"github.com/berth-project/berth/internal/logtest"
)

// TestListenersServeUnderTheHTTPLimits: the status listener and a role's
// listener (Serve, as the compute API, Placement, the scheduler and
// identity are served) take the config's http block: a request head cut
// off at read_header_timeout, bodies bounded by max_body_bytes, and idle
// connections closed for new ones at max_connections.
func TestListenersServeUnderTheHTTPLimits(t *testing.T) {
	const headerTimeout, maxConns = 300 * time.Millisecond, 4
	cfg := configs.Defaults()
	cfg.Status.Bind = "127.0.0.1:0"
	cfg.HTTP.ReadHeaderTimeout = headerTimeout
	cfg.HTTP.MaxBodyBytes = 64 << 10
	cfg.HTTP.MaxConnections = maxConns
	s := New(cfg, hclog.NewNullLogger())
	t.Cleanup(s.Stop)
	if err := s.ServeStatus(); err != nil {
		t.Fatal(err)
	}
	echoLen := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if _, ok := httpserve.BodyTooLarge(err); ok {
			w.WriteHeader(http.StatusRequestEntityTooLarge)
			return
		}
		fmt.Fprint(w, len(b))
	})
	if err := s.Serve("role", "127.0.0.1:0", echoLen); err != nil {
		t.Fatal(err)
	}
	addrs := map[string]string{}
	for _, ep := range s.Endpoints {
		addrs[ep[0]] = strings.TrimPrefix(ep[1], "http://")
	}

	for _, name := range []string{"status", "role"} {
		t.Run(name+" cuts a slow head off", func(t *testing.T) {
			conn, err := net.Dial("tcp", addrs[name])
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			start := time.Now()
			_ = conn.SetDeadline(start.Add(headerTimeout + 5*time.Second))
			if _, err := io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: berth\r\n"); err != nil {
				t.Fatal(err)
			}
			_, err = conn.Read(make([]byte, 1))
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatalf("the head was still awaited after %v (read_header_timeout %v)", time.Since(start), headerTimeout)
			}
		})
		t.Run(name+" closes idle connections at max_connections", func(t *testing.T) {
			var conns []net.Conn
			defer func() {
				for _, c := range conns {
					c.Close()
				}
			}()
			for range maxConns + 1 {
				conn, err := net.DialTimeout("tcp", addrs[name], 5*time.Second)
				if err != nil {
					t.Fatal(err)
				}
				conns = append(conns, conn)
				_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
				if _, err := io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: berth\r\n\r\n"); err != nil {
					t.Fatal(err)
				}
				resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
				if err != nil {
					t.Fatalf("client %d of %d at max_connections %d: %v", len(conns), maxConns+1, maxConns, err)
				}
				resp.Body.Close()
			}
			// One of the first clients, idle, made way for the last: it
			// is closed. Which one is httpserve's to test
			// (TestTheLongestIdleConnectionMakesWay): from here the first
			// is idle longest only if the server marked it idle before
			// the last arrived, which net/http does after writing the
			// answer this client has already read, so under load the
			// first can still count as busy and another goes instead.
			closed := make(chan int, maxConns)
			for i, c := range conns[:maxConns] {
				go func() {
					if n, err := c.Read(make([]byte, 1)); n == 0 && errors.Is(err, io.EOF) {
						closed <- i
					}
				}()
			}
			select {
			case <-closed:
			case <-time.After(10 * time.Second):
				t.Errorf("none of the %d idle connections was closed for client %d", maxConns, maxConns+1)
			}
		})
	}
	t.Run("role bounds bodies", func(t *testing.T) {
		cli := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
		resp, err := cli.Post("http://"+addrs["role"]+"/", "application/json", strings.NewReader(strings.Repeat("x", 64<<10+1)))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Errorf("a body over max_body_bytes: %s, want 413", resp.Status)
		}
	})
}

// TestConnectionCap: a listener's cap is max_connections, or a tenth of
// the open-file limit when that is smaller, said once in the log.
func TestConnectionCap(t *testing.T) {
	for _, tc := range []struct {
		desc      string
		openFiles uint64
		want      int
		warn      bool
	}{
		{desc: "limit unknown", openFiles: 0, want: 1024},
		{desc: "a tenth of 65,536 is more", openFiles: 65536, want: 1024},
		{desc: "a tenth of 1,024 is less", openFiles: 1024, want: 102, warn: true},
		{desc: "a tiny limit still serves", openFiles: 5, want: 1, warn: true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			var out logtest.Buffer
			s := New(configs.Defaults(), hclog.New(&hclog.LoggerOptions{Output: &out}))
			t.Cleanup(s.Stop)
			s.openFiles = tc.openFiles
			for range 2 {
				if got := s.connectionCap(); got != tc.want {
					t.Errorf("connectionCap() = %d, want %d", got, tc.want)
				}
			}
			want := 0
			if tc.warn {
				want = 1
			}
			if n := strings.Count(out.String(), "max_connections } lowered"); n != want {
				t.Errorf("warned %d times, want %d; log:\n%s", n, want, out.String())
			}
		})
	}
}
