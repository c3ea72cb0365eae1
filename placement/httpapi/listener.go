package httpapi

import (
	"bytes"
	"net"
	"net/http"
	"strconv"
	"strings"
)

// Placement answers a request whose Content-Length is not an integer with
// its own 400 ("content-length header must be an integer", JSON, request
// id, microversion headers). Go's net/http refuses such a request while
// parsing it, before any handler runs, with a bare "400 Bad Request" and
// no hook to change that. Listener closes the gap one layer down: its
// connections read each HTTP/1.x request head as it streams in and rename
// a Content-Length header that net/http would refuse to
// badContentLengthHeader. The request then reaches the API without a body,
// dispatch answers Placement's 400 and closes the connection (the body
// bytes that followed were never framed, so nothing more on it can be
// trusted).
//
// Only the heads are inspected: a body of known length is counted past,
// and a connection that is not plain HTTP/1.x (TLS, HTTP/2's preface) or
// that sends a chunked body is passed through untouched from then on.

// badContentLengthHeader carries the refused Content-Length value to the
// handler. A client sending it itself only earns the same 400.
const badContentLengthHeader = "X-Berth-Invalid-Content-Length"

// maxInspectedHead bounds the bytes held while a head is incomplete; it is
// net/http's default MaxHeaderBytes plus its slack. A longer head passes
// through for net/http to refuse.
const maxInspectedHead = http.DefaultMaxHeaderBytes + 4096

// Listener wraps l so that the Placement API can answer a non-integer
// Content-Length as Placement does. Serve the API's http.Server on it.
func Listener(l net.Listener) net.Listener { return &clListener{Listener: l} }

type clListener struct{ net.Listener }

func (l *clListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &clConn{Conn: c}, nil
}

// clConn states.
const (
	clHead        = iota // reading a request head
	clBody               // counting past a body of known length
	clPassthrough        // no longer inspecting
)

type clConn struct {
	net.Conn
	state    int
	head     []byte // an incomplete head held back
	bodyLeft int64
	out      []byte // inspected bytes not yet returned to the reader
	buf      []byte // read buffer while inspecting heads
}

func (c *clConn) Read(p []byte) (int, error) {
	for len(c.out) == 0 {
		if c.state == clPassthrough && len(c.head) == 0 {
			return c.Conn.Read(p)
		}
		if c.state == clBody && len(c.head) == 0 && len(p) > 0 {
			// A body of known length goes straight to the reader.
			n, err := c.Conn.Read(p[:min(int64(len(p)), c.bodyLeft)])
			if c.bodyLeft -= int64(n); c.bodyLeft == 0 {
				c.state = clHead
			}
			return n, err
		}
		if c.buf == nil {
			c.buf = make([]byte, 4096)
		}
		buf := c.buf
		n, err := c.Conn.Read(buf)
		if n > 0 {
			c.feed(buf[:n])
		}
		if err != nil {
			if len(c.out) == 0 && len(c.head) > 0 {
				// The connection ended inside a head: hand over what
				// there is and let net/http judge it.
				c.out, c.head = c.head, nil
			}
			if len(c.out) == 0 {
				return 0, err
			}
			break
		}
	}
	n := copy(p, c.out)
	c.out = c.out[n:]
	return n, nil
}

// feed runs newly read bytes through the state machine, appending what
// may be released to c.out.
func (c *clConn) feed(b []byte) {
	for len(b) > 0 {
		switch c.state {
		case clPassthrough:
			c.out = append(c.out, c.head...)
			c.head = nil
			c.out = append(c.out, b...)
			return
		case clBody:
			n := int64(len(b))
			if n > c.bodyLeft {
				n = c.bodyLeft
			}
			c.out = append(c.out, b[:n]...)
			b = b[n:]
			c.bodyLeft -= n
			if c.bodyLeft == 0 {
				c.state = clHead
			}
		case clHead:
			if len(c.head) == 0 {
				// Blank lines between requests are allowed; skip them
				// through untouched.
				i := 0
				for i < len(b) && (b[i] == '\r' || b[i] == '\n') {
					i++
				}
				c.out = append(c.out, b[:i]...)
				b = b[i:]
				if len(b) == 0 {
					return
				}
				if b[0] < 'A' || b[0] > 'Z' {
					c.state = clPassthrough // TLS, or not HTTP/1.x
					continue
				}
			}
			c.head = append(c.head, b...)
			b = nil
			end := bytes.Index(c.head, []byte("\r\n\r\n"))
			if end < 0 {
				if len(c.head) > maxInspectedHead {
					c.state = clPassthrough
				}
				continue
			}
			head, rest := c.head[:end+4], c.head[end+4:]
			c.head = nil
			c.out = append(c.out, c.inspect(head)...)
			b = rest
		}
	}
}

// inspect looks at one complete request head: it decides how the body
// that follows is framed and renames a Content-Length net/http would
// refuse.
func (c *clConn) inspect(head []byte) []byte {
	lines := strings.Split(string(head[:len(head)-4]), "\r\n")
	if strings.HasPrefix(lines[0], "PRI * HTTP/2") {
		c.state = clPassthrough
		return head
	}
	var length int64
	bad, chunked, edited := false, false, false
	for i, l := range lines[1:] {
		name, val, ok := strings.Cut(l, ":")
		if !ok {
			continue
		}
		switch {
		case strings.EqualFold(strings.TrimSpace(name), "Transfer-Encoding"):
			chunked = true
		case strings.EqualFold(strings.TrimSpace(name), "Content-Length"):
			v := strings.TrimSpace(val)
			if v == "" {
				// Placement reads an empty length as none; net/http
				// refuses it. Drop the line.
				lines[i+1] = ""
				edited = true
				continue
			}
			n, err := strconv.ParseUint(v, 10, 63)
			if err != nil {
				lines[i+1] = badContentLengthHeader + ":" + val
				bad = true
				continue
			}
			length = int64(n)
		}
	}
	switch {
	case bad, chunked:
		// After a refused length nothing that follows can be framed;
		// the handler closes the connection. A chunked body is left to
		// net/http.
		c.state = clPassthrough
	case length > 0:
		c.state, c.bodyLeft = clBody, length
	}
	if !bad && !edited {
		return head
	}
	var b strings.Builder
	for _, l := range lines {
		if l != "" {
			b.WriteString(l + "\r\n")
		}
	}
	b.WriteString("\r\n")
	return []byte(b.String())
}
