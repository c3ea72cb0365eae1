package scheduler

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/embedetcd"
	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/internal/loadgc"
	"github.com/berth-project/berth/leader"
	"github.com/berth-project/berth/placement"
)

// benchEtcd is an embedded etcd with room for millions of keys.
func benchEtcd(b testing.TB) *clientv3.Client {
	b.Helper()
	return benchEtcdServer(b).Client()
}

// benchEtcdServer is benchEtcd's member itself.
func benchEtcdServer(b testing.TB) *embedetcd.Server {
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
	return srv
}

// populateHosts writes n hosts the way agents and claims leave them:
// compute node provider (with usages), service, alive, host mapping, and
// per instance its InstanceInfo and its consumer, plus the HostSync with
// each instance's flavor id, as agents write it (agent/register.go) —
// straight into etcd, 120 operations a transaction, 4 writers at once.
func populateHosts(b testing.TB, cli *clientv3.Client, keys etcdschema.Keys, n, perHost int) {
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
					sync.FlavorIDs = append(sync.FlavorIDs, "2")
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
			ctx, ps, hm := benchIndexes(b, n)
			log := hclog.NewNullLogger()
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
// placement index and the host manager — and reports the heap they add
// and the process's peak RSS. BERTH_BENCH_HOSTS overrides the host count.
//
// concurrent loads both at once, as `berth server` does; sequential loads
// one after the other, which gives each its own CPU and heap.
// BERTH_BENCH_CPUPROFILE and BERTH_BENCH_MEMPROFILE write profiles of the
// loads alone (without populating etcd, which -cpuprofile would include;
// process: the child's), BERTH_BENCH_ETCD_CPUPROFILE one of the embedded
// etcd while it serves process's child;
// BERTH_BENCH_CHILD_LOG=FILE writes the process child's output to FILE;
// BERTH_BENCH_COLD_DATA=DIR keeps the populated etcd in DIR for the next
// run with the same host count (coldStartEtcd).
func BenchmarkColdStart100k(b *testing.B) {
	n := 100000
	if v := benchHosts(); v > 0 {
		n = v
	}
	const perHost = 10
	keys := etcdschema.New("/bench")
	srv, populated := coldStartEtcd(b, n, perHost)
	if !populated {
		t0 := time.Now()
		populateHosts(b, srv.Client(), keys, n, perHost)
		b.Logf("populated %d hosts x %d instances in %s", n, perHost, time.Since(t0))
		markColdData(b, n, perHost)
	}
	// The loads read over gRPC, as a scheduler of `berth server` does
	// (etcd's in-process client has no RangeStream; `berth dev` lists in
	// pages).
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{srv.ClientURL()}})
	if err != nil {
		b.Fatal(err)
	}
	defer cli.Close()
	log := hclog.NewNullLogger()
	// process: a scheduler's loads alone in a child process, as `berth
	// server` runs against an etcd elsewhere: its peak RSS is the
	// scheduler's own, without the embedded etcd's memory.
	//
	// Its etcd member starts cold when DIR is reused (its bbolt file
	// never read since it opened), as after the member's own restart; a
	// scheduler restarting against a running etcd finds its pages read.
	// BERTH_BENCH_COLD_WARM=1 runs the child twice: the figures without a
	// suffix are the first run's, "-warm" the second's, against the
	// member the first warmed. (Session 20, two pairs on a loaded
	// machine: the member's CPU 9.9 and 8.8 s cold, 9.6 and 9.5 s warm;
	// the file is in the page cache either way, so one run is the
	// default.)
	b.Run("process", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			cold := coldStartProcess(b, srv.ClientURL(), n, perHost)
			cold.report(b, "")
			if os.Getenv("BERTH_BENCH_COLD_WARM") == "1" {
				coldStartProcess(b, srv.ClientURL(), n, perHost).report(b, "-warm")
			}
		}
	})
	for _, concurrent := range []bool{true, false} {
		name := "sequential"
		if concurrent {
			name = "concurrent"
		}
		b.Run(name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				coldStart(b, cli, keys, log, n, perHost, concurrent)
			}
		})
	}
}

// coldDataEnv names a directory that keeps BenchmarkColdStart100k's
// populated etcd between runs: populating a million instances takes
// minutes, the load being measured seconds.
const coldDataEnv = "BERTH_BENCH_COLD_DATA"

