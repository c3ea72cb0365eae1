package loadgc

import (
	"runtime/debug"
	"testing"
)

func TestTightenAndRestore(t *testing.T) {
	t.Setenv("GOGC", "")
	before := debug.SetGCPercent(100)
	defer debug.SetGCPercent(before)
	restore := Tighten()
	if got := debug.SetGCPercent(Percent); got != Percent {
		t.Fatalf("GC percent while loading = %d, want %d", got, Percent)
	}
	restore()
	restore() // a second call changes nothing
	if got := debug.SetGCPercent(100); got != 100 {
		t.Fatalf("GC percent after restore = %d, want 100", got)
	}
}

func TestOverlappingLoadsRestoreTheFirstTarget(t *testing.T) {
	t.Setenv("GOGC", "")
	before := debug.SetGCPercent(100)
	defer debug.SetGCPercent(before)
	a, b := Tighten(), Tighten()
	a()
	if got := debug.SetGCPercent(Percent); got != Percent {
		t.Fatalf("GC percent with one load still running = %d, want %d", got, Percent)
	}
	b()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Fatalf("GC percent after both loads = %d, want 100", got)
	}
}

func TestTightenLeavesAnOperatorsGOGC(t *testing.T) {
	t.Setenv("GOGC", "300")
	before := debug.SetGCPercent(300)
	defer debug.SetGCPercent(before)
	restore := Tighten()
	defer restore()
	if got := debug.SetGCPercent(300); got != 300 {
		t.Fatalf("GC percent = %d with GOGC=300 set, want it untouched", got)
	}
}
