package scheduler

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/hashicorp/go-hclog"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/placement"
)

// BenchmarkSelectStages is select_destinations' own CPU per request, the
// claim left out: the candidate search, the join with the host manager,
// the filters and the weighing of one m1.small-like request over 10,000
// hosts with the default config's filters, weighers and
// placement_sample_size (100 candidates from a random start;
// BERTH_BENCH_SAMPLE overrides it, 0 for Nova's 1,000 in index order).
// The claim is an etcd transaction whose time is mostly waiting;
// BenchmarkSelectDestinations measures the whole call. Each stage is also
// timed alone over the same requests, so a change to one shows there
// without the others' noise. Each request's cycle is released as
// selectOnce releases it. BERTH_BENCH_HOSTS overrides the host count.
//
// cpu-ns/op is the benchmark thread's own CPU over the timed parts (GC
// assists included, background GC not): the machine is shared, and ns/op
// is wall time that includes waiting for a core.
func BenchmarkSelectStages(b *testing.B) {
	n := 10000
	if v := benchHosts(); v > 0 {
		n = v
	}
	ctx, ps, hm := benchIndexes(b, n)
	log := hclog.NewNullLogger()
	cfg := DefaultConfig()
	cfg.EnabledFilters = []string{"ComputeFilter", "SameHostFilter", "DifferentHostFilter",
		"ServerGroupAntiAffinityFilter", "ServerGroupAffinityFilter"}
	cfg.Weights = map[string]float64{"ram": 1, "cpu": 1, "disk": 1, "io_ops": -1, "build_failure": 1e6,
		"soft_affinity": 1, "soft_anti_affinity": 1, "num_instances": 0}
	cfg.PlacementSampleSize = 100
	// BERTH_BENCH_SAMPLE=0 is Nova's behaviour: max_placement_results
	// (1,000) candidates in index order.
	if v, ok := os.LookupEnv("BERTH_BENCH_SAMPLE"); ok {
		n, err := strconv.Atoi(v)
		if err != nil {
			b.Fatalf("BERTH_BENCH_SAMPLE: %v", err)
		}
		cfg.PlacementSampleSize = n
	}
	s, err := New(cfg, ps, hm, log)
	if err != nil {
		b.Fatal(err)
	}
	newRequest := func(i int) (*Cycle, placement.CandidateQuery, *aggregateSnapshot) {
		sp := &RequestSpec{ProjectID: "p", UserID: "u", InstanceUUIDs: []string{fmt.Sprintf("bench-%d", i)},
			Flavor: etcdschema.Flavor{Name: "m1.small", VCPUs: 1, RAMMB: 2048, DiskGB: 20}}
		c := newCycle(sp)
		q, aggs, err := s.query(c)
		if err != nil {
			b.Fatal(err)
		}
		if n := s.sampleSize(c); n > 0 {
			q.Limit, q.RandomStart = n, true
		}
		return c, q, aggs
	}
	// allStages runs every stage of one request, as selectOnce does.
	allStages := func(b *testing.B, c *Cycle, q placement.CandidateQuery, aggs *aggregateSnapshot) {
		cands, err := s.candidates(ctx, c, q, log)
		if err != nil {
			b.Fatal(err)
		}
		hosts, err := s.hostStates(ctx, c, cands, aggs)
		if err != nil {
			b.Fatal(err)
		}
		if r := s.sortHosts(s.filter(hosts, c, log), c); r.len() == 0 {
			b.Fatal("no host passed")
		}
	}
	b.Run("all", func(b *testing.B) {
		b.ReportAllocs()
		cpu := startThreadCPU(b)
		for i := 0; i < b.N; i++ {
			c, q, aggs := newRequest(i)
			allStages(b, c, q, aggs)
			c.release()
		}
		cpu.report()
	})
	b.Run("candidates", func(b *testing.B) {
		b.ReportAllocs()
		cpu := startThreadCPU(b)
		for i := 0; i < b.N; i++ {
			cpu.stop()
			c, q, _ := newRequest(i)
			cpu.start()
			if _, err := s.candidates(ctx, c, q, log); err != nil {
				b.Fatal(err)
			}
			cpu.stop()
			c.release()
			cpu.start()
		}
		cpu.report()
	})
	// join times hostStates (and the request's release) on s, each
	// request's candidates searched untimed.
	join := func(b *testing.B, s *Scheduler) {
		b.ReportAllocs()
		cpu := startThreadCPU(b)
		for i := 0; i < b.N; i++ {
			cpu.stop()
			c, q, aggs := newRequest(i)
			cands, err := s.candidates(ctx, c, q, log)
			if err != nil {
				b.Fatal(err)
			}
			cpu.start()
			if _, err := s.hostStates(ctx, c, cands, aggs); err != nil {
				b.Fatal(err)
			}
			c.release()
		}
		cpu.report()
	}
	b.Run("join", func(b *testing.B) { join(b, s) })
	// join-fresh is join on a host manager of its own, listed afresh for
	// each run, as a boot's is when its requests begin: its slot table is
	// empty. Requests spread over the cloud as a boot's do (100
	// candidates from a random start), so how often a host is a candidate
	// is -benchtime's requests times 100 over the hosts: ~3 in a
	// 100,000-host boot of 3,000 servers (BERTH_BENCH_HOSTS=30000
	// -benchtime 900x is the same), ~100 at 10,000 hosts and 10,000
	// servers. slot-misses/op is the candidates per request that missed
	// the slot table (provider_slots.go) and looked the host up by uuid.
	b.Run("join-fresh", func(b *testing.B) {
		hctx, cancel := context.WithCancel(ctx)
		defer cancel()
		fresh := NewHostManager(hm.cli, hm.keys, log)
		go fresh.Run(hctx)
		if err := fresh.WaitSynced(hctx); err != nil {
			b.Fatal(err)
		}
		sf, err := New(cfg, ps, fresh, log)
		if err != nil {
			b.Fatal(err)
		}
		join(b, sf)
		b.ReportMetric(float64(fresh.slots.entries())/float64(b.N), "slot-misses/op")
	})
	// all-cold is all with the caches emptied before each request (a
	// write through 16 MB, untimed): in a boot the other roles evict the
	// index entries, the summaries and the host records between requests,
	// and stages that read fewer cache lines win there what a warm
	// benchmark hides. All the stages, because a line one stage no
	// longer reads may be one the next reads anyway.
	evict := make([]byte, 16<<20)
	b.Run("all-cold", func(b *testing.B) {
		b.ReportAllocs()
		cpu := startThreadCPU(b)
		for i := 0; i < b.N; i++ {
			cpu.stop()
			c, q, aggs := newRequest(i)
			for j := 0; j < len(evict); j += 64 {
				evict[j]++
			}
			cpu.start()
			allStages(b, c, q, aggs)
			cpu.stop()
			c.release()
			cpu.start()
		}
		cpu.report()
	})
	// join-cold is join with the caches emptied before it (untimed), as
	// all-cold does for every stage.
	b.Run("join-cold", func(b *testing.B) {
		b.ReportAllocs()
		cpu := startThreadCPU(b)
		for i := 0; i < b.N; i++ {
			cpu.stop()
			c, q, aggs := newRequest(i)
			cands, err := s.candidates(ctx, c, q, log)
			if err != nil {
				b.Fatal(err)
			}
			for j := 0; j < len(evict); j += 64 {
				evict[j]++
			}
			cpu.start()
			if _, err := s.hostStates(ctx, c, cands, aggs); err != nil {
				b.Fatal(err)
			}
			cpu.stop()
			c.release()
			cpu.start()
		}
		cpu.report()
	})
	b.Run("filter+weigh", func(b *testing.B) {
		b.ReportAllocs()
		cpu := startThreadCPU(b)
		for i := 0; i < b.N; i++ {
			cpu.stop()
			c, q, aggs := newRequest(i)
			cands, err := s.candidates(ctx, c, q, log)
			if err != nil {
				b.Fatal(err)
			}
			hosts, err := s.hostStates(ctx, c, cands, aggs)
			if err != nil {
				b.Fatal(err)
			}
			cpu.start()
			if r := s.sortHosts(s.filter(hosts, c, log), c); r.len() == 0 {
				b.Fatal("no host passed")
			}
			c.release()
		}
		cpu.report()
	})
}

