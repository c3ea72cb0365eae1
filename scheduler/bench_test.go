package scheduler

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"sort"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/embedetcd"
	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/placement"
)

// benchEtcd is an embedded etcd with room for millions of keys.
func benchEtcd(b *testing.B) *clientv3.Client {
	b.Helper()
	srv, err := embedetcd.Start(embedetcd.Config{
		DataDir:           b.TempDir(),
		ClientURL:         fmt.Sprintf("http://127.0.0.1:%d", etcdtest.FreePort(b)),
		PeerURL:           fmt.Sprintf("http://127.0.0.1:%d", etcdtest.FreePort(b)),
		QuotaBackendBytes: 8 << 30,
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(srv.Close)
	return srv.Client()
}

// populateHosts writes n hosts the way agents and claims leave them:
// compute node provider (with usages), service, alive, host mapping, and
// per instance its InstanceInfo and its consumer, plus the HostSync —
// straight into etcd, 120 operations a transaction, 4 writers at once.
func populateHosts(b *testing.B, cli *clientv3.Client, keys etcdschema.Keys, n, perHost int) {
	b.Helper()
	ctx := context.Background()
	now := time.Now().UTC()
	inv := func(total int64) etcdschema.Inventory {
		return etcdschema.Inventory{Total: total, MinUnit: 1, MaxUnit: total, StepSize: 1, AllocationRatio: 1}
	}
	work := make(chan int, 64)
	var wg sync.WaitGroup
	var failed error
	var mu sync.Mutex
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var ops []clientv3.Op
			flush := func() {
				if len(ops) == 0 {
					return
				}
				if _, err := cli.Txn(ctx).Then(ops...).Commit(); err != nil {
					mu.Lock()
					failed = err
					mu.Unlock()
				}
				ops = ops[:0]
			}
			for i := range work {
				host := fmt.Sprintf("compute-%06d", i)
				rp := fmt.Sprintf("00000000-0000-0000-0000-%012d", i)
				cell := fmt.Sprintf("cell%d", i%4+1)
				p := &etcdschema.Provider{UUID: rp, Name: host, Generation: 1, RootProviderUUID: rp,
					Inventories: map[string]etcdschema.Inventory{placement.VCPU: inv(64), placement.MemoryMB: inv(262144), placement.DiskGB: inv(2000)},
					Traits:      []string{}, Aggregates: []string{},
					Usages:    map[string]int64{placement.VCPU: int64(perHost), placement.MemoryMB: int64(perHost) * 2048},
					CreatedAt: now, UpdatedAt: now}
				if perHost == 0 {
					p.Usages = map[string]int64{}
				}
				sync := &etcdschema.HostSync{Host: host, At: now, UUIDs: []string{}}
				ops = append(ops,
					clientv3.OpPut(keys.Provider(rp), etcdschema.MustEncode(p)),
					clientv3.OpPut(keys.Service(host), etcdschema.MustEncode(&etcdschema.Service{Host: host, Cell: cell, ProviderUUID: rp, AgentVersion: "bench", CreatedAt: now, UpdatedAt: now})),
					clientv3.OpPut(keys.Alive(host), etcdschema.MustEncode(&etcdschema.Alive{Host: host, Since: now})),
					clientv3.OpPut(keys.HostMapping(host), etcdschema.MustEncode(&etcdschema.HostMapping{Host: host, Cell: cell, CreatedAt: now})))
				for j := 0; j < perHost; j++ {
					u := fmt.Sprintf("%08d-0000-4000-8000-%012d", i, j)
					sync.UUIDs = append(sync.UUIDs, u)
					ops = append(ops,
						clientv3.OpPut(keys.HostInstance(host, u), etcdschema.MustEncode(&etcdschema.InstanceInfo{UUID: u, Host: host, FlavorID: "2", Flavor: "m1.small", State: "active", UpdatedAt: now})),
						clientv3.OpPut(keys.Consumer(u), etcdschema.MustEncode(&etcdschema.Consumer{UUID: u, Generation: 1, ProjectID: "p", UserID: "u",
							Allocations: map[string]etcdschema.ConsumerAllocation{rp: {Resources: map[string]int64{placement.VCPU: 1, placement.MemoryMB: 2048}}},
							CreatedAt:   now, UpdatedAt: now})))
				}
				ops = append(ops, clientv3.OpPut(keys.HostSync(host), etcdschema.MustEncode(sync)))
				if len(ops) >= 100 {
					flush()
				}
			}
			flush()
		}()
	}
	for i := 0; i < n; i++ {
		work <- i
	}
	close(work)
	wg.Wait()
	if failed != nil {
		b.Fatalf("populate: %v", failed)
	}
}

