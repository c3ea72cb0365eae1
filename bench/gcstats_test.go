package bench

import (
	"runtime"
	"strings"
	"testing"
)

// TestGCStats reads the collector's counters around a collection and an
// allocation: every metric name must be one the runtime knows (an unknown
// one reads as zero and the report's GC row would say nothing true).
func TestGCStats(t *testing.T) {
	runtime.GC()
	start := readGC()
	if start.cycles == 0 || start.liveBytes == 0 || start.goalBytes == 0 || start.heapBytes == 0 {
		t.Fatalf("after a collection, a counter reads zero: %+v", start)
	}
	var keep [][]byte
	for i := 0; i < 64; i++ {
		keep = append(keep, make([]byte, 64<<10))
	}
	runtime.GC()
	runtime.KeepAlive(keep)
	g := gcStats(start, readGC(), 4)
	if g.Cycles < 1 {
		t.Errorf("cycles %d: want the forced collection counted", g.Cycles)
	}
	if g.AllocMB < 4 || g.AllocKBPerServer < 1024 {
		t.Errorf("allocated %.1f MB, %.0f kB per server: want at least the 4 MB allocated", g.AllocMB, g.AllocKBPerServer)
	}
	if s := g.String(); !strings.Contains(s, "collections") || strings.Contains(s, "profiled") {
		t.Errorf("row %q: want collections and no profile share without a profile", s)
	}
}
