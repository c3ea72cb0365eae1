// Package freeport finds a TCP port on 127.0.0.1 to give a process or
// an etcd member that must be told its port before it binds (peers must
// know each other's URLs), where listening on port 0 is not possible.
//
// The port is drawn at random below the kernel's ephemeral range
// (/proc/sys/net/ipv4/ip_local_port_range, 32768 up by default), never
// from it. The usual trick, listen on port 0 and close, returns an
// ephemeral port, which is soon the source port of some outgoing
// connection (each etcd client dials several); the bind that follows
// then fails with "address already in use", as it did on a loaded
// machine. Below the range only another caller of Port can take it:
// within a process a port is handed out once, and across processes (go
// test runs packages in parallel, each drawing ports for its clusters)
// each port drawn is reserved by an exclusive lock on a file named after
// it in the temp directory, held until the port is released or the
// process exits, so two test binaries never get the same port however
// close their draws (a random draw alone collided about once in a few CI
// runs).
//
// Release (Take does it at the test's end) removes the lock file, so the
// temp directory does not fill with one file per port ever drawn (there
// were thousands). Removing a lock file races with a taker that opened it
// just before: that taker would lock the removed file while a third
// process creates and locks a new one under the same name, and both would
// hold the port. So the holder unlinks the file before it unlocks it, and
// a taker that got the lock keeps it only if the name still leads to the
// file it locked.
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// low is the bottom of the ports drawn from: above the well-known and
// registered services a test machine may run (etcd's 2379, Keystone's
// 5000, Nova's 8774, Glance's 9292...).
const low = 20000

// reserved are the ports this process has handed out, each with the
// lock file that keeps other processes off it (open until exit).
var reserved struct {
	sync.Mutex
	ports map[int]*os.File
}

// reserve takes port for this process: false when this process or
// another live one already holds it.
func reserve(port int) bool {
	reserved.Lock()
	defer reserved.Unlock()
	if reserved.ports[port] != nil {
		return false
	}
	f, err := os.OpenFile(lockPath(port), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return false
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return false
	}
	if !stillNamed(f, lockPath(port)) {
		f.Close() // its holder released it while we opened it: draw again
		return false
	}
	if reserved.ports == nil {
		reserved.ports = map[int]*os.File{}
	}
	reserved.ports[port] = f
	return true
}

// lockPath is the file whose lock reserves port across processes.
func lockPath(port int) string {
	return filepath.Join(os.TempDir(), fmt.Sprintf("berth-freeport-%d.lock", port))
}

// stillNamed reports whether path still names the open file f: false once
// its holder unlinked it (and perhaps another created a new file there).
func stillNamed(f *os.File, path string) bool {
	held, err := f.Stat()
	if err != nil {
		return false
	}
	named, err := os.Stat(path)
	return err == nil && os.SameFile(held, named)
}

// Release gives ports back: their lock files are removed and unlocked, in
// that order (see the package doc), and this process may hand them out
// again. Call it once nothing of the caller listens on them any more; a
// port not reserved here is ignored.
func Release(ports ...int) {
	reserved.Lock()
	defer reserved.Unlock()
	for _, port := range ports {
		f := reserved.ports[port]
		if f == nil {
			continue
		}
		_ = os.Remove(lockPath(port)) // best effort: a file left is only clutter
		f.Close()
		delete(reserved.ports, port)
	}
}

// TB is the part of testing.TB that Take needs.
type TB interface {
	Helper()
	Fatal(args ...any)
	Cleanup(func())
}

// Take is Port for a test: it fails the test when no port is found and
// releases the port at the test's end, after the cleanups registered
// after it (they run last-registered first): what closes the port's
// listener, registered when it is started on the port, runs before.
func Take(t TB) int {
	t.Helper()
	port, err := Port()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { Release(port) })
	return port
}

// Port returns a port on 127.0.0.1 that was free a moment ago and that
// no other caller of Port, in this process or another, is given until it
// is released or this process exits.
func Port() (int, error) {
	high := ephemeralStart()
	for try := 0; try < 100; try++ {
		port := low + rand.IntN(high-low)
		if !reserve(port) {
			continue // handed out already, here or in another process
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue // another listener has it: draw again
		}
		l.Close()
		return port, nil
	}
	return 0, fmt.Errorf("free port: none of 100 drawn in [%d, %d) could be bound on 127.0.0.1", low, high)
}

// Ports returns n distinct ports, each free a moment ago.
func Ports(n int) ([]int, error) {
	seen := map[int]bool{}
	out := make([]int, 0, n)
	for len(out) < n {
		p, err := Port()
		if err != nil {
			return nil, err
		}
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out, nil
}

// ephemeralStart is the first port the kernel gives outgoing
// connections: 32768 when it cannot be read or leaves too little room
// above low.
func ephemeralStart() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 32768
	}
	n, err := strconv.Atoi(f[0])
	if err != nil || n < low+1000 {
		return 32768
	}
	return n
}
