package gctune

import (
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"

	"github.com/berth-project/berth/internal/testwait"
)

// settings reads the process's GC percent and memory limit.
func settings() (percent int, limit int64) {
	percent = debug.SetGCPercent(-1)
	debug.SetGCPercent(percent)
	return percent, debug.SetMemoryLimit(-1)
}

func TestApply(t *testing.T) {
	for _, tc := range []struct {
		desc            string
		env             map[string]string
		policy          Policy
		wantPercent     int
		wantLimit       int64 // checked before any collection moves it
		wantPercentFrom string
		wantLimitFrom   string
		wantBound       bool
	}{
		{desc: "config percent, no limit: the bound runs", policy: Policy{GCPercent: 400},
			wantPercent: 400, wantLimit: math.MaxInt64, wantPercentFrom: "config", wantLimitFrom: "none", wantBound: true},
		{desc: "config percent and limit", policy: Policy{GCPercent: 200, MemoryLimit: 2 << 30},
			wantPercent: 200, wantLimit: 2 << 30, wantPercentFrom: "config", wantLimitFrom: "config", wantBound: true},
		{desc: "Go's default percent needs no bound", policy: Policy{GCPercent: 100},
			wantPercent: 100, wantLimit: math.MaxInt64, wantPercentFrom: "config", wantLimitFrom: "none"},
		{desc: "GOGC wins and turns the bound off", env: map[string]string{"GOGC": "150"}, policy: Policy{GCPercent: 400},
			wantPercent: 150, wantLimit: math.MaxInt64, wantPercentFrom: "GOGC", wantLimitFrom: "none"},
		{desc: "GOMEMLIMIT wins", env: map[string]string{"GOMEMLIMIT": "1GiB"}, policy: Policy{GCPercent: 400, MemoryLimit: 2 << 30},
			wantPercent: 400, wantLimit: 1 << 30, wantPercentFrom: "config", wantLimitFrom: "GOMEMLIMIT"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Setenv("GOGC", "")
			t.Setenv("GOMEMLIMIT", "")
			beforePercent, beforeLimit := settings()
			// The runtime reads the variables at start; a test sets
			// what they would have set.
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			if tc.env["GOGC"] != "" {
				debug.SetGCPercent(tc.wantPercent)
			}
			if tc.env["GOMEMLIMIT"] != "" {
				debug.SetMemoryLimit(tc.wantLimit)
			}
			a := Apply(tc.policy, nil)
			percent, limit := settings()
			a.Restore()
			if percent != tc.wantPercent || limit != tc.wantLimit {
				t.Errorf("after Apply: percent %d, limit %d; want %d, %d", percent, limit, tc.wantPercent, tc.wantLimit)
			}
			if a.GCPercentFrom != tc.wantPercentFrom || a.MemoryLimitFrom != tc.wantLimitFrom || a.BoundHeapGrowth != tc.wantBound {
				t.Errorf("Applied = %+v; want from %s / %s, bound %v", a, tc.wantPercentFrom, tc.wantLimitFrom, tc.wantBound)
			}
			debug.SetGCPercent(beforePercent)
			debug.SetMemoryLimit(beforeLimit)
			if p, l := settings(); tc.env == nil && (p != beforePercent || l != beforeLimit) {
				t.Errorf("after Restore: %d, %d; want %d, %d", p, l, beforePercent, beforeLimit)
			}
		})
	}
}

// TestBoundKeepsALargeHeapAtGOGC100sGrowth: with a live heap larger than
// the headroom, the heap goal after a collection is about twice the live
// heap (Go's default), not the five times GCPercent 400 alone would allow.
func TestBoundKeepsALargeHeapAtGOGC100sGrowth(t *testing.T) {
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	beforePercent, beforeLimit := settings()
	defer func() {
		debug.SetGCPercent(beforePercent)
		debug.SetMemoryLimit(beforeLimit)
	}()
	defer func(h uint64) { headroom = h }(headroom)
	headroom = 4 << 20

	live := make([][]byte, 64) // 64 MiB kept: well past the headroom
	for i := range live {
		live[i] = make([]byte, 1<<20)
	}
	a := Apply(Policy{GCPercent: 400}, nil)
	defer a.Restore()
	runtime.GC()
	goal := func() uint64 {
		s := []metrics.Sample{{Name: "/gc/heap/goal:bytes"}}
		metrics.Read(s)
		return s[0].Value.Uint64()
	}
	// The cleanup runs on its own after the collection: wait for the
	// limit it sets, then for a collection under it.
	testwait.Until(t, "the bound sets a memory limit", func() bool {
		_, l := settings()
		return l != math.MaxInt64
	})
	runtime.GC()
	g := goal()
	runtime.KeepAlive(live)
	// 64 MiB live: GOGC=400 alone would aim at 320 MiB; the bound at
	// twice the live heap plus the runtime's other memory.
	if g > 160<<20 {
		t.Fatalf("heap goal %d MiB with 64 MiB live; want at most about twice the live heap", g>>20)
	}
	if g < 100<<20 {
		t.Fatalf("heap goal %d MiB with 64 MiB live; the bound should allow GOGC=100's growth", g>>20)
	}
}

// TestBoundLeavesASmallHeapThePercent: a live heap well under the
// headroom collects at the configured percent, not earlier.
func TestBoundLeavesASmallHeapThePercent(t *testing.T) {
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	beforePercent, beforeLimit := settings()
	defer func() {
		debug.SetGCPercent(beforePercent)
		debug.SetMemoryLimit(beforeLimit)
	}()
	a := Apply(Policy{GCPercent: 400}, nil)
	defer a.Restore()
	runtime.GC()
	testwait.Until(t, "the bound sets a memory limit", func() bool {
		_, l := settings()
		return l != math.MaxInt64
	})
	_, l := settings()
	if l < Headroom {
		t.Fatalf("memory limit %d MiB with a small heap; want at least the %d MiB headroom", l>>20, Headroom>>20)
	}
}

// TestRestoreStopsTheBound: after Restore no later collection moves the
// limit again: a sentinel limit set after Restore survives collections
// whose cleanups (a probe's, queued with the bound's) have run.
func TestRestoreStopsTheBound(t *testing.T) {
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	beforePercent, beforeLimit := settings()
	defer func() {
		debug.SetGCPercent(beforePercent)
		debug.SetMemoryLimit(beforeLimit)
	}()
	a := Apply(Policy{GCPercent: 400}, nil)
	runtime.GC()
	testwait.Until(t, "the bound sets a memory limit", func() bool {
		_, l := settings()
		return l != math.MaxInt64
	})
	a.Restore()
	const sentinel = 7 << 30
	debug.SetMemoryLimit(sentinel)
	for range 3 {
		ran := make(chan struct{})
		runtime.AddCleanup(new([64]byte), func(ch chan struct{}) { close(ch) }, ran)
		testwait.Until(t, "a collection's cleanups run", func() bool {
			runtime.GC()
			select {
			case <-ran:
				return true
			default:
				return false
			}
		})
	}
	if _, l := settings(); l != sentinel {
		t.Fatalf("memory limit %d after Restore and three collections; want the %d set after Restore", l, int64(sentinel))
	}
}