// threadCPUTimer sums the benchmark thread's CPU over the timed parts of
// a benchmark (the goroutine is locked to its thread meanwhile).
type threadCPUTimer struct {
	b     *testing.B
	from  time.Duration
	total time.Duration
}

func startThreadCPU(b *testing.B) *threadCPUTimer {
	runtime.LockOSThread()
	b.Cleanup(runtime.UnlockOSThread)
	t := &threadCPUTimer{b: b}
	b.ResetTimer()
	t.from = threadCPUNanos()
	return t
}

// stop and start leave the testing package's own timer work (it reads
// the memory statistics) outside the sum.
func (t *threadCPUTimer) stop() {
	t.total += threadCPUNanos() - t.from
	t.b.StopTimer()
}

func (t *threadCPUTimer) start() {
	t.b.StartTimer()
	t.from = threadCPUNanos()
}

func (t *threadCPUTimer) report() {
	t.total += threadCPUNanos() - t.from
	t.b.StopTimer()
	t.b.ReportMetric(float64(t.total.Nanoseconds())/float64(t.b.N), "cpu-ns/op")
}

// threadCPUNanos is CLOCK_THREAD_CPUTIME_ID: the calling thread's CPU in
// nanoseconds (getrusage's per-thread figure is in ticks).
func threadCPUNanos() time.Duration {
	const clockThreadCPUTime = 3
	var ts syscall.Timespec
	if _, _, e := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTime, uintptr(unsafe.Pointer(&ts)), 0); e != 0 {
		return 0
	}
	return time.Duration(ts.Nano())
}
