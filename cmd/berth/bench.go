package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/bench"
	"github.com/berth-project/berth/configs"
	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/logging"
	"github.com/berth-project/berth/internal/metrics"
	"github.com/berth-project/berth/internal/stack"
	"github.com/berth-project/berth/placement"
	"github.com/berth-project/berth/scheduler"
)

// cmdBench is `berth bench [SCENARIO] [flags]`: the load tool. It runs
// the scenario against a Berth it starts in this process (embedded etcd,
// the API and one cell conductor per cell in one stack, and each
// scheduler with its superconductor in a stack of its own with its own
// etcd client, so one can be crashed) or against an existing one (-etcd
// and -api). The fleet, the recorder, the scenarios and the report are
// package bench.
func cmdBench(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == schedProcessCmd {
		return cmdBenchSchedulerProcess(args[1:], stdout, stderr)
	}
	// The roles' logger and the progress line write stderr from different
	// goroutines; a bytes.Buffer (tests) is not safe for that.
	stderr = &lockedWriter{w: stderr}
	scenario := "boot"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		scenario, args = args[0], args[1:]
	}
	fs := flag.NewFlagSet("berth bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		scen         = fs.String("scenario", scenario, "populate, boot, churn, failover or coldstart (or give it as the first argument)")
		hosts        = fs.Int("hosts", 1000, "simulated hosts")
		cells        = fs.Int("cells", 2, "cells (hosts round-robin; one conductor each when the tool starts Berth)")
		servers      = fs.Int("servers", 1000, "servers to boot (churn: the steady population)")
		rate         = fs.Float64("rate", 0, "servers posted per second (0: as fast as the clients go)")
		clients      = fs.Int("clients", 16, "concurrent API clients")
		buildTime    = fs.Duration("build-time", 0, "simulated build time per server")
		failureRate  = fs.Float64("failure-rate", 0, "probability that a build fails (reschedulable)")
		hintRatio    = fs.Float64("hint-ratio", 0, "fraction of servers with a same_host or different_host hint naming an ACTIVE server")
		groupRatio   = fs.Float64("group-ratio", 0, "fraction of servers in a server group (m1.tiny)")
		groups       = fs.Int("groups", 20, "server groups to spread -group-ratio servers over (policies rotate)")
		duration     = fs.Duration("duration", 30*time.Second, "churn: how long to delete and replace servers")
		perHost      = fs.Int("instances-per-host", 10, "coldstart: instances written per host")
		baseline     = fs.Bool("baseline", false, "after the scenario, measure etcd's single-key CAS txn/s with as many workers as claims in flight")
		baselineTime = fs.Duration("baseline-time", 2*time.Second, "how long each round of the CAS and of the claim baseline runs")
		baseRounds   = fs.Int("baseline-rounds", 3, "rounds of the baselines, CAS and claims alternating (their rates are over all rounds)")
		schedulers   = fs.Int("schedulers", 1, "schedulers (each with its superconductor) to start")
		procsFlag    = fs.Bool("scheduler-procs", false, "run each scheduler (with its superconductor) as a child process instead of in the tool's process")
		schedCPU     = fs.Float64("scheduler-cpu", 0, "with -scheduler-procs: put each scheduler process in a CPU cgroup of its own with this many CPUs of quota (0: none)")
		workers      = fs.Int("workers", 0, "superconductor workers per scheduler (0: the config's)")
		condWorkers  = fs.Int("conductor-workers", 0, "cell conductor workers (0: the config's)")
		regWorkers   = fs.Int("register-workers", 32, "hosts registering at once")
		liveness     = fs.String("liveness", bench.LivenessPerHost, "hosts' liveness: per-host (a lease each, renewed every report_interval as agents do) or shared (one lease, one keepalive stream: cheaper than real agents, for comparison)")
		syncs        = fs.Bool("syncs", true, "run the hosts' periodic provider and instance syncs at the agents' intervals (-syncs=false -liveness shared: the fleet of earlier runs)")
		reportIvl    = fs.Duration("report-interval", 0, "hosts' liveness renewal period (0: the config's agent report_interval)")
		downTime     = fs.Duration("service-down-time", 0, "hosts' liveness lease TTL (0: the config's agent service_down_time)")
		provIvl      = fs.Duration("provider-sync-interval", 0, "hosts' provider sync period (0: the config's agent provider_sync_interval)")
		instIvl      = fs.Duration("instance-sync-interval", 0, "hosts' instance sync period (0: the config's agent instance_sync_interval)")
		bgWorkers    = fs.Int("background-workers", 0, "goroutines doing the hosts' renewals and syncs (0: one per 20 hosts, 64 to 1024)")
		etcdEps      = fs.String("etcd", "", "comma-separated endpoints of an existing Berth's etcd (with -api)")
		apiURL       = fs.String("api", "", "an existing Berth's compute API URL (with -etcd)")
		prefix       = fs.String("prefix", etcdschema.DefaultPrefix, "etcd key prefix")
		cfgPath      = fs.String("config", "", "HCL config for the started Berth (scheduler options, ...)")
		dataDir      = fs.String("data-dir", "", "embedded etcd data dir (default: a temp dir, removed at exit)")
		jsonPath     = fs.String("json", "", "append the result as a JSON line to FILE")
		format       = fs.String("format", "table", "stdout: table or json")
		cpuProfile   = fs.String("cpuprofile", "", "write a CPU profile to FILE (of the whole run, or of -profile-phase)")
		profPhase    = fs.String("profile-phase", "all", "what -cpuprofile covers: all, populate, scenario (the boot, churn or failover itself) or baseline")
		memProfile   = fs.String("memprofile", "", "write a heap profile at the end to FILE")
		timeout      = fs.Duration("timeout", 10*time.Minute, "how long to wait for servers to finish")
		logLevel     = fs.String("log-level", "warn", "log level of the started roles")
	)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "berth bench: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	bad := func(f string, a ...any) int { fmt.Fprintf(stderr, "berth bench: "+f+"\n", a...); return 2 }
	switch {
	case *hosts < 1 || *cells < 1:
		return bad("-hosts and -cells must be at least 1")
	case *schedulers < 1:
		return bad("-schedulers must be at least 1")
	case *failureRate < 0 || *failureRate >= 1:
		return bad("-failure-rate must be in [0, 1)")
	case *hintRatio < 0 || *hintRatio > 1 || *groupRatio < 0 || *groupRatio > 1:
		return bad("-hint-ratio and -group-ratio must be in [0, 1]")
	case *format != "table" && *format != "json":
		return bad("-format must be table or json, not %q", *format)
	case (*etcdEps == "") != (*apiURL == "") && *scen != "coldstart":
		return bad("an existing Berth needs both -etcd and -api")
	case *scen == "failover" && *schedulers < 2 && *etcdEps == "":
		return bad("failover needs -schedulers 2 or more")
	case *schedCPU < 0 || (*schedCPU > 0 && *schedCPU < 0.01):
		return bad("-scheduler-cpu must be 0 (no quota) or at least 0.01 CPUs")
	case *schedCPU > 0 && !*procsFlag:
		return bad("-scheduler-cpu needs -scheduler-procs")
	case *procsFlag && (*etcdEps != "" || *scen == "coldstart"):
		return bad("-scheduler-procs is for a Berth the tool starts, and coldstart starts no scheduler")
	case *liveness != bench.LivenessPerHost && *liveness != bench.LivenessShared:
		return bad("-liveness must be %s or %s, not %q", bench.LivenessPerHost, bench.LivenessShared, *liveness)
	case *bgWorkers < 0:
		return bad("-background-workers must not be negative")
	case *reportIvl < 0 || *downTime < 0 || *provIvl < 0 || *instIvl < 0:
		return bad("-report-interval, -service-down-time, -provider-sync-interval and -instance-sync-interval must not be negative")
	case (*reportIvl > 0 && *reportIvl < 100*time.Millisecond) || (*downTime > 0 && *downTime < time.Second):
		return bad("-report-interval must be at least 100ms and -service-down-time at least 1s (a lease TTL is whole seconds)")
	case (*provIvl > 0 && *provIvl < 100*time.Millisecond) || (*instIvl > 0 && *instIvl < 100*time.Millisecond):
		return bad("-provider-sync-interval and -instance-sync-interval must be at least 100ms")
	}
	known := false
	for _, s := range bench.Scenarios {
		known = known || s == *scen
	}
	if !known {
		return bad("unknown scenario %q (want one of %s)", *scen, strings.Join(bench.Scenarios, ", "))
	}
	cfg, err := loadOrDefaults(*cfgPath)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	// The simulated agents keep the config's agent periods unless a flag
	// says otherwise.
	agentCfg := cfg.Agent
	if agentCfg == nil {
		agentCfg = configs.Defaults().Agent
	}
	every := func(flag, conf time.Duration) time.Duration {
		if flag > 0 {
			return flag
		}
		return conf
	}
	report, down := every(*reportIvl, agentCfg.ReportInterval), every(*downTime, agentCfg.ServiceDownTime)
	if down <= report {
		return bad("the hosts' service_down_time (%s) must exceed their report_interval (%s), or a healthy host looks down between two reports", down, report)
	}
	cfg.Log.Level = *logLevel
	cfg.Etcd.Prefix = *prefix
	log := logging.New(cfg.Log, stderr).Named("bench")

	switch *profPhase {
	case "all", "populate", "scenario", "baseline":
	default:
		return bad("-profile-phase %q: want all, populate, scenario or baseline", *profPhase)
	}
	if *baseRounds < 1 {
		return bad("-baseline-rounds %d: want at least 1", *baseRounds)
	}
	onPhase := func(string) func() { return func() {} }
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return bad("%v", err)
		}
		defer f.Close()
		if *profPhase == "all" {
			if err := pprof.StartCPUProfile(f); err != nil {
				return bad("%v", err)
			}
			defer pprof.StopCPUProfile()
		} else {
			onPhase = func(phase string) func() {
				if phase != *profPhase {
					return func() {}
				}
				if err := pprof.StartCPUProfile(f); err != nil {
					log.Warn("could not start the CPU profile", "phase", phase, "error", err)
					return func() {}
				}
				return pprof.StopCPUProfile
			}
		}
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer cancel()

	// A scheduler process that exits unasked ends the run, saying why.
	ctx, stopRun := context.WithCancelCause(ctx)
	defer stopRun(nil)
	var procs *schedProcs
	if *procsFlag {
		procs = &schedProcs{n: *schedulers, cpu: *schedCPU, cfgPath: *cfgPath, prefix: *prefix, workers: *workers,
			logLevel: *logLevel, stderr: stderr, log: log.Named("procs"), onExit: stopRun}
	}
	var target *bench.Target
	var cleanup func()
	if *etcdEps != "" {
		target, cleanup, err = existingTarget(ctx, cfg, strings.Split(*etcdEps, ","), *apiURL)
	} else {
		target, cleanup, err = startTarget(ctx, cfg, log, benchStart{dataDir: *dataDir, cells: *cells,
			schedulers: *schedulers, workers: *workers, condWorkers: *condWorkers, etcdOnly: *scen == "coldstart",
			procs: procs})
	}
	if err != nil {
		fmt.Fprintln(stderr, "berth bench:", err)
		return 1
	}
	defer cleanup()
	res, runErr := bench.Run(ctx, target, bench.Config{Scenario: *scen, Hosts: *hosts, Cells: *cells,
		Servers: *servers, Rate: *rate, Clients: *clients, BuildTime: *buildTime, FailureRate: *failureRate,
		HintRatio: *hintRatio, GroupRatio: *groupRatio, Groups: *groups, Duration: *duration,
		InstancesPerHost: *perHost, Baseline: *baseline, BaselineTime: *baselineTime, BaselineRounds: *baseRounds, OnPhase: onPhase, Timeout: *timeout,
		RegisterWorkers: *regWorkers, Liveness: *liveness, SkipSyncs: !*syncs, ReportInterval: report,
		// A temporary etcd goes with the tool: no need to down its hosts
		// (and send its leader after them) while it is stopped.
		LeaveLeases:     *etcdEps == "" && *dataDir == "",
		ServiceDownTime: down, ProviderSyncInterval: every(*provIvl, agentCfg.ProviderSyncInterval),
		InstanceSyncInterval: every(*instIvl, agentCfg.InstanceSyncInterval), BackgroundWorkers: *bgWorkers, Progress: stderr, Log: log.Named("fleet")})
	if cause := context.Cause(ctx); runErr != nil && cause != nil && !errors.Is(cause, context.Canceled) {
		runErr = fmt.Errorf("%w (because %v)", runErr, cause)
	}
	if res != nil && procs != nil {
		res.SchedulerProcs, res.SchedulerCPUQuota = *schedulers, *schedCPU
		gctx, gcancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		res.SchedulerGOMAXPROCS = procs.gomaxprocs(gctx)
		gcancel()
	}
	if *memProfile != "" {
		if err := writeHeapProfile(*memProfile); err != nil {
			fmt.Fprintln(stderr, "berth bench:", err)
		}
	}
	if res != nil {
		res.Command = "berth bench " + strings.Join(append([]string{*scen}, args...), " ")
		if runErr != nil {
			res.Error = runErr.Error()
		}
		if *format == "json" {
			_ = res.WriteJSON(stdout)
		} else {
			res.WriteTable(stdout)
		}
		if *jsonPath != "" {
			if err := appendJSON(*jsonPath, res); err != nil {
				fmt.Fprintln(stderr, "berth bench:", err)
				return 1
			}
		}
	}
	if runErr != nil {
		fmt.Fprintln(stderr, "berth bench:", runErr)
		return 1
	}
	return 0
}