// timedPlacement is the real placement service, noting when the first
// claim of a request starts: select_destinations up to that point is the
// scheduler's own work, the rest is the etcd claim.
type timedPlacement struct {
	*placement.Service
	firstClaim    time.Time
	firstClaimCPU time.Duration
}

func (t *timedPlacement) PutAllocationsWithOptions(ctx context.Context, w map[string]placement.AllocationWrite, o placement.ClaimOptions) (int64, error) {
	if t.firstClaim.IsZero() {
		t.firstClaim = time.Now()
		t.firstClaimCPU = threadCPU()
	}
	return t.Service.PutAllocationsWithOptions(ctx, w, o)
}

func percentile(d []time.Duration, p float64) float64 {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(a, b int) bool { return s[a] < s[b] })
	i := int(float64(len(s)-1) * p)
	return float64(s[i].Microseconds()) / 1000
}

// BenchmarkSelectDestinations: one instance (m1.small-like) per
// iteration, placement limit 1000 (Nova's default), default filters and
// weighers; each claim is freed again outside the timing.
func BenchmarkSelectDestinations(b *testing.B) {
	for _, n := range []int{1000, 10000, 100000} {
		b.Run(fmt.Sprintf("hosts=%d", n), func(b *testing.B) {
			cli := benchEtcd(b)
			keys := etcdschema.New("/bench")
			populateHosts(b, cli, keys, n, 0)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			log := hclog.NewNullLogger()
			ps := placement.New(cli, keys, log)
			if err := ps.Start(ctx); err != nil {
				b.Fatal(err)
			}
			hm := NewHostManager(cli, keys, log)
			go hm.Run(ctx)
			if err := hm.WaitSynced(ctx); err != nil {
				b.Fatal(err)
			}
			tp := &timedPlacement{Service: ps}
			cfg := DefaultConfig()
			cfg.EnabledFilters = []string{"ComputeFilter", "SameHostFilter", "DifferentHostFilter"}
			cfg.Weights = map[string]float64{"ram": 1, "cpu": 1, "disk": 1, "build_failure": 1e6}
			// BERTH_BENCH_SAMPLE sets placement_sample_size (default 0,
			// Nova's behaviour: every request weighs 1,000 candidates).
			if v := os.Getenv("BERTH_BENCH_SAMPLE"); v != "" {
				if _, err := fmt.Sscan(v, &cfg.PlacementSampleSize); err != nil {
					b.Fatalf("BERTH_BENCH_SAMPLE=%q: %v", v, err)
				}
			}
			s, err := New(cfg, tp, hm, log)
			if err != nil {
				b.Fatal(err)
			}
			sp := &RequestSpec{ProjectID: "p", UserID: "u",
				Flavor: etcdschema.Flavor{Name: "m1.small", VCPUs: 1, RAMMB: 2048, DiskGB: 20}}
			excl := make([]time.Duration, 0, b.N)
			incl := make([]time.Duration, 0, b.N)
			exclCPU := make([]time.Duration, 0, b.N)
			// The request runs on this goroutine's thread, locked, so the
			// thread's CPU time is the request's own work (with any GC
			// assist it pays), without the time it waited for a core: the
			// machine is shared and wall-clock tails measure its load.
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				sp.InstanceUUIDs = []string{fmt.Sprintf("bench-%d", i)}
				tp.firstClaim = time.Time{}
				cpuStart := threadCPU()
				start := time.Now()
				sels, err := s.SelectDestinations(ctx, sp)
				end := time.Now()
				if err != nil {
					b.Fatal(err)
				}
				excl = append(excl, tp.firstClaim.Sub(start))
				exclCPU = append(exclCPU, tp.firstClaimCPU-cpuStart)
				incl = append(incl, end.Sub(start))
				b.StopTimer()
				if err := ps.DeleteAllocations(ctx, sp.InstanceUUIDs[0]); err != nil {
					b.Fatal(err)
				}
				_ = sels
				b.StartTimer()
			}
			b.StopTimer()
			b.ReportMetric(percentile(excl, 0.5), "p50-ms-excl-claim")
			b.ReportMetric(percentile(excl, 0.99), "p99-ms-excl-claim")
			b.ReportMetric(percentile(incl, 0.5), "p50-ms-incl-claim")
			b.ReportMetric(percentile(incl, 0.99), "p99-ms-incl-claim")
			b.ReportMetric(percentile(exclCPU, 0.5), "p50-cpu-ms-excl-claim")
			b.ReportMetric(percentile(exclCPU, 0.99), "p99-cpu-ms-excl-claim")
		})
	}
}

