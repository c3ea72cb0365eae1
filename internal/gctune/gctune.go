package gctune

import (
	"math"
	"os"
	"runtime/debug"

	"github.com/hashicorp/go-hclog"
)

const (
	// DefaultGCPercent is the GC target of a Berth process unless the
	// config or GOGC says otherwise (measured: docs/operations.md,
	// "Garbage collection").
	DefaultGCPercent = 400
	// MinGCPercent is the lowest the config accepts: below it the
	// collector runs almost without pause.
	MinGCPercent = 10
	// Headroom is the heap growth a collection always allows past the
	// live heap, when the policy bounds it (see the package doc): what
	// a 10,000-host boot's allocation needs between collections at
	// DefaultGCPercent with room to spare.
	Headroom = 512 << 20
)

// Policy is the runtime block of a config.
type Policy struct {
	// GCPercent is the GC target, as GOGC: a collection starts when the
	// heap has grown this percent past the live heap.
	GCPercent int
	// MemoryLimit is a soft limit on the process's Go memory in bytes,
	// as GOMEMLIMIT; 0 sets none (the bound of the package doc applies).
	MemoryLimit int64
}

// Default is the policy of a config without a runtime block.
func Default() Policy { return Policy{GCPercent: DefaultGCPercent} }

// Applied says what Apply set and where each value came from.
type Applied struct {
	GCPercent         int
	GCPercentFrom     string // "config" or "GOGC"
	MemoryLimit       int64  // math.MaxInt64: none
	MemoryLimitFrom   string // "config", "GOMEMLIMIT" or "none"
	BoundHeapGrowth   bool   // the moving limit of the package doc runs
	stopBound, undone func()
}

// Apply sets p for the whole process and logs it. It must run before the
// process's roles start (before any loadgc window opens). Restore undoes
// it (tests, and a command that returns to its caller).
func Apply(p Policy, log hclog.Logger) *Applied {
	a := &Applied{GCPercentFrom: "config", MemoryLimitFrom: "config"}
	prevPercent := debug.SetGCPercent(-1)
	debug.SetGCPercent(prevPercent)
	prevLimit := debug.SetMemoryLimit(-1)
	envGOGC, envLimit := os.Getenv("GOGC") != "", os.Getenv("GOMEMLIMIT") != ""

	if envGOGC {
		a.GCPercent, a.GCPercentFrom = prevPercent, "GOGC"
	} else {
		a.GCPercent = p.GCPercent
		debug.SetGCPercent(p.GCPercent)
	}
	switch {
	case envLimit:
		a.MemoryLimit, a.MemoryLimitFrom = prevLimit, "GOMEMLIMIT"
	case p.MemoryLimit > 0:
		a.MemoryLimit = p.MemoryLimit
		debug.SetMemoryLimit(p.MemoryLimit)
	default:
		a.MemoryLimit, a.MemoryLimitFrom = math.MaxInt64, "none"
	}
	// The bound undoes the memory cost of a percent above Go's default;
	// an operator's GOGC or GOMEMLIMIT is theirs to own.
	if !envGOGC && !envLimit && p.GCPercent > 100 {
		a.BoundHeapGrowth = true
		a.stopBound = startBound(p.MemoryLimit)
	}
	a.undone = func() {
		if a.stopBound != nil {
			a.stopBound()
		}
		debug.SetGCPercent(prevPercent)
		debug.SetMemoryLimit(prevLimit)
	}
	if log != nil {
		limit := "none"
		if a.MemoryLimit != math.MaxInt64 {
			limit = FormatSize(a.MemoryLimit)
		}
		log.Info("garbage collector", "gc_percent", a.GCPercent, "gc_percent_from", a.GCPercentFrom,
			"memory_limit", limit, "memory_limit_from", a.MemoryLimitFrom, "bound_heap_growth", a.BoundHeapGrowth)
	}
	return a
}

// Restore puts back the GC percent and memory limit Apply found.
func (a *Applied) Restore() {
	if a != nil && a.undone != nil {
		a.undone()
		a.undone = nil
	}
}
