// Package gctune sets the garbage collector's policy of a long-running
// Berth process (`berth run ...`, `berth dev`, `berth bench`'s in-process
// Berth) from the config's runtime block.
//
// Why: a Berth process allocates fast and keeps little. In the 10,000-host
// boot (issue 20) the live heap stays near 100-250 MB while the process
// allocates gigabytes of short-lived JSON, protobuf and etcd copies; with
// Go's default GOGC of 100 the collector ran about every 100 MB of
// allocation and took ~24% of the process's CPU. A higher GC percent
// collects less often for the same work (the cost of a collection is the
// live heap it marks, not the garbage): GOGC=400 took the boot from 2.2 to
// 1.9 ms of process CPU per server. DefaultGCPercent is what the
// measurements in docs/operations.md chose.
//
// The price of a higher percent is memory: the heap may grow to
// (1 + percent/100) times the live heap. For a small live heap that is
// cheap; for a scheduler of 100,000 hosts (a live heap of a GiB) it would
// be several GiB. So unless the operator sets GOMEMLIMIT, the policy also
// bounds the heap's growth after each collection to at most
// max(live, Headroom) past the live heap, with a soft memory limit it moves
// after every collection: a small heap gets the whole percent, a large one
// the growth of GOGC=100, never more. The memory limit only ever lowers
// the collector's goal, so a process whose live heap is past Headroom
// uses no more memory than Go's default would.
//
// Package loadgc tightens the GC percent while a role loads its state from
// etcd (a cold start) and restores the percent it found afterwards. Apply
// runs before any load (first thing in the command), so loadgc restores
// this policy's percent, and the moving memory limit never comes below
// loadgc's goal during a load (loadgc's goal is at most 1.5 times the live
// heap, the limit at least twice), so loadgc's window is left alone.
//
// The environment wins: GOGC set leaves the GC percent (and the bound,
// whose point is to undo the percent's memory cost) alone; GOMEMLIMIT set
// leaves the memory limit alone. Apply logs which values came from where.
package gctune