// coldStartEtcd is the benchmark's etcd: in a temporary directory, or in
// $BERTH_BENCH_COLD_DATA, whose data is reused (populated true) when a
// marker says it holds n hosts × perHost instances, fully written.
func coldStartEtcd(b *testing.B, n, perHost int) (srv *embedetcd.Server, populated bool) {
	b.Helper()
	dir := os.Getenv(coldDataEnv)
	if dir == "" {
		return benchEtcdServer(b), false
	}
	marker := coldDataMarker(dir, n, perHost)
	_, err := os.Stat(marker)
	populated = err == nil
	if !populated {
		// A partial or other population: start from an empty store (only
		// what this benchmark wrote in dir is removed).
		olds, _ := filepath.Glob(filepath.Join(dir, "populated-*"))
		for _, p := range append(olds, filepath.Join(dir, "etcd")) {
			if err := os.RemoveAll(p); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	srv, err = embedetcd.Start(embedetcd.Config{
		DataDir:           filepath.Join(dir, "etcd"),
		ClientURL:         fmt.Sprintf("http://127.0.0.1:%d", etcdtest.FreePort(b)),
		PeerURL:           fmt.Sprintf("http://127.0.0.1:%d", etcdtest.FreePort(b)),
		QuotaBackendBytes: 8 << 30,
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(srv.Close)
	if populated {
		b.Logf("reusing %d hosts x %d instances in %s", n, perHost, dir)
	}
	return srv, populated
}

// markColdData records in $BERTH_BENCH_COLD_DATA (when set) that its etcd
// holds n hosts × perHost instances.
func markColdData(b *testing.B, n, perHost int) {
	dir := os.Getenv(coldDataEnv)
	if dir == "" {
		return
	}
	if err := os.WriteFile(coldDataMarker(dir, n, perHost), nil, 0o644); err != nil {
		b.Fatal(err)
	}
}

// coldDataMarker names the marker of n hosts × perHost instances as
// populateHosts writes them now: "with-flavors" since its syncs carry
// their instances' flavor ids (a directory populated before is written
// again, not read as if it had them).
func coldDataMarker(dir string, n, perHost int) string {
	return filepath.Join(dir, fmt.Sprintf("populated-%d-hosts-%d-instances-with-flavors", n, perHost))
}

// coldStart loads a placement index and a host manager from cli and
// reports their times, CPU, heap and the peak RSS.
func coldStart(b *testing.B, cli *clientv3.Client, keys etcdschema.Keys, log hclog.Logger, n, perHost int, concurrent bool) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b.StopTimer()
	base := heapMB()
	resetPeakRSS(b)
	rss0 := procStatusMB(b, "VmRSS:")
	stopProfile := startLoadProfile(b)
	b.StartTimer()
	cpu0 := cpuTime()
	start := time.Now()
	ps := placement.New(cli, keys, log)
	hm := NewHostManager(cli, keys, log)
	var placeDone, hmDone, placeCPU, hmCPU time.Duration
	var placeHeap float64
	loadPlacement := func() error {
		if err := ps.Start(ctx); err != nil {
			return err
		}
		placeDone = time.Since(start)
		return nil
	}
	loadHosts := func() error {
		hmStart := time.Now()
		go hm.Run(ctx)
		if err := hm.WaitSynced(ctx); err != nil {
			return err
		}
		hmDone = time.Since(hmStart)
		return nil
	}
	if concurrent {
		hostsErr := make(chan error, 1)
		go func() { hostsErr <- loadHosts() }()
		if err := loadPlacement(); err != nil {
			b.Fatal(err)
		}
		if err := <-hostsErr; err != nil {
			b.Fatal(err)
		}
	} else {
		if err := loadPlacement(); err != nil {
			b.Fatal(err)
		}
		placeCPU = cpuTime() - cpu0
		b.StopTimer()
		placeHeap = heapMB() - base
		b.StartTimer()
		cpu1 := cpuTime()
		if err := loadHosts(); err != nil {
			b.Fatal(err)
		}
		hmCPU = cpuTime() - cpu1
	}
	total := time.Since(start)
	totalCPU := cpuTime() - cpu0
	b.StopTimer()
	stopProfile()
	peak := procStatusMB(b, "VmHWM:")
	heap := heapMB() - base
	st := hm.Stats()
	if st.Hosts != n || st.Instances != n*perHost || st.Trusted != n {
		b.Fatalf("host manager loaded %+v, want %d hosts, %d instances, all trusted", st, n, n*perHost)
	}
	b.ReportMetric(total.Seconds(), "s-both-loaded")
	b.ReportMetric(placeDone.Seconds(), "s-placement-load")
	b.ReportMetric(hmDone.Seconds(), "s-hostmanager-load")
	// CPU seconds of the whole process (embedded etcd serving the reads
	// included): on a shared machine wall time mostly measures the other
	// tenants.
	b.ReportMetric(totalCPU.Seconds(), "cpu-s-both")
	b.ReportMetric(heap, "MB-heap-both")
	// Peak RSS of the whole process since just before the load, and the
	// RSS before it: the embedded etcd's memory (its index, the pages it
	// has read) is in both, so the growth is what the loads added.
	b.ReportMetric(peak, "MB-peak-rss")
	b.ReportMetric(peak-rss0, "MB-peak-rss-growth")
	if !concurrent {
		b.ReportMetric(placeCPU.Seconds(), "cpu-s-placement-load")
		b.ReportMetric(hmCPU.Seconds(), "cpu-s-hostmanager-load")
		b.ReportMetric(placeHeap, "MB-placement-heap")
		b.ReportMetric(heap-placeHeap, "MB-hostmanager-heap")
		b.ReportMetric((heap-placeHeap)*(1<<20)/float64(n), "B/host-hostmanager")
	}
	runtime.KeepAlive(ps)
	runtime.KeepAlive(hm)
}

// coldStartEnv names the etcd a TestColdStartChild process loads from.
const coldStartEnv = "BERTH_COLDSTART_CHILD_ETCD"

// childResult is what TestColdStartChild prints, one JSON line.
type childResult struct {
	// Seconds is until everything is loaded; ReadySeconds until the
	// scheduler can serve (the providers and the host manager);
	// LeaderSeconds until a leader's first orphaned-allocation sweep has
	// read its page of consumers, which is all a leader loads beyond
	// ready (its index never lists the consumers).
	Seconds, PlacementSeconds, HostManagerSeconds, CPUSeconds float64
	ReadySeconds, ReadyCPUSeconds, LeaderSeconds              float64
	// ReadyPeakRSSMB is the peak RSS until ready: a scheduler that never
	// leads (its consumers never wanted) stays there.
	HeapMB, PeakRSSMB, ReadyPeakRSSMB float64
	Hosts, Instances, Trusted         int
	// EtcdCPUSeconds is the parent's CPU while the child ran: its etcd
	// member serving the child's lists.
	EtcdCPUSeconds float64
}

// report reports r's figures, each unit with suffix appended.
func (r childResult) report(b *testing.B, suffix string) {
	b.ReportMetric(r.Seconds, "s-both-loaded"+suffix)
	b.ReportMetric(r.PlacementSeconds, "s-placement-load"+suffix)
	b.ReportMetric(r.HostManagerSeconds, "s-hostmanager-load"+suffix)
	b.ReportMetric(r.ReadySeconds, "s-ready"+suffix)
	b.ReportMetric(r.ReadyCPUSeconds, "cpu-s-ready"+suffix)
	b.ReportMetric(r.LeaderSeconds, "s-leader-loaded"+suffix)
	b.ReportMetric(r.CPUSeconds, "cpu-s-both"+suffix)
	b.ReportMetric(r.EtcdCPUSeconds, "cpu-s-etcd"+suffix)
	b.ReportMetric(r.HeapMB, "MB-heap-both"+suffix)
	b.ReportMetric(r.PeakRSSMB, "MB-peak-rss"+suffix)
	b.ReportMetric(r.ReadyPeakRSSMB, "MB-peak-rss-ready"+suffix)
}

// coldStartProcess runs TestColdStartChild in a child process of this
// test binary and returns what it measured.
func coldStartProcess(b *testing.B, etcdURL string, n, perHost int) childResult {
	b.StopTimer()
	cmd := exec.Command(os.Args[0], "-test.run=^TestColdStartChild$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), coldStartEnv+"="+etcdURL)
	// The child's own Go memory limit (GOMEMLIMIT would also bind this
	// process, which holds the etcd).
	if lim := os.Getenv("BERTH_BENCH_CHILD_GOMEMLIMIT"); lim != "" {
		cmd.Env = append(cmd.Env, "GOMEMLIMIT="+lim)
	}
	// The parent's CPU while the child runs is the embedded etcd serving
	// the child's lists (this process does nothing else meanwhile): on
	// the same cores as the child, so the wall time is about the two
	// summed over the cores they share.
	stopEtcdProfile := startEtcdProfile(b)
	parentCPU0 := cpuTime()
	out, err := cmd.CombinedOutput()
	parentCPU := cpuTime() - parentCPU0
	stopEtcdProfile()
	if err != nil {
		b.Fatalf("cold start child: %v\n%s", err, out)
	}
	if path := os.Getenv("BERTH_BENCH_CHILD_LOG"); path != "" {
		// The child's whole output, with e.g. GODEBUG=gctrace=1 its GC
		// cycles (the heap each started and ended at, which is what sets
		// the peak RSS).
		if err := os.WriteFile(path, out, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	var r childResult
	found := false
	for _, line := range strings.Split(string(out), "\n") {
		if j, ok := strings.CutPrefix(strings.TrimSpace(line), "coldstart-result: "); ok {
			if err := json.Unmarshal([]byte(j), &r); err != nil {
				b.Fatalf("cold start child result %q: %v", j, err)
			}
			found = true
		}
	}
	if !found {
		b.Fatalf("cold start child printed no result:\n%s", out)
	}
	if r.Hosts != n || r.Instances != n*perHost || r.Trusted != n {
		b.Fatalf("child's host manager loaded %+v, want %d hosts, %d instances, all trusted", r, n, n*perHost)
	}
	r.EtcdCPUSeconds = parentCPU.Seconds()
	return r
}

// startEtcdProfile starts a CPU profile of this process into
// $BERTH_BENCH_ETCD_CPUPROFILE when set, for the time the child runs:
// the embedded etcd serving the child's lists alone (cpu-s-etcd); the
// returned func stops it.
func startEtcdProfile(b *testing.B) func() {
	path := os.Getenv("BERTH_BENCH_ETCD_CPUPROFILE")
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}

// TestColdStartChild is BenchmarkColdStart100k/process's child: it loads
// a placement index and a host manager at once from the etcd in
// $BERTH_COLDSTART_CHILD_ETCD, as `berth server` does, and prints the
// time, the process's CPU, the heap in use after, and the peak RSS of
// the whole process. Without that variable it is skipped.
func TestColdStartChild(t *testing.T) {
	url := os.Getenv(coldStartEnv)
	if url == "" {
		t.Skip("run by BenchmarkColdStart100k/process")
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{url}})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	log := hclog.NewNullLogger()
	keys := etcdschema.New("/bench")
	cpu0 := cpuTime()
	start := time.Now()
	// BERTH_BENCH_CPUPROFILE and BERTH_BENCH_MEMPROFILE profile the
	// child's loads (the parent only populates and waits).
	stopProfile := startLoadProfile(t)
	// As berth server does while its scheduler loads (cmd/berth stack.go).
	loaded := loadgc.Tighten()
	ps := placement.New(cli, keys, log)
	hm := NewHostManager(cli, keys, log)
	var r childResult
	hostsErr := make(chan error, 1)
	go func() {
		go hm.Run(ctx)
		err := hm.WaitSynced(ctx)
		r.HostManagerSeconds = time.Since(start).Seconds()
		hostsErr <- err
	}()
	// The placement index's consumers are listed on demand once the host
	// manager has synced, as berth server's stack does for a scheduler
	// without the Placement API: it serves from the providers and the
	// hosts, and nothing of a scheduler's wants them. Its leader's
	// orphaned-allocation sweep reads consumers a page per run from
	// etcd: the page read below, at ready, stands for its first run.
	if err := ps.StartOnDemand(ctx, hm.WaitSynced); err != nil {
		t.Fatal(err)
	}
	r.PlacementSeconds = time.Since(start).Seconds()
	if err := <-hostsErr; err != nil {
		t.Fatal(err)
	}
	r.ReadySeconds = time.Since(start).Seconds()
	r.ReadyCPUSeconds = (cpuTime() - cpu0).Seconds()
	r.ReadyPeakRSSMB = selfStatusMB(t, "VmHWM:")
	page, _, err := ps.ConsumerPage(ctx, "", leader.DefaultOrphanSweepPage)
	if err != nil {
		t.Fatal(err)
	}
	if len(page) != leader.DefaultOrphanSweepPage {
		t.Fatalf("the sweep's first page holds %d consumers, want %d", len(page), leader.DefaultOrphanSweepPage)
	}
	r.LeaderSeconds = time.Since(start).Seconds()
	loaded()
	r.Seconds = time.Since(start).Seconds()
	r.CPUSeconds = (cpuTime() - cpu0).Seconds()
	stopProfile()
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	r.HeapMB = float64(ms.HeapAlloc) / (1 << 20)
	r.PeakRSSMB = selfStatusMB(t, "VmHWM:")
	st := hm.Stats()
	r.Hosts, r.Instances, r.Trusted = st.Hosts, st.Instances, st.Trusted
	j, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("coldstart-result: %s\n", j)
	runtime.KeepAlive(ps)
}

// selfStatusMB is a figure in kB from /proc/self/status (VmHWM:), in
// MB.
func selfStatusMB(t *testing.T, field string) float64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, field); ok {
			var kb float64
			fmt.Sscanf(strings.TrimSpace(v), "%f", &kb)
			return kb / 1024
		}
	}
	t.Fatalf("no %s in /proc/self/status", field)
	return 0
}

// resetPeakRSS resets the process's VmHWM to its current RSS (Linux
// clear_refs 5), so VmHWM then reports the peak of what follows.
func resetPeakRSS(b *testing.B) {
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		b.Logf("reset peak RSS: %v", err)
	}
}

// procStatusMB is a figure in kB from /proc/self/status (VmHWM:,
// VmRSS:), in MB.
func procStatusMB(b *testing.B, field string) float64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Logf("peak RSS: %v", err)
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, field); ok {
			var kb float64
			fmt.Sscanf(strings.TrimSpace(v), "%f", &kb)
			return kb / 1024
		}
	}
	return 0
}