func appendJSON(path string, res *bench.Result) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if err := res.WriteJSON(f); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}

func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	runtime.GC()
	if err := pprof.WriteHeapProfile(f); err != nil {
		f.Close()
		return fmt.Errorf("heap profile: %w", err)
	}
	return f.Close()
}

// existingTarget is a Berth someone else runs: no hooks into its roles.
func existingTarget(ctx context.Context, cfg *configs.Config, endpoints []string, apiURL string) (*bench.Target, func(), error) {
	cfg.Etcd.Embedded, cfg.Etcd.Endpoints = nil, endpoints
	cc, err := cfg.Etcd.ClientConfig()
	if err != nil {
		return nil, nil, err
	}
	cli, err := clientv3.New(cc)
	if err != nil {
		return nil, nil, fmt.Errorf("etcd client for %v: %w", endpoints, err)
	}
	keys := etcdschema.New(cfg.Etcd.Prefix)
	resp, err := cli.Get(ctx, keys.Members(scheduler.Role), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		cli.Close()
		return nil, nil, fmt.Errorf("etcd at %v: %w", endpoints, err)
	}
	return &bench.Target{Client: cli, Keys: keys, API: apiURL, Schedulers: int(resp.Count)}, func() { cli.Close() }, nil
}

type benchStart struct {
	dataDir              string
	cells, schedulers    int
	workers, condWorkers int
	etcdOnly             bool // coldstart: the tool loads a scheduler's views itself
	// procs, when set, runs the schedulers as child processes instead
	// of in-process stacks.
	procs *schedProcs
}

