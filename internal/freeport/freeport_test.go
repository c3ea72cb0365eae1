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

// TestTakeRemovesItsLockFileAtTheEnd: a port a test took is released
// when the test is done, its lock file gone, and the port can be taken
// again (here or by another process).
func TestTakeRemovesItsLockFileAtTheEnd(t *testing.T) {
	var p int
	t.Run("taker", func(t *testing.T) {
		p = Take(t)
		if _, err := os.Stat(lockPath(p)); err != nil {
			t.Fatalf("port %d taken without its lock file: %v", p, err)
		}
	})
	if _, err := os.Stat(lockPath(p)); !os.IsNotExist(err) {
		t.Fatalf("lock file of port %d after its test: %v, want it removed", p, err)
	}
	if !reserve(p) {
		t.Fatalf("port %d released but cannot be reserved again", p)
	}
	Release(p)
	if _, err := os.Stat(lockPath(p)); !os.IsNotExist(err) {
		t.Fatalf("lock file of port %d after Release: %v, want it removed", p, err)
	}
}

// TestReleaseRaceKeepsOneHolder: a taker that opened a lock file just
// before its holder released it gets the lock of a removed file once the
// holder closes it; it must not count that as the port, or a third taker
// creating the file anew would hold the same port at once.
func TestReleaseRaceKeepsOneHolder(t *testing.T) {
	p, err := Port()
	if err != nil {
		t.Fatal(err)
	}
	late, err := os.OpenFile(lockPath(p), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer late.Close()
	Release(p)
	if err := syscall.Flock(int(late.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatalf("the released file stays locked: %v", err)
	}
	if stillNamed(late, lockPath(p)) {
		t.Fatalf("a lock on the removed file of port %d counts as holding the port", p)
	}
	if !reserve(p) {
		t.Fatalf("port %d refused to a new taker while only a removed file is locked", p)
	}
	defer Release(p)
	if stillNamed(late, lockPath(p)) {
		t.Fatalf("the removed file and the new lock file of port %d are one", p)
	}
}
