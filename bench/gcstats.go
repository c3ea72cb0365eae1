package bench

import (
	"fmt"
	"runtime/metrics"
)

// gcSamples are the runtime metrics a measured phase's garbage collection
// figures come from. The collector's cost at 100,000 hosts hinges on
// whether a collection of the large live heap lands in a short phase, so
// the report says how many did, what they cost, how large the live heap
// was and how much the phase allocated: enough to tell the GC's timing
// from Berth's own work when two runs disagree.
var gcSamples = []string{
	"/gc/cycles/total:gc-cycles",
	"/gc/heap/allocs:bytes",
	"/gc/heap/live:bytes",
	"/gc/heap/goal:bytes",
	"/memory/classes/heap/objects:bytes",
}

// gcSnapshot is the process's collector counters at one moment.
type gcSnapshot struct {
	cycles     uint64
	allocBytes uint64
	liveBytes  uint64 // marked live by the latest collection
	goalBytes  uint64 // the heap size the next collection starts at
	heapBytes  uint64 // heap objects now, live and dead
}

func readGC() gcSnapshot {
	s := make([]metrics.Sample, len(gcSamples))
	for i, name := range gcSamples {
		s[i].Name = name
	}
	metrics.Read(s)
	u := func(i int) uint64 {
		if s[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return s[i].Value.Uint64()
	}
	return gcSnapshot{cycles: u(0), allocBytes: u(1), liveBytes: u(2), goalBytes: u(3), heapBytes: u(4)}
}

// GCStats is the tool process's garbage collection in the measured phase
// (with -scheduler-procs, not the children's).
type GCStats struct {
	// Cycles is how many collections ended in the phase.
	Cycles uint64 `json:"cycles"`
	// ProfileShare is the collector's share of the phase's CPU profile
	// (-cpuprofile of the measured phase; 0 without one) and
	// CPUMsPerServer that share of the process CPU per server. Not the
	// runtime's /cpu/classes/gc estimate: it counts the mark workers'
	// wall time, several times their CPU on a loaded machine.
	ProfileShare   float64 `json:"profile_share,omitempty"`
	CPUMsPerServer float64 `json:"cpu_ms_per_server,omitempty"`
	// LiveMBAtStart is the live heap the last collection before the
	// phase left; HeapMBAtStart the heap's objects at the phase's start,
	// GoalMBAtStart where the next collection was due to start.
	LiveMBAtStart float64 `json:"live_mb_at_start"`
	HeapMBAtStart float64 `json:"heap_mb_at_start"`
	GoalMBAtStart float64 `json:"goal_mb_at_start"`
	// AllocMB is what the phase allocated; AllocKBPerServer per measured
	// server or move.
	AllocMB          float64 `json:"alloc_mb"`
	AllocKBPerServer float64 `json:"alloc_kb_per_server,omitempty"`
}

func gcStats(start, end gcSnapshot, measured int) *GCStats {
	const mb = 1 << 20
	g := &GCStats{
		Cycles:        end.cycles - start.cycles,
		LiveMBAtStart: float64(start.liveBytes) / mb,
		HeapMBAtStart: float64(start.heapBytes) / mb,
		GoalMBAtStart: float64(start.goalBytes) / mb,
		AllocMB:       float64(end.allocBytes-start.allocBytes) / mb,
	}
	if measured > 0 {
		g.AllocKBPerServer = float64(end.allocBytes-start.allocBytes) / 1024 / float64(measured)
	}
	return g
}

func (g *GCStats) String() string {
	cpu := ""
	if g.ProfileShare > 0 {
		cpu = fmt.Sprintf(" (%.1f%% of the profiled CPU, %.2f ms per server)", 100*g.ProfileShare, g.CPUMsPerServer)
	}
	return fmt.Sprintf("%d collections%s; live heap %.0f MB at the start (heap %.0f MB, next collection at %.0f MB); allocated %.0f MB, %.0f kB per server",
		g.Cycles, cpu, g.LiveMBAtStart, g.HeapMBAtStart, g.GoalMBAtStart, g.AllocMB, g.AllocKBPerServer)
}
