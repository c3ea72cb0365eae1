package loadgc

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"

	"github.com/berth-project/berth/internal/testwait"
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

func TestPercentFor(t *testing.T) {
	for _, tc := range []struct {
		live uint64
		want int
	}{
		{0, Percent},
		{1 << 20, MaxPercent},
		{16 << 20, MaxPercent},
		{64 << 20, 800},
		{512 << 20, 100},
		{1 << 30, 50},
		{2 << 30, 25},
		{4 << 30, 12},
		{8 << 30, MinPercent},
	} {
		if got := percentFor(tc.live); got != tc.want {
			t.Errorf("percentFor(%d MB) = %d, want %d", tc.live>>20, got, tc.want)
		}
	}
}

// TestTargetFollowsTheLiveHeapWhileLoading: after a collection during a
// load the target allows Headroom of growth past the live heap; after
// the load the previous target is back, and a later collection leaves it.
func TestTargetFollowsTheLiveHeapWhileLoading(t *testing.T) {
	t.Setenv("GOGC", "")
	before := debug.SetGCPercent(100)
	defer debug.SetGCPercent(before)
	headroom = 4 << 20
	defer func() { headroom = Headroom }()
	live := make([][]byte, 64) // 64 MB kept: a 4 MB headroom is ~6 %
	for i := range live {
		live[i] = make([]byte, 1<<20)
	}
	restore := Tighten()
	testwait.Until(t, "GC target at the floor after a collection", func() bool {
		runtime.GC()
		return gcPercent() == MinPercent
	})
	restore()
	runtime.GC()
	runtime.GC()
	if got := gcPercent(); got != 100 {
		t.Fatalf("GC percent after the load = %d, want 100", got)
	}
	runtime.KeepAlive(live)
}

// gcPercent reads the GC target without setting it.
func gcPercent() int {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return int(s[0].Value.Uint64())
}