// startTarget starts Berth in this process with the stack `berth dev`
// and `berth server` use.
func startTarget(ctx context.Context, cfg *configs.Config, log hclog.Logger, o benchStart) (*bench.Target, func(), error) {
	cfg.EnableAllRoles()
	cfg.Placement = nil // no Placement HTTP API: nothing here calls it
	if o.workers > 0 {
		cfg.Superconductor.Workers = o.workers
	}
	if o.condWorkers > 0 {
		cfg.Conductor.Workers = o.condWorkers
	}
	emb := configs.Defaults().Etcd.Embedded
	// The bench drives etcd past its warning thresholds on purpose ("apply
	// request took too long" past 100 ms is what a saturating load looks
	// like): at warn that is hundreds of lines about the load itself, so a
	// member the bench makes up logs only errors. One from -config logs
	// as configured.
	emb.LogLevel = "error"
	if cfg.Etcd.Embedded != nil {
		emb = cfg.Etcd.Embedded
	}
	cfg.Etcd.Embedded, cfg.Etcd.Endpoints = emb, nil
	var cleanups []func()
	cleanup := func() {
		for i := len(cleanups) - 1; i >= 0; i-- {
			cleanups[i]()
		}
	}
	if o.dataDir != "" {
		emb.DataDir = o.dataDir
	} else {
		tmp, err := os.MkdirTemp("", "berth-bench-")
		if err != nil {
			return nil, nil, err
		}
		cleanups = append(cleanups, func() { os.RemoveAll(tmp) })
		emb.DataDir = filepath.Join(tmp, "etcd")
	}
	ports, err := freePorts(2)
	if err != nil {
		cleanup()
		return nil, nil, err
	}
	emb.ClientURL = fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	emb.PeerURL = fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	cfg.API.Bind = "127.0.0.1:0"
	cfg.Scheduler.Bind = "127.0.0.1:0"

	// The first stack: etcd, the API and the cell conductors. Schedulers
	// live in stacks of their own, so a failover kills one without the
	// API or the conductors.
	base := *cfg
	base.Scheduler, base.Superconductor = nil, nil
	if o.etcdOnly {
		base.API = nil
	}
	s0, err := stack.Connect(ctx, &base, log.Named("berth"))
	if err != nil {
		cleanup()
		return nil, nil, err
	}
	cleanups = append(cleanups, s0.Stop)
	// The tool's own client (fleet, recorder, baseline, coldstart loads)
	// talks to etcd over the network as agents and a fresh scheduler
	// would, and keeps its watches off the roles' client streams.
	own, err := clientv3.New(clientv3.Config{Endpoints: []string{emb.ClientURL}, DialTimeout: cfg.Etcd.DialTimeout})
	if err != nil {
		cleanup()
		return nil, nil, fmt.Errorf("etcd client for %s: %w", emb.ClientURL, err)
	}
	cleanups = append(cleanups, func() { own.Close() })
	t := &bench.Target{Client: own, Keys: s0.Keys()}
	if o.etcdOnly {
		return t, cleanup, nil
	}
	if err := s0.StartServerRoles(ctx); err != nil {
		cleanup()
		return nil, nil, err
	}
	for c := 1; c <= o.cells; c++ {
		cc := *cfg.Conductor
		cc.Cell = bench.CellName(c)
		if err := s0.StartConductor(ctx, &cc); err != nil {
			cleanup()
			return nil, nil, err
		}
	}
	t.API = s0.Endpoint("compute API")
	if o.procs != nil {
		cleanups = append(cleanups, o.procs.stop)
		if err := o.procs.start(ctx, emb.ClientURL); err != nil {
			cleanup()
			return nil, nil, err
		}
		procTarget(t, s0, o.procs, cfg.Superconductor.Workers)
		return t, cleanup, nil
	}
	var scheds []*stack.Stack
	for i := 0; i < o.schedulers; i++ {
		sc := *cfg
		sc.API, sc.Conductor = nil, nil
		etcdCfg := cfg.Etcd
		etcdCfg.Embedded, etcdCfg.Endpoints = nil, []string{emb.ClientURL}
		sc.Etcd = etcdCfg
		s, err := stack.Connect(ctx, &sc, log.Named(fmt.Sprintf("berth-%d", i+1)))
		if err != nil {
			cleanup()
			return nil, nil, err
		}
		cleanups = append(cleanups, s.Stop)
		if err := s.StartServerRoles(ctx); err != nil {
			cleanup()
			return nil, nil, err
		}
		scheds = append(scheds, s)
	}
	t.Schedulers = len(scheds)
	t.ClaimWorkers = len(scheds) * cfg.Superconductor.Workers
	for _, s := range scheds {
		t.ClaimServices = append(t.ClaimServices, s.Placement())
	}
	// What the superconductors' lease attempts cost (each holder sees
	// every build request; issue 7), in the report.
	t.LeaseAttempts = func() (won, lost float64) { return leaseAttempts(scheds) }
	all := append([]*stack.Stack{s0}, scheds...)
	t.Sync = func(ctx context.Context, rev int64) error {
		for _, s := range all {
			if err := s.WaitForRevision(ctx, rev); err != nil {
				return err
			}
		}
		return nil
	}
	t.ClaimStats = func() placement.ClaimStats {
		var sum placement.ClaimStats
		for _, s := range all {
			sum.Add(s.Placement().ClaimStats())
		}
		return sum
	}
	t.KillLeader = func(ctx context.Context, id string) error {
		for _, s := range scheds {
			if s.SchedulerID() == id {
				s.Crash()
				return nil
			}
		}
		return fmt.Errorf("no scheduler started here has id %s", id)
	}
	return t, cleanup, nil
}

