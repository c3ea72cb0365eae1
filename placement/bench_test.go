package placement

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
)

// populate writes n compute providers with VCPU, MEMORY_MB and DISK_GB
// straight into etcd (100 a transaction), every tenth one disabled.
func populate(b testing.TB, cli *clientv3.Client, keys etcdschema.Keys, n int) {
	b.Helper()
	ctx := context.Background()
	var ops []clientv3.Op
	flush := func() {
		if len(ops) == 0 {
			return
		}
		if _, err := cli.Txn(ctx).Then(ops...).Commit(); err != nil {
			b.Fatal(err)
		}
		ops = ops[:0]
	}
	for i := 0; i < n; i++ {
		p := &etcdschema.Provider{UUID: fmt.Sprintf("00000000-0000-0000-0000-%012d", i), Name: fmt.Sprintf("host%d", i)}
		normalizeProvider(p)
		p.Inventories = map[string]etcdschema.Inventory{VCPU: inv(64), MemoryMB: inv(262144), DiskGB: inv(2000)}
		if i%10 == 0 {
			p.Traits = []string{TraitComputeStatusDisabled}
		}
		ops = append(ops, clientv3.OpPut(keys.Provider(p.UUID), etcdschema.MustEncode(p)))
		if len(ops) == 100 {
			flush()
		}
	}
	flush()
}

var benchQuery = CandidateQuery{Limit: 1000, Groups: []RequestGroup{{
	Resources: map[string]int64{VCPU: 2, MemoryMB: 4096, DiskGB: 20},
	Forbidden: []string{TraitComputeStatusDisabled},
}}}

func benchCandidates(b *testing.B, n int) {
	s, cli := newStarted(b)
	populate(b, cli, s.keys, n)
	syncIdx(b, s)
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c, err := s.AllocationCandidates(ctx, benchQuery)
		if err != nil || len(c.AllocationRequests) != 1000 {
			b.Fatalf("%v %d", err, len(c.AllocationRequests))
		}
	}
}

func BenchmarkCandidates10k(b *testing.B)  { benchCandidates(b, 10_000) }
func BenchmarkCandidates100k(b *testing.B) { benchCandidates(b, 100_000) }

// BenchmarkPopulate10k writes 10,000 compute providers with three
// inventories each the way agents do, through the Service (a create
// transaction, then an inventory update compared on the provider's
// generation), from 16 writers at once; one op is the whole population.
func BenchmarkPopulate10k(b *testing.B) {
	const n, writers = 10_000, 16
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		s, _ := newStarted(b)
		ctx := context.Background()
		var next atomic.Int64
		errs := make(chan error, writers)
		b.StartTimer()
		for w := 0; w < writers; w++ {
			go func() {
				for {
					j := next.Add(1) - 1
					if j >= n {
						errs <- nil
						return
					}
					uuid := fmt.Sprintf("00000000-0000-0000-0000-%012d", j)
					if err := s.EnsureProvider(ctx, uuid, fmt.Sprintf("host%d", j), ""); err != nil {
						errs <- err
						return
					}
					err := s.UpdateProvider(ctx, uuid, func(p *etcdschema.Provider) error {
						p.Inventories = map[string]etcdschema.Inventory{VCPU: inv(64), MemoryMB: inv(262144), DiskGB: inv(2000)}
						return nil
					})
					if err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		for w := 0; w < writers; w++ {
			if err := <-errs; err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "providers/s")
}

// BenchmarkClaims measures concurrent claims/s against embedded etcd, each
// worker claiming on its own spread of 1,000 providers.
func BenchmarkClaims(b *testing.B) {
	s, cli := newStarted(b)
	populate(b, cli, s.keys, 1000)
	syncIdx(b, s)
	var seq atomic.Int64
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			i := seq.Add(1)
			rp := fmt.Sprintf("00000000-0000-0000-0000-%012d", i%1000)
			err := s.PutAllocations(ctx, fmt.Sprintf("c%d", i), AllocationWrite{
				Allocations: alloc(rp, map[string]int64{VCPU: 1, MemoryMB: 1, DiskGB: 1}), ProjectID: "p", UserID: "u"})
			if err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "claims/s")
}

// BenchmarkClaimsThreeIndexes is BenchmarkClaims with three placement
// services on one etcd, as three schedulers run them, over 10,000
// providers: each claim is made by one service, and every service's
// watch-fed index decodes the provider and consumer it wrote (the
// decoding the etcdschema fast paths are for).
func BenchmarkClaimsThreeIndexes(b *testing.B) { benchClaimsThreeIndexes(b, 8) }

// BenchmarkClaimsThreeIndexes192 is BenchmarkClaimsThreeIndexes with 192
// concurrent claimers, as berth bench's claim baseline runs them (3
// schedulers' placement, 64 claimers each): the group commit then sends
// full batches, and per-claim CPU and allocations are what bound
// claims/s. Run it with -benchmem; allocs/op is allocations per claim
// (the whole process: etcd, three services and their indexes).
func BenchmarkClaimsThreeIndexes192(b *testing.B) {
	// RunParallel runs parallelism×GOMAXPROCS goroutines.
	benchClaimsThreeIndexes(b, max(1, 192/runtime.GOMAXPROCS(0)))
}

func benchClaimsThreeIndexes(b *testing.B, parallelism int) {
	s0, cli := newStarted(b)
	svcs := []*Service{s0, startOn(b, cli), startOn(b, cli)}
	const n = 10000
	populate(b, cli, s0.keys, n)
	for _, s := range svcs {
		syncIdx(b, s)
	}
	var seq atomic.Int64
	b.SetParallelism(parallelism)
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			i := seq.Add(1)
			rp := fmt.Sprintf("00000000-0000-0000-0000-%012d", i%n)
			err := svcs[i%3].PutAllocations(ctx, fmt.Sprintf("c%d", i), AllocationWrite{
				Allocations: alloc(rp, map[string]int64{VCPU: 1, MemoryMB: 1, DiskGB: 1}), ProjectID: "p", UserID: "u"})
			if err != nil {
				b.Error(err)
				return
			}
		}
	})
	// Every index has seen every claim before the figures are taken.
	for _, s := range svcs {
		syncIdx(b, s)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "claims/s")
	// CPU per claim (the whole process: etcd, three services and their
	// indexes) is steadier than claims/s on a shared machine.
	b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "cpu-us/claim")
}

// processCPU is the process's user and system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkCompactCandidates10k is the scheduler's in-process search: a
// sample of 100 candidates from a random start over 10,000 providers, in
// fresh arrays (CompactCandidates) and in lent ones reused from search
// to search (CompactCandidatesInto, what a scheduler's request does).
func BenchmarkCompactCandidates10k(b *testing.B) {
	s, cli := newStarted(b)
	populate(b, cli, s.keys, 10_000)
	syncIdx(b, s)
	ctx := context.Background()
	q := benchQuery
	q.Limit, q.RandomStart = 100, true
	var buf CompactBuffers
	for _, into := range []bool{false, true} {
		b.Run(fmt.Sprintf("into=%v", into), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var c []Candidate
				var err error
				if into {
					c, err = s.CompactCandidatesInto(ctx, q, &buf)
				} else {
					c, err = s.CompactCandidates(ctx, q)
				}
				if err != nil || len(c) != 100 {
					b.Fatalf("%v %d", err, len(c))
				}
			}
		})
	}
}
