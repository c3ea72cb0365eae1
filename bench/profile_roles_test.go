package bench

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"syscall"
	"testing"
	"time"

	"github.com/berth-project/berth/internal/rolelabel"
)

// startCPUProfile starts the process's CPU profile into a temporary
// file; stop ends it and closes the file, whose path it returns first.
func startCPUProfile(t *testing.T) (path string, stop func()) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "cpu.prof")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		t.Fatal(err)
	}
	return path, func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestProfileRoleShares profiles CPU burnt under a tool role and reads
// the share back: the report's "less the tool" figure rests on it.
func TestProfileRoleShares(t *testing.T) {
	path, stop := startCPUProfile(t)
	// CPU, not wall time: 400 ms of it, however loaded the machine.
	start := processCPU(t)
	var sink uint64
	rolelabel.Do(context.Background(), "bench recorder", func(context.Context) {
		for i := uint64(0); processCPU(t)-start < 400*time.Millisecond; i++ {
			for j := uint64(0); j < 100000; j++ {
				sink += i ^ j
			}
		}
	})
	stop()
	_ = sink
	byRole, err := profileCPUByRole(path)
	if err != nil {
		t.Fatal(err)
	}
	if byRole["bench recorder"] <= 0 {
		t.Fatalf("no CPU under the recorder's role: %v", byRole)
	}
	s, err := profileRoleShares(path)
	if err != nil {
		t.Fatal(err)
	}
	if s.Tool < 0.5 || s.Tool > 1 || s.Fleet != 0 {
		t.Errorf("shares %+v of %v: want most of it the tool's and none the fleet's", s, byRole)
	}
}

func processCPU(t *testing.T) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func TestProfileRoleSharesRefusesOtherFiles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "not.prof")
	if err := os.WriteFile(path, []byte("not a profile"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := profileRoleShares(path); err == nil {
		t.Fatal("read a file that is not a profile")
	}
}

// TestProfileGCShare profiles forced collections of a heap full of
// pointers and reads their share back: the report's GC row rests on it.
func TestProfileGCShare(t *testing.T) {
	path, stop := startCPUProfile(t)
	// A linked list: every collection marks all of it.
	type node struct{ next *node }
	var head *node
	for i := 0; i < 1<<20; i++ {
		head = &node{next: head}
	}
	start := processCPU(t)
	for processCPU(t)-start < 400*time.Millisecond {
		runtime.GC()
	}
	runtime.KeepAlive(head)
	stop()
	s, err := profileRoleShares(path)
	if err != nil {
		t.Fatal(err)
	}
	if s.GC < 0.3 || s.GC > 1 {
		t.Errorf("GC share %.2f of %v: want most of a profile of forced collections", s.GC, s.Total)
	}
}
