package freeport

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestPortIsBelowTheEphemeralRange: every port drawn can be bound and is
// outside the range outgoing connections take their source ports from.
func TestPortIsBelowTheEphemeralRange(t *testing.T) {
	high := ephemeralStart()
	ports, err := Ports(50)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if p < low || p >= high {
			t.Errorf("port %d outside [%d, %d)", p, low, high)
		}
		if seen[p] {
			t.Errorf("port %d given twice", p)
		}
		seen[p] = true
	}
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", ports[0]))
	if err != nil {
		t.Fatalf("bind the port given: %v", err)
	}
	l.Close()
}

// TestPortIsReservedAgainstOtherProcesses: a port handed out is not
// handed out again here, and its lock file refuses another holder. flock
// locks belong to an open file description, so a second open of the
// file in this process is refused exactly as another process's would be.
func TestPortIsReservedAgainstOtherProcesses(t *testing.T) {
	p, err := Port()
	if err != nil {
		t.Fatal(err)
	}
	if reserve(p) {
		t.Fatalf("port %d reserved twice in one process", p)
	}
	f, err := os.Open(filepath.Join(os.TempDir(), fmt.Sprintf("berth-freeport-%d.lock", p)))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err == nil {
		t.Fatalf("another holder took the lock of port %d", p)
	}
}