// leaseAttempts sums the superconductor queues' lease transactions that
// won and lost (berth_queue_lease_attempts_total, every turn) over the
// scheduler stacks.
func leaseAttempts(scheds []*stack.Stack) (won, lost float64) {
	for _, s := range scheds {
		for _, outs := range s.Metrics().QueueLeaseCounts(metrics.QueueBuildRequests) {
			won += outs[metrics.LeaseWon]
			lost += outs[metrics.LeaseLost]
		}
	}
	return won, lost
}

// procTarget hooks t into scheduler processes: what the in-process
// stacks give directly, asked of each child's control listener, plus the
// tool's own stack's placement (its cell conductors claim on reschedules).
// ClaimServices stays nil: the claim baseline then claims through a
// placement of the tool's own, and says so.
func procTarget(t *bench.Target, s0 *stack.Stack, p *schedProcs, workers int) {
	t.Schedulers = p.n
	t.ClaimWorkers = p.n * workers
	t.Sync = func(ctx context.Context, rev int64) error {
		if err := s0.WaitForRevision(ctx, rev); err != nil {
			return err
		}
		return p.sync(ctx, rev)
	}
	t.ClaimStats = func() placement.ClaimStats {
		sum := p.claimStats()
		sum.Add(s0.Placement().ClaimStats())
		return sum
	}
	t.KillLeader = p.kill
	t.ChildCPU = p.cpuTime
}

func freePorts(n int) ([]int, error) {
	var out []int
	var lns []net.Listener
	defer func() {
		for _, l := range lns {
			l.Close()
		}
	}()
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("free port: %w", err)
		}
		lns = append(lns, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}

// lockedWriter serialises writes to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// loadOrDefaults is the config at path, or the defaults when path is ""
// (bench and its scheduler processes run without a file).
func loadOrDefaults(path string) (*configs.Config, error) {
	if path == "" {
		return configs.Defaults(), nil
	}
	return configs.Load(path)
}
