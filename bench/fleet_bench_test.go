package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/berth-project/berth/configs"
	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/embedetcd"
	"github.com/berth-project/berth/internal/etcdgrpc"
	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/internal/freeport"
	"github.com/berth-project/berth/internal/gctune"
	"github.com/berth-project/berth/internal/rawtxn"
	"github.com/berth-project/berth/placement"
)

// BenchmarkFleetBackground is the simulated fleet's own CPU per
// background operation, as a `-fleet-procs` child spends it: a Fleet of
// 10,000 hosts (BERTH_BENCH_FLEET_HOSTS to change it) registered against
// an etcd member in a child process (the test binary, benchMemberCmd),
// over gRPC as a fleet child talks to the tool's member, then its
// periodic work run at the rates one of a 100,000-host run's two
// children keeps (5,000 renewals, 833 provider syncs and 417 instance
// syncs a second: report_interval hosts/5,000 s, the syncs 6 and 12 of
// those; the leases' TTL an hour), each task alone ("renew", "provider", "instances") and the
// three together ("mix"). One op is one run of a task for one host.
//
// cpu-us/op is this process's user+system CPU (getrusage) per op: the
// fleet's alone, the member's being its child's. allocs/op and B/op
// are this process's allocation per op (runtime/metrics), collections
// included; vcsw/op the voluntary context switches (a thread going to
// sleep until a hand-off wakes it) per op. live-objs/host is the heap objects after a collection,
// less those before the fleet was built, per host; failed/op the runs
// that returned an error. BERTH_BENCH_FLEET_CPUPROFILE=PREFIX writes
// a CPU profile of each sub-benchmark's timed part to PREFIX.NAME,
// BERTH_BENCH_FLEET_HEAPPROFILE=FILE the heap's once the hosts have
// registered. The process runs Berth's GC policy as a
// fleet child does (gctune's defaults); run it with the child's GODEBUG:
//
//	GODEBUG=gcshrinkstackoff=1 go test -run '^$' -bench FleetBackground -benchtime 10000x -count 5 ./bench
//
// ns/op is the schedule's pace (the ops come at their rate), not a cost.
func BenchmarkFleetBackground(b *testing.B) {
	benchFleetBackground(b, benchMemberClient)
}

// BenchmarkFleetBackgroundInProcess is BenchmarkFleetBackground with the
// fleet on an etcd member's in-process client, as `berth bench` without
// -fleet-procs runs it (the 10,000-host boot's "agent fleet background"
// role): cpu-us/op is then the fleet's and the member's together.
func BenchmarkFleetBackgroundInProcess(b *testing.B) {
	benchFleetBackground(b, func(b *testing.B) *clientv3.Client { return etcdtest.Client(b) })
}

func benchFleetBackground(b *testing.B, client func(*testing.B) *clientv3.Client) {
	hosts := 10_000
	if s := os.Getenv("BERTH_BENCH_FLEET_HOSTS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			b.Fatalf("BERTH_BENCH_FLEET_HOSTS=%q: want a positive number", s)
		}
		hosts = n
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	defer gctune.Apply(configs.Defaults().Runtime, hclog.NewNullLogger()).Restore()
	cli := client(b)
	keys := etcdschema.New("/fb")
	log := hclog.NewNullLogger()
	if _, err := cli.Put(ctx, keys.Cell(CellName(1)),
		etcdschema.MustEncode(&etcdschema.Cell{Name: CellName(1), UUID: "c1"})); err != nil {
		b.Fatal(err)
	}
	objects0 := liveObjects()
	beat := time.Duration(hosts) * time.Second / 5000
	f, err := NewFleet(cli, keys, placement.New(cli, keys, log), FleetConfig{Hosts: hosts, Cells: 1,
		ReportInterval: beat, ServiceDownTime: time.Hour, ProviderSyncInterval: 6 * beat, InstanceSyncInterval: 12 * beat,
		RegisterWorkers: 64, LeaveLeases: true}, log)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	// A TTL of an hour: no lease expires while the hosts register or
	// between the sub-benchmarks, when nothing renews them. A beat is
	// the same request to etcd whatever the TTL.
	kinds := f.tasks
	f.tasks = nil // Register starts no periodic work: each sub-benchmark starts its own
	resp, err := cli.Get(ctx, "/")
	if err != nil {
		b.Fatal(err)
	}
	runErr := make(chan error, 1)
	go func() { runErr <- f.Run(ctx, resp.Header.Revision+1) }()
	defer func() {
		cancel()
		if err := <-runErr; err != nil {
			b.Error(err)
		}
	}()
	if err := f.Register(ctx, nil); err != nil {
		b.Fatal(err)
	}
	if path := os.Getenv("BERTH_BENCH_FLEET_HEAPPROFILE"); path != "" {
		writeFleetHeap(b, path)
	}
	for _, sub := range []struct {
		name  string
		kinds []int
	}{
		{"renew", []int{taskRenew}},
		{"provider", []int{taskProvider}},
		{"instances", []int{taskInstances}},
		{"mix", []int{taskRenew, taskProvider, taskInstances}},
	} {
		b.Run(sub.name, func(b *testing.B) {
			f.tasks = nil
			for _, k := range sub.kinds {
				for _, t := range kinds {
					if t.kind == k {
						// A task of its own: its counts start at zero.
						f.tasks = append(f.tasks, &periodicTask{kind: t.kind, every: t.every, run: t.run, start: t.start})
					}
				}
			}
			runCtx, stop := context.WithCancel(ctx)
			defer stop()
			ops := func() (done, failed int64) {
				for _, t := range f.tasks {
					done += t.done.Load()
					failed += t.failed.Load()
				}
				return done, failed
			}
			b.ReportAllocs()
			cpu0, alloc0, sw0 := selfCPU(b), readAllocs(), selfSwitches(b)
			stopProfile := profileTo(b, os.Getenv("BERTH_BENCH_FLEET_CPUPROFILE"), sub.name)
			b.ResetTimer()
			f.startPeriodic(runCtx, runCtx)
			tick := time.NewTicker(20 * time.Millisecond)
			defer tick.Stop()
			for {
				if done, failed := ops(); done+failed >= int64(b.N) {
					break
				}
				<-tick.C
			}
			cpu, alloc, sw := selfCPU(b)-cpu0, readAllocs().minus(alloc0), selfSwitches(b)-sw0
			done, failed := ops()
			b.StopTimer()
			stopProfile()
			stop()
			f.bgWG.Wait()
			n := float64(done + failed)
			b.ReportMetric(float64(cpu.Microseconds())/n, "cpu-us/op")
			b.ReportMetric(float64(alloc.objects)/n, "allocs/op")
			b.ReportMetric(float64(alloc.bytes)/n, "B/op")
			b.ReportMetric(float64(sw)/n, "vcsw/op")
			b.ReportMetric(float64(failed)/n, "failed/op")
			b.ReportMetric(float64(liveObjects()-objects0)/float64(hosts), "live-objs/host")
		})
	}
}

