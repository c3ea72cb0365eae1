package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/configs"
	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/etcdgrpc"
	"github.com/berth-project/berth/internal/etcdtally"
	"github.com/berth-project/berth/internal/freeport"
	"github.com/berth-project/berth/internal/logging"
	"github.com/berth-project/berth/internal/rawtxn"
	"github.com/berth-project/berth/internal/rolelabel"
	"github.com/berth-project/berth/internal/stack"
	"github.com/berth-project/berth/quotas"
	"github.com/berth-project/berth/scheduler"
)

// Main is `berth bench` once its flags are parsed and c validated: it
// runs c.Scenario against a Berth it starts in this process (embedded
// etcd, the API and one cell conductor per cell in one stack, and each
// scheduler with its superconductor in a stack of its own with its own
// etcd client, so one can be crashed; or as child processes) or against
// an existing one (-etcd and -api), and returns the result (nil when no
// run started) with the run's error. Logs and the progress line go to
// stderr. An error in what it was asked that shows only once -config is
// read is a *UsageError.
func Main(ctx context.Context, c Config, stderr io.Writer) (*Result, error) {
	// The roles' logger and the progress line write stderr from different
	// goroutines; a bytes.Buffer (tests) is not safe for that.
	stderr = &lockedWriter{w: stderr}
	cfg, err := loadOrDefaults(c.ConfigPath)
	if err != nil {
		return nil, &UsageError{err}
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
	report, down := every(c.ReportInterval, agentCfg.ReportInterval), every(c.ServiceDownTime, agentCfg.ServiceDownTime)
	if err := checkLiveness(down, report); err != nil {
		return nil, &UsageError{err}
	}
	cfg.Log.Level = c.LogLevel
	cfg.Etcd.Prefix = c.Prefix
	log := logging.New(cfg.Log, stderr).Named("bench")

	onPhase := func(string) func() { return func() {} }
	if c.MemProfile != "" && c.ProfilePhase != "all" {
		onPhase = heapProfilesAround(c.MemProfile, c.ProfilePhase, onPhase, log)
	}
	if c.CPUProfile != "" {
		f, err := os.Create(c.CPUProfile)
		if err != nil {
			return nil, &UsageError{err}
		}
		defer f.Close()
		if c.ProfilePhase == "all" {
			if err := pprof.StartCPUProfile(f); err != nil {
				return nil, &UsageError{err}
			}
			defer pprof.StopCPUProfile()
		} else {
			inner := onPhase
			onPhase = func(phase string) func() {
				if phase != c.ProfilePhase {
					return inner(phase)
				}
				endInner := inner(phase)
				if err := pprof.StartCPUProfile(f); err != nil {
					log.Warn("could not start the CPU profile", "phase", phase, "error", err)
					return endInner
				}
				return func() {
					pprof.StopCPUProfile()
					endInner()
				}
			}
		}
	}

	// A scheduler process that exits unasked ends the run, saying why.
	ctx, stopRun := context.WithCancelCause(ctx)
	defer stopRun(nil)
	var procs *schedProcs
	if c.SchedulerProcs {
		procs = &schedProcs{n: c.Schedulers, cpu: c.SchedulerCPU, cfgPath: c.ConfigPath, prefix: c.Prefix, workers: c.Workers,
			logLevel: c.LogLevel, stderr: stderr, log: log.Named("procs"), onExit: stopRun}
	}
	var target *Target
	var cleanup func()
	if c.Etcd != "" {
		target, cleanup, err = existingTarget(ctx, cfg, strings.Split(c.Etcd, ","), c.API)
		if err == nil && !c.NoAuth {
			if target.Auth, err = credentialsFromEnv(); err != nil {
				cleanup()
				return nil, &UsageError{err}
			}
		}
	} else {
		target, cleanup, err = startTarget(ctx, cfg, log, benchStart{dataDir: c.DataDir, cells: c.Cells, noAuth: c.NoAuth,
			schedulers: c.Schedulers, workers: c.Workers, condWorkers: c.ConductorWorkers, etcdOnly: c.Scenario == "coldstart",
			admin: c.Scenario == "drain", procs: procs, quota: parseQuota(c.ResizeQuota), tally: c.EtcdTally,
			fleetInProcess: c.FleetEtcd == FleetEtcdInProcess})
	}
	if err != nil {
		return nil, err
	}
	defer cleanup()
	// The scenario's own goroutines (the API clients) are profiled as
	// one role; the fleet, the recorder and Berth's roles as theirs.
	var res *Result
	var runErr error
	rolelabel.Do(ctx, "bench clients", func(ctx context.Context) {
		res, runErr = Run(ctx, target, RunConfig{Load: c.Load, OnPhase: onPhase, Timeout: c.Timeout,
			FleetProcs: c.FleetProcs, FleetLogLevel: c.LogLevel, FleetStderr: stderr,
			FleetCPUProfile: c.FleetCPUProfile, FleetProfilePhase: c.ProfilePhase,
			RegisterWorkers: c.RegisterWorkers, Liveness: c.Liveness, SkipSyncs: !c.Syncs, ReportInterval: report,
			// A temporary etcd goes with the tool: no need to down its hosts
			// (and send its leader after them) while it is stopped.
			LeaveLeases:     c.Etcd == "" && c.DataDir == "",
			ServiceDownTime: down, ProviderSyncInterval: every(c.ProviderSyncInterval, agentCfg.ProviderSyncInterval),
			InstanceSyncInterval: every(c.InstanceSyncInterval, agentCfg.InstanceSyncInterval), BackgroundWorkers: c.BackgroundWorkers, Progress: stderr, Log: log.Named("fleet")})
	})
	if res != nil && c.CPUProfile != "" && c.ProfilePhase == measuredPhase(c.Scenario) {
		// The profile is whole: its phase ended inside Run.
		if s, err := profileRoleShares(c.CPUProfile); err != nil {
			log.Warn("could not split the profile by role", "error", err)
		} else {
			res.setRoleShares(s)
		}
	}
	if cause := context.Cause(ctx); runErr != nil && cause != nil && !errors.Is(cause, context.Canceled) {
		runErr = fmt.Errorf("%w (because %v)", runErr, cause)
	}
	if res != nil && procs != nil {
		res.SchedulerProcs, res.SchedulerCPUQuota = c.Schedulers, c.SchedulerCPU
		gctx, gcancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		res.SchedulerGOMAXPROCS = procs.gomaxprocs(gctx)
		gcancel()
	}
	if c.MemProfile != "" {
		if err := writeHeapProfile(c.MemProfile); err != nil {
			fmt.Fprintln(stderr, "berth bench:", err)
		}
	}
	if res != nil && runErr != nil {
		res.Error = runErr.Error()
	}
	return res, runErr
}

// measuredPhase is the -profile-phase whose time the scenario's CPU per
// server or per move is measured over.
func measuredPhase(scenario string) string {
	if scenario == "drain" || scenario == "resize" {
		return "moves"
	}
	return "scenario"
}

// heapProfilesAround wraps onPhase so that phase is bracketed by heap
// profiles, PATH.start and PATH.end: `go tool pprof -sample_index=alloc_space
// -base PATH.start PATH.end` is what the phase allocated. Each is taken
// after a forced collection (a heap profile's figures are the last
// collection's), so a run with them collects once more at the phase's
// start than one without: its GC figures are not the phase's usual.
func heapProfilesAround(path, phase string, onPhase func(string) func(), log hclog.Logger) func(string) func() {
	return func(ph string) func() {
		if ph != phase {
			return onPhase(ph)
		}
		if err := writeHeapProfile(path + ".start"); err != nil {
			log.Warn("could not write the heap profile", "phase", ph, "error", err)
		}
		end := onPhase(ph)
		return func() {
			end()
			if err := writeHeapProfile(path + ".end"); err != nil {
				log.Warn("could not write the heap profile", "phase", ph, "error", err)
			}
		}
	}
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

// existingTarget is a Berth someone else runs: its etcd and its API, and
// nothing of its roles.
func existingTarget(ctx context.Context, cfg *configs.Config, endpoints []string, apiURL string) (*Target, func(), error) {
	cfg.Etcd.Embedded, cfg.Etcd.Endpoints = nil, endpoints
	cc, err := cfg.Etcd.ClientConfig()
	if err != nil {
		return nil, nil, err
	}
	cli, err := clientv3.New(cc)
	if err != nil {
		return nil, nil, fmt.Errorf("etcd client for %v: %w", endpoints, err)
	}
	rawtxn.Networked(cli, cc)
	keys := etcdschema.New(cfg.Etcd.Prefix)
	resp, err := cli.Get(ctx, keys.Members(scheduler.Role), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		cli.Close()
		return nil, nil, fmt.Errorf("etcd at %v: %w", endpoints, err)
	}
	return &Target{Client: cli, Keys: keys, API: apiURL, Schedulers: int(resp.Count)}, func() { cli.Close() }, nil
}

type benchStart struct {
	dataDir              string
	cells, schedulers    int
	workers, condWorkers int
	etcdOnly             bool // coldstart: the tool loads a scheduler's views itself
	noAuth               bool // the compute API in noauth mode, no identity
	// admin makes the load's user an admin (drain: pinning servers to
	// hosts and draining hosts are an admin's).
	admin bool
	// procs, when set, runs the schedulers as child processes instead
	// of in-process stacks.
	procs *schedProcs
	// quota, when set, are every project's limits over the unlimited
	// default (resize: -resize-quota).
	quota map[string]int64
	// tally counts every in-process client's etcd requests (-etcd-tally).
	tally bool
	// fleetInProcess gives the fleet an in-process client of the member
	// (-fleet-etcd in-process) instead of the tool's gRPC one.
	fleetInProcess bool
}

// startTarget starts Berth in this process with the stack `berth dev`
// and `berth server` use.
func startTarget(ctx context.Context, cfg *configs.Config, log hclog.Logger, o benchStart) (*Target, func(), error) {
	cfg.EnableAllRoles()
	cfg.Placement = nil // no Placement HTTP API: nothing here calls it
	if o.workers > 0 {
		cfg.Superconductor.Workers = o.workers
	}
	if o.condWorkers > 0 {
		cfg.Conductor.Workers = o.condWorkers
	}
	// The member logs as berth dev's does (the config's log_level, warn
	// by default, each warning family rate-limited): a bench must not
	// measure a quieter etcd than the one it stands for. (An "error"
	// level set here for a member the bench made up was never used: the
	// defaults always have an embedded block.)
	emb := cfg.Etcd.Embedded
	if emb == nil {
		emb = configs.Defaults().Etcd.Embedded
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
	cleanups = append(cleanups, func() { freeport.Release(ports...) }) // after the member stops
	emb.ClientURL = fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	emb.PeerURL = fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	cfg.API.Bind = "127.0.0.1:0"
	cfg.Scheduler.Bind = "127.0.0.1:0"
	// The bench boots thousands of servers in one project: its Berth has
	// no quota, as berth dev has none (the check then only moves the
	// project's fence key, which the figures include).
	cfg.API.Quota = map[string]int64{}
	for _, r := range []string{quotas.Instances, quotas.Cores, quotas.RAM, quotas.ServerGroups, quotas.ServerGroupMembers} {
		cfg.API.Quota[r] = quotas.Unlimited
	}
	for r, v := range o.quota {
		cfg.API.Quota[r] = v
	}
	var creds *Credentials
	if !o.noAuth {
		if creds, err = benchIdentity(cfg, o.admin); err != nil {
			cleanup()
			return nil, nil, err
		}
	}

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
	var tally *etcdtally.Tally
	if o.tally {
		// Before any role shares the client (StartServerRoles).
		tally = etcdtally.New()
		etcdtally.Wrap(s0.Client(), tally, "berth stack")
	}
	// The tool's own client (fleet, recorder, baseline, coldstart loads)
	// talks to etcd over the network as agents and a fresh scheduler
	// would, and keeps its watches off the roles' client streams.
	var own *clientv3.Client
	ownCfg := clientv3.Config{Endpoints: []string{emb.ClientURL}, DialTimeout: cfg.Etcd.DialTimeout,
		DialOptions: etcdgrpc.DialOptions()}
	rolelabel.Do(ctx, "bench etcd client", func(context.Context) { own, err = clientv3.New(ownCfg) })
	if err != nil {
		cleanup()
		return nil, nil, fmt.Errorf("etcd client for %s: %w", emb.ClientURL, err)
	}
	rawtxn.Networked(own, ownCfg)
	cleanups = append(cleanups, func() { own.Close() })
	if tally != nil {
		etcdtally.Wrap(own, tally, "bench etcd client")
	}
	t := &Target{Client: own, Keys: s0.Keys(), etcdEndpoints: []string{emb.ClientURL}, etcdPrefix: cfg.Etcd.Prefix, tally: tally}
	// The recorder reads the member in process: it stands for no role of
	// Berth, and over gRPC the member spent as much CPU encoding its
	// every event (some 17 a server) as the recorder spent decoding them.
	rec, err := s0.InProcessClient()
	if err != nil {
		cleanup()
		return nil, nil, err
	}
	cleanups = append(cleanups, func() { rec.Close() })
	if tally != nil {
		etcdtally.Wrap(rec, tally, "bench recorder client")
	}
	t.recorderClient = rec
	if o.fleetInProcess {
		fc, err := s0.InProcessClient()
		if err != nil {
			cleanup()
			return nil, nil, err
		}
		cleanups = append(cleanups, func() { fc.Close() })
		if tally != nil {
			etcdtally.Wrap(fc, tally, "fleet in-process client")
		}
		t.fleetClient = fc
	}
	if o.etcdOnly {
		return t, cleanup, nil
	}
	if err := s0.StartServerRoles(ctx); err != nil {
		cleanup()
		return nil, nil, err
	}
	for c := 1; c <= o.cells; c++ {
		cc := *cfg.Conductor
		cc.Cell = CellName(c)
		if err := s0.StartConductor(ctx, &cc); err != nil {
			cleanup()
			return nil, nil, err
		}
	}
	t.API = s0.Endpoint("compute API")
	t.base = s0
	if creds != nil {
		creds.AuthURL = s0.Endpoint("identity") + "/v3"
		t.Auth = creds
	}
	if o.procs != nil {
		cleanups = append(cleanups, o.procs.stop)
		if err := o.procs.start(ctx, emb.ClientURL); err != nil {
			cleanup()
			return nil, nil, err
		}
		// The children answer what the in-process stacks give directly,
		// through their control listeners; their placement services are
		// not here, so the claim baseline claims through a placement of
		// the tool's own, and says so.
		t.procs = o.procs
		t.Schedulers = o.procs.n
		t.ClaimWorkers = o.procs.n * cfg.Superconductor.Workers
		return t, cleanup, nil
	}
	for i := 0; i < o.schedulers; i++ {
		sc := *cfg
		sc.API, sc.Conductor, sc.Identity = nil, nil, nil
		etcdCfg := cfg.Etcd
		etcdCfg.Embedded, etcdCfg.Endpoints = nil, []string{emb.ClientURL}
		sc.Etcd = etcdCfg
		// In the tool's process each scheduler stack reaches the member
		// as berth server's roles reach theirs, in process (no gRPC over
		// loopback), on a client of its own that a crash closes alone.
		s, err := stack.ConnectInProcess(&sc, log.Named(fmt.Sprintf("berth-%d", i+1)), s0)
		if err != nil {
			cleanup()
			return nil, nil, err
		}
		cleanups = append(cleanups, s.Stop)
		if tally != nil {
			etcdtally.Wrap(s.Client(), tally, fmt.Sprintf("berth-%d stack", i+1))
		}
		if err := s.StartServerRoles(ctx); err != nil {
			cleanup()
			return nil, nil, err
		}
		t.scheds = append(t.scheds, s)
	}
	t.Schedulers = len(t.scheds)
	t.ClaimWorkers = len(t.scheds) * cfg.Superconductor.Workers
	return t, cleanup, nil
}

// freePorts are ports for the etcd member the tool starts (its client and
// peer URLs), named before it binds (package freeport: below the
// ephemeral range).
func freePorts(n int) ([]int, error) { return freeport.Ports(n) }

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