// startLoadProfile starts a CPU profile into $BERTH_BENCH_CPUPROFILE when
// set; the returned func stops it. With $BERTH_BENCH_MEMPROFILE set it
// writes the allocations so far into that path with ".base" appended,
// and the returned func those at the end into the path: the load's own
// are `go tool pprof -diff_base PATH.base PATH`. Each sub-benchmark
// overwrites them: select one with -bench.
func startLoadProfile(b testing.TB) func() {
	writeAllocs := func(path string) {
		f, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
			b.Fatal(err)
		}
	}
	if path := os.Getenv("BERTH_BENCH_MEMPROFILE"); path != "" {
		writeAllocs(path + ".base")
	}
	var cpuf *os.File
	if path := os.Getenv("BERTH_BENCH_CPUPROFILE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			b.Fatal(err)
		}
		cpuf = f
	}
	return func() {
		if cpuf != nil {
			pprof.StopCPUProfile()
			cpuf.Close()
		}
		if path := os.Getenv("BERTH_BENCH_MEMPROFILE"); path != "" {
			// The allocs profile counts what was allocated up to the
			// last collection: one now takes in the load's tail.
			runtime.GC()
			writeAllocs(path)
		}
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

// benchIndexes is n populated hosts in a fresh etcd, a placement service
// and a host manager synced over them, both stopped when b ends.
func benchIndexes(b testing.TB, n int) (context.Context, *placement.Service, *HostManager) {
	return benchIndexesWith(b, n, 0)
}

// benchIndexesWith is benchIndexes with perHost instances on each host.
func benchIndexesWith(b testing.TB, n, perHost int) (context.Context, *placement.Service, *HostManager) {
	b.Helper()
	cli := benchEtcd(b)
	keys := etcdschema.New("/bench")
	populateHosts(b, cli, keys, n, perHost)
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
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
	return ctx, ps, hm
}