// profileTo starts a CPU profile of the timed part of a sub-benchmark,
// to prefix.name (the last run of it wins), when prefix is set; it
// returns its stop.
func profileTo(b *testing.B, prefix, name string) (stop func()) {
	if prefix == "" {
		return func() {}
	}
	out, err := os.Create(prefix + "." + name)
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(out); err != nil {
		out.Close()
		b.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		out.Close()
	}
}

// writeFleetHeap writes the heap's profile after a collection to
// path: what the registered fleet keeps (go tool pprof
// -sample_index=inuse_objects).
func writeFleetHeap(b *testing.B, path string) {
	runtime.GC()
	out, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer out.Close()
	if err := pprof.Lookup("heap").WriteTo(out, 0); err != nil {
		b.Fatal(err)
	}
}

// allocs are the process's heap allocations so far.
type allocs struct{ objects, bytes uint64 }

func (a allocs) minus(b allocs) allocs { return allocs{a.objects - b.objects, a.bytes - b.bytes} }

func readAllocs() allocs {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:objects"}, {Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return allocs{s[0].Value.Uint64(), s[1].Value.Uint64()}
}

// liveObjects is the heap's objects right after a collection.
func liveObjects() int64 {
	runtime.GC()
	s := []metrics.Sample{{Name: "/gc/heap/objects:objects"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64())
}

// selfCPU is the process's user+system CPU time so far (its children's
// not counted until they are waited for).
func selfCPU(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// selfSwitches is how many times the process's threads have given up
// their CPU waiting (voluntary context switches): a thread that sleeps
// until the next hand-off wakes it, which a loaded machine's figures of
// CPU per op mix with other processes' load, counted apart from it.
func selfSwitches(tb testing.TB) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return ru.Nvcsw
}

// benchMemberCmd is the hidden verb that makes the test binary an etcd
// member of its own (benchMember), so a benchmark's process CPU is its
// client's alone.
const benchMemberCmd = "bench-etcd-member"

// benchMember runs an etcd member in dir on two free loopback ports,
// prints its client URL on a line of stdout, and stops once stdin
// closes (its parent ended).
func benchMember(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) != 1 {
		fmt.Fprintf(stderr, "%s DIR\n", benchMemberCmd)
		return 2
	}
	// Berth's GC policy, as the tool's process where the member runs.
	defer gctune.Apply(configs.Defaults().Runtime, hclog.NewNullLogger()).Restore()
	var srv *embedetcd.Server
	var err error
	for try := 0; try < 3 && srv == nil; try++ { // a free port can be taken between draw and bind
		var ports []int
		if ports, err = freeport.Ports(2); err != nil {
			break
		}
		srv, err = embedetcd.Start(embedetcd.Config{DataDir: fmt.Sprintf("%s/%d", args[0], try),
			ClientURL: fmt.Sprintf("http://127.0.0.1:%d", ports[0]), PeerURL: fmt.Sprintf("http://127.0.0.1:%d", ports[1])})
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", benchMemberCmd, err)
		return 1
	}
	defer srv.Close()
	fmt.Fprintln(stdout, srv.ClientURL())
	_, _ = io.Copy(io.Discard, stdin)
	return 0
}

// benchMemberClient starts an etcd member in a child process
// (benchMember) and returns a networked client to it; both end with
// the benchmark.
func benchMemberClient(b *testing.B) *clientv3.Client {
	b.Helper()
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(exe, "bench", benchMemberCmd, b.TempDir())
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	var exited atomic.Bool
	b.Cleanup(func() {
		in.Close()
		if !exited.Load() {
			_ = cmd.Wait()
		}
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		exited.Store(true)
		_ = cmd.Wait()
		b.Fatalf("etcd member child: %v", err)
	}
	// The client's own log (a retried call cancelled at the end) is
	// not the benchmark's output.
	cc := clientv3.Config{Endpoints: []string{strings.TrimSpace(line)}, DialOptions: etcdgrpc.DialOptions(),
		Logger: zap.NewNop()}
	cli, err := clientv3.New(cc)
	if err != nil {
		b.Fatalf("etcd client: %v", err)
	}
	rawtxn.Networked(cli, cc)
	b.Cleanup(func() { cli.Close() })
	return cli
}
