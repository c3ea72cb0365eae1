package httpapi

import (
	"bufio"
	"crypto/tls"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// echoServer serves, on Listener, a handler that reports the method, path,
// body and whether the length was refused.
func echoServer(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		_, bad := r.Header[badContentLengthHeader]
		_ = json.NewEncoder(w).Encode(map[string]any{"path": r.URL.Path, "body": string(b), "bad": bad})
	})}
	go srv.Serve(Listener(l))
	t.Cleanup(func() { srv.Close() })
	return l.Addr().String()
}

type echo struct {
	Path string `json:"path"`
	Body string `json:"body"`
	Bad  bool   `json:"bad"`
}

func readEcho(t *testing.T, br *bufio.Reader) (int, echo) {
	t.Helper()
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("read response: %v", err)
	}
	defer resp.Body.Close()
	var e echo
	if resp.StatusCode == 200 {
		if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
			t.Fatal(err)
		}
	}
	return resp.StatusCode, e
}

func TestListenerKeepsFramingAcrossRequests(t *testing.T) {
	addr := echoServer(t)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	// Three pipelined requests, the bodies holding what looks like heads,
	// written in small pieces so heads and bodies straddle reads.
	raw := "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 41\r\n\r\n" +
		"GET /evil HTTP/1.1\r\nContent-Length: x\r\n\r\n" +
		"POST /b HTTP/1.1\r\nHost: x\r\ncontent-length:   3  \r\n\r\nabc" +
		"GET /c HTTP/1.1\r\nHost: x\r\n\r\n"
	go func() {
		for i := 0; i < len(raw); i += 7 {
			_, _ = conn.Write([]byte(raw[i:min(i+7, len(raw))]))
		}
	}()
	br := bufio.NewReader(conn)
	want := []echo{
		{Path: "/a", Body: "GET /evil HTTP/1.1\r\nContent-Length: x\r\n\r\n"},
		{Path: "/b", Body: "abc"},
		{Path: "/c"},
	}
	for i, w := range want {
		code, got := readEcho(t, br)
		if code != 200 || got != w {
			t.Fatalf("request %d: %d %+v, want 200 %+v", i, code, got, w)
		}
	}
}

func TestListenerRenamesNonIntegerContentLength(t *testing.T) {
	for _, tc := range []struct {
		desc, length string
		bad          bool
	}{
		{"words", "hi mom", true},
		{"negative", "-1", true},
		{"signed", "+5", true},
		{"fraction", "1.5", true},
		{"empty means none", "", false},
		{"integer", "0", false},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			addr := echoServer(t)
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
			if _, err := io.WriteString(conn, "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: "+tc.length+"\r\n\r\n"); err != nil {
				t.Fatal(err)
			}
			code, got := readEcho(t, bufio.NewReader(conn))
			if code != 200 || got.Bad != tc.bad || got.Path != "/x" {
				t.Fatalf("got %d %+v, want 200 with bad=%v", code, got, tc.bad)
			}
		})
	}
}

// Over TLS the wrapper sees ciphertext and must leave it alone.
func TestListenerPassesTLSThrough(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		_, _ = io.WriteString(w, "got "+string(b))
	}))
	srv.Listener = Listener(srv.Listener)
	srv.StartTLS()
	defer srv.Close()
	cli := srv.Client()
	cli.Transport.(*http.Transport).TLSClientConfig = &tls.Config{InsecureSkipVerify: true}
	resp, err := cli.Post(srv.URL, "text/plain", strings.NewReader("hello"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if string(b) != "got hello" {
		t.Fatalf("got %q", b)
	}
}

// The Placement API answers the renamed header with Placement's 400 and
// closes the connection.
func TestNonIntegerContentLengthAnswer(t *testing.T) {
	svc := newHTTPService(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: New(svc, nil, Options{})}
	go hs.Serve(Listener(l))
	t.Cleanup(func() { hs.Close() })
	conn, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	_, _ = io.WriteString(conn, "POST /resource_providers HTTP/1.1\r\nHost: x\r\nX-Auth-Token: admin\r\n"+
		"Content-Type: application/json\r\nContent-Length: hi mom\r\n\r\n{\"name\": \"x\"}")
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Errors []struct {
			Status int    `json:"status"`
			Detail string `json:"detail"`
		} `json:"errors"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 400 || len(body.Errors) != 1 || !strings.Contains(body.Errors[0].Detail, "content-length header must be an integer") {
		t.Fatalf("got %d %+v", resp.StatusCode, body)
	}
	if !resp.Close {
		t.Fatal("connection not closed after a refused Content-Length")
	}
}