func heapMB() float64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return float64(ms.HeapAlloc) / (1 << 20)
}

// BenchmarkColdStart100k: 100,000 hosts with 10 instances each (2.5M
// keys: providers, services, alive keys, host mappings, instance info,
// consumers, syncs). It times the scheduler's start-up loads — the
// placement index and the host manager — and reports the heap each adds.
// BERTH_BENCH_HOSTS overrides the host count.
func BenchmarkColdStart100k(b *testing.B) {
	n := 100000
	if v := benchHosts(); v > 0 {
		n = v
	}
	const perHost = 10
	cli := benchEtcd(b)
	keys := etcdschema.New("/bench")
	t0 := time.Now()
	populateHosts(b, cli, keys, n, perHost)
	b.Logf("populated %d hosts x %d instances in %s", n, perHost, time.Since(t0))
	log := hclog.NewNullLogger()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ctx, cancel := context.WithCancel(context.Background())
		base := heapMB()
		cpu0 := cpuTime()
		start := time.Now()
		ps := placement.New(cli, keys, log)
		if err := ps.Start(ctx); err != nil {
			b.Fatal(err)
		}
		placeDone := time.Since(start)
		placeCPU := cpuTime() - cpu0
		placeHeap := heapMB() - base
		cpu1 := cpuTime()
		hmStart := time.Now()
		hm := NewHostManager(cli, keys, log)
		go hm.Run(ctx)
		if err := hm.WaitSynced(ctx); err != nil {
			b.Fatal(err)
		}
		hmDone := time.Since(hmStart)
		hmCPU := cpuTime() - cpu1
		hmHeap := heapMB() - base - placeHeap
		st := hm.Stats()
		if st.Hosts != n || st.Instances != n*perHost || st.Trusted != n {
			b.Fatalf("host manager loaded %+v, want %d hosts, %d instances, all trusted", st, n, n*perHost)
		}
		b.ReportMetric(placeDone.Seconds(), "s-placement-load")
		b.ReportMetric(hmDone.Seconds(), "s-hostmanager-load")
		// CPU seconds of the whole process (embedded etcd serving the
		// reads included): on a shared machine wall time mostly measures
		// the other tenants.
		b.ReportMetric(placeCPU.Seconds(), "cpu-s-placement-load")
		b.ReportMetric(hmCPU.Seconds(), "cpu-s-hostmanager-load")
		b.ReportMetric(placeHeap, "MB-placement-heap")
		b.ReportMetric(hmHeap, "MB-hostmanager-heap")
		b.ReportMetric(hmHeap*(1<<20)/float64(n), "B/host-hostmanager")
		runtime.KeepAlive(ps)
		runtime.KeepAlive(hm)
		cancel()
	}
}

func benchHosts() int {
	var n int
	fmt.Sscanf(os.Getenv("BERTH_BENCH_HOSTS"), "%d", &n)
	return n
}

// cpuTime is the process's user+system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// threadCPU is the CPU time of the calling OS thread (Linux RUSAGE_THREAD).
func threadCPU() time.Duration {
	const rusageThread = 1
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
