package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/agent"
	"github.com/berth-project/berth/api"
	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/rolelabel"
	"github.com/berth-project/berth/placement"
	"github.com/berth-project/berth/scheduler"
)

// RunConfig is a run's parameters: a Config resolved against the
// config file (Main), or a test's.
type RunConfig struct {
	// Load is the scenario and its load, as the flags gave them.
	Load
	// OnPhase, if set, is called as each phase of the run starts
	// ("populate", "scenario", "baseline") and the func it returns as
	// the phase ends: berth bench profiles one phase with it.
	OnPhase         func(phase string) (end func())
	Timeout         time.Duration
	RegisterWorkers int
	// Liveness is the fleet's lease model (LivenessPerHost, the default,
	// or LivenessShared); SkipSyncs leaves out the hosts' periodic
	// provider and instance syncs. The intervals are the agents' (zero:
	// the agent's defaults).
	Liveness  string
	SkipSyncs bool
	// LeaveLeases: the fleet's Close lets the hosts' leases expire
	// instead of revoking them (a Berth the tool started on a temporary
	// etcd, removed at exit).
	LeaveLeases          bool
	ReportInterval       time.Duration
	ServiceDownTime      time.Duration
	ProviderSyncInterval time.Duration
	InstanceSyncInterval time.Duration
	// BackgroundWorkers do the hosts' periodic work (0: the fleet's
	// default).
	BackgroundWorkers int
	// FleetProcs runs the simulated hosts in that many child processes
	// (fleet_procs.go) instead of the tool's (0), with FleetLogLevel,
	// their stderr to FleetStderr (nil: the tool's stderr).
	FleetProcs    int
	FleetLogLevel string
	FleetStderr   io.Writer
	// FleetCPUProfile, with FleetProcs, is the prefix of the children's
	// CPU profiles (child N writes FleetCPUProfile.N) of the phase
	// FleetProfilePhase ("all" or one OnPhase names).
	FleetCPUProfile   string
	FleetProfilePhase string
	// Progress receives a progress line every ProgressEvery (nil: none).
	Progress      io.Writer
	ProgressEvery time.Duration
	Log           hclog.Logger
}

// Scenarios lists what Run accepts.
var Scenarios = []string{"populate", "boot", "churn", "failover", "coldstart", "drain", "resize"}

// Run runs one scenario against t.
func Run(ctx context.Context, t *Target, cfg RunConfig) (*Result, error) {
	if cfg.Log == nil {
		cfg.Log = hclog.NewNullLogger()
	}
	if cfg.Clients <= 0 {
		cfg.Clients = 16
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Minute
	}
	if cfg.BaselineTime <= 0 {
		cfg.BaselineTime = 3 * time.Second
	}
	if cfg.BaselineRounds <= 0 {
		cfg.BaselineRounds = 1
	}
	if cfg.OnPhase == nil {
		cfg.OnPhase = func(string) func() { return func() {} }
	}
	if cfg.ProgressEvery <= 0 {
		cfg.ProgressEvery = 2 * time.Second
	}
	if cfg.Groups <= 0 {
		cfg.Groups = 20
	}
	res := &Result{Scenario: cfg.Scenario, At: time.Now().UTC(), Hosts: cfg.Hosts, Cells: cfg.Cells,
		Schedulers: t.Schedulers}
	res.LoadAvg[0] = LoadAvg()
	defer func() { res.LoadAvg[1] = LoadAvg() }()
	r := &runner{t: t, cfg: cfg, res: res}
	var err error
	switch cfg.Scenario {
	case "coldstart":
		err = r.coldstart(ctx)
	case "populate", "boot", "churn", "failover", "drain", "resize":
		err = r.withFleet(ctx)
	default:
		return nil, fmt.Errorf("unknown scenario %q (want one of %v)", cfg.Scenario, Scenarios)
	}
	res.LoadAvg[1] = LoadAvg()
	return res, err
}

type runner struct {
	t   *Target
	cfg RunConfig
	res *Result

	rec   *Recorder
	fleet hostFleet
	// fleetProcs is fleet when it runs in child processes (else nil).
	fleetProcs *fleetProcs
	nova       *novaClient

	groups    []string
	poolMu    sync.Mutex
	pool      []string // ACTIVE servers, for hints and churn
	posted    atomic.Int64
	expected  atomic.Int64
	apiErrors atomic.Int64
	ids       []string
	idsMu     sync.Mutex
	// pendingWrites is the measured phase's revision range (from, to]
	// whose writes a recorder reading the member counts once the phase
	// is over (readPendingWrites); nil when none is pending.
	pendingWrites *[2]int64
}

func (r *runner) progress(ctx context.Context, what func() string) func() {
	if r.cfg.Progress == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(r.cfg.ProgressEvery)
		defer t.Stop()
		start := time.Now()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				fmt.Fprintf(r.cfg.Progress, "[bench %s %5.1fs] %s (load %s)\n", r.cfg.Scenario,
					time.Since(start).Seconds(), what(), LoadAvg())
			}
		}
	}()
	return func() { cancel(); <-done }
}

// withFleet populates the fleet and runs the scenario that needs it.
func (r *runner) withFleet(ctx context.Context) (err error) {
	cfg, t := r.cfg, r.t
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	from, err := r.revision(ctx)
	if err != nil {
		return err
	}
	from++
	r.rec = NewRecorder(t.recorderCli(), t.Keys)
	if m := t.etcdMember(); m != nil {
		r.rec.ReadMember(m, t.tally)
	}
	var bg sync.WaitGroup
	bgErr := make(chan error, 2)
	bg.Add(1)
	recCtx, stopRec := context.WithCancel(ctx)
	defer stopRec()
	recDone := make(chan struct{})
	rolelabel.Go(recCtx, recorderRole, func(recCtx context.Context) {
		defer bg.Done()
		defer close(recDone)
		if err := r.rec.Run(recCtx, from); err != nil && recCtx.Err() == nil {
			bgErr <- err
			cancel()
		}
	})
	defer bg.Wait()
	defer cancel()
	defer func() {
		// A failed watch cancels everything; say so rather than only
		// "context canceled".
		select {
		case e := <-bgErr:
			if err == nil {
				err = e
			} else {
				err = fmt.Errorf("%w (because %v)", err, e)
			}
		default:
		}
	}()

	fcfg := FleetConfig{Hosts: cfg.Hosts, Cells: cfg.Cells,
		BuildTime: cfg.BuildTime, FailureRate: cfg.FailureRate, RegisterWorkers: cfg.RegisterWorkers,
		Liveness: cfg.Liveness, SkipSyncs: cfg.SkipSyncs, LeaveLeases: cfg.LeaveLeases, ReportInterval: cfg.ReportInterval,
		ServiceDownTime: cfg.ServiceDownTime, ProviderSyncInterval: cfg.ProviderSyncInterval,
		InstanceSyncInterval: cfg.InstanceSyncInterval, BackgroundWorkers: cfg.BackgroundWorkers}
	if cfg.FleetProcs > 0 {
		if t.etcdEndpoints == nil {
			return errors.New("fleet processes need the etcd the tool starts")
		}
		stderr := cfg.FleetStderr
		if stderr == nil {
			stderr = os.Stderr
		}
		r.fleetProcs, err = newFleetProcs(cfg.FleetProcs, fcfg, t.etcdEndpoints, t.etcdPrefix, cfg.FleetLogLevel, stderr, cfg.Log)
		r.fleet = r.fleetProcs
		r.res.FleetProcs = cfg.FleetProcs
		if err == nil {
			r.fleetProcs.profile = cfg.FleetCPUProfile
			cfg.OnPhase = r.fleetProcs.profiling(cfg.FleetProfilePhase, cfg.OnPhase)
		}
	} else {
		place := placement.New(t.fleetCli(), t.Keys, cfg.Log) // its store only, as agents use it
		r.fleet, err = NewFleet(t.fleetCli(), t.Keys, place, fcfg, cfg.Log)
		if t.fleetClient != nil {
			r.res.FleetEtcd = FleetEtcdInProcess
		}
	}
	if err != nil {
		return err
	}
	every := r.fleet.Intervals()
	r.res.Liveness, r.res.PeriodicSyncs = r.fleet.Liveness(), !cfg.SkipSyncs
	r.res.ReportInterval, r.res.ServiceDownTime = every.ReportInterval.String(), every.ServiceDownTime.String()
	r.res.ProviderSyncInterval, r.res.InstanceSyncInterval = every.ProviderSyncInterval.String(), every.InstanceSyncInterval.String()
	defer r.fleet.Close()
	// The fleet watches before it registers, so its watch is live (synced)
	// rather than catching up on every registration write: a watch far
	// behind holds up the progress notifications other watchers on the
	// same client stream wait for, and may be compacted away.
	bg.Add(1)
	rolelabel.Go(ctx, "agent fleet", func(ctx context.Context) {
		defer bg.Done()
		if err := r.fleet.Run(ctx, from); err != nil {
			bgErr <- err
			cancel()
		}
	})
	var registered atomic.Int64
	stop := r.progress(ctx, func() string {
		line := fmt.Sprintf("registered %d/%d hosts", registered.Load(), cfg.Hosts)
		if r.fleet.Liveness() == LivenessPerHost {
			bg := r.fleet.Background()
			line += fmt.Sprintf("; %d leases re-granted, %d renewals; %s", bg.Regrants, bg.Renewals, bg.Liveness)
		}
		return line
	})
	start := time.Now()
	endPhase := cfg.OnPhase("populate")
	err = r.fleet.Register(ctx, func(n int) { registered.Store(int64(n)) })
	endPhase()
	stop()
	if err != nil {
		return fmt.Errorf("populate: %w", err)
	}
	r.res.PopulateSeconds = time.Since(start).Seconds()
	r.res.HostsPerSec = float64(cfg.Hosts) / r.res.PopulateSeconds
	if cfg.Scenario == "populate" {
		return nil
	}
	rev, err := r.revision(ctx)
	if err != nil {
		return err
	}
	if err := t.sync(ctx, rev); err != nil {
		return fmt.Errorf("wait for the schedulers to see the hosts: %w", err)
	}
	r.nova = newNovaClient(t.API, &http.Client{Transport: newTransport(cfg.Clients), Timeout: 30 * time.Second}, t.Auth)
	if cfg.Scenario == "drain" && t.Auth == nil {
		r.nova.setToken("admin:bench") // noauth2's admin: drains are an admin's
	}
	r.res.Auth = "noauth"
	if t.Auth != nil {
		r.res.Auth = "keystone"
	}
	defer func() { r.res.Logins = int(r.nova.logins.Load()) }()
	if err := r.makeGroups(ctx); err != nil {
		return err
	}
	endPhase = cfg.OnPhase("scenario")
	switch cfg.Scenario {
	case "boot", "failover":
		err = r.boot(ctx)
	case "churn":
		err = r.churn(ctx)
	case "drain":
		err = r.drain(ctx)
	case "resize":
		err = r.resize(ctx)
	}
	endPhase()
	switch cfg.Scenario {
	case "boot", "failover", "churn":
		// After the phase's profile: heapMB forces a collection, which
		// marks the whole live heap and sweeps every span. Taken inside,
		// it added one collection's marking (~0.2 s at 10k hosts, a
		// sixth of the GC share the report gives the phase) and its
		// sweeping counted as the API clients' CPU.
		r.res.HeapMB = heapMB()
	}
	if werr := r.readPendingWrites(ctx); err == nil {
		err = werr
	}
	if err == nil && cfg.Baseline {
		// The recorder's watch of the whole prefix is the tool's, not
		// Berth's: it is stopped before the baselines, so neither the
		// CAS nor the claims pay for its decoding.
		stopRec()
		<-recDone
		endPhase = cfg.OnPhase("baseline")
		err = r.baseline(ctx)
		endPhase()
	}
	return err
}

// readPendingWrites fills the result's write table from the member's
// history, for a phase that finished with the recorder reading it.
func (r *runner) readPendingWrites(ctx context.Context) error {
	if r.pendingWrites == nil {
		return nil
	}
	from, to := r.pendingWrites[0], r.pendingWrites[1]
	r.pendingWrites = nil
	var w Writes
	var err error
	rolelabel.Do(ctx, recorderRole, func(context.Context) { w, err = r.rec.writes(from, to) })
	if err != nil {
		return err
	}
	r.res.Writes = &w
	return nil
}

func (r *runner) makeGroups(ctx context.Context) error {
	if r.cfg.GroupRatio <= 0 {
		return nil
	}
	policies := []string{"anti-affinity", "soft-anti-affinity", "soft-affinity", "affinity"}
	for i := 0; i < r.cfg.Groups; i++ {
		id, err := r.nova.createServerGroup(ctx, fmt.Sprintf("bench-%d", i), policies[i%len(policies)])
		if err != nil {
			return fmt.Errorf("create server group: %w", err)
		}
		r.groups = append(r.groups, id)
	}
	return nil
}

var flavors = []string{"m1.tiny", "m1.small", "m1.small", "m1.medium", "m1.large"}

// request is server i's create: a mixed flavor, maybe a same_host or
// different_host hint naming an ACTIVE server, maybe a group (whose
// members are m1.tiny, so an affinity group fits on one host).
func (r *runner) request(i int64) api.CreateRequest {
	req := api.CreateRequest{Name: fmt.Sprintf("bench-%d", i), Flavor: flavors[rand.IntN(len(flavors))], Count: 1}
	if r.cfg.HintRatio > 0 && rand.Float64() < r.cfg.HintRatio {
		r.poolMu.Lock()
		var other string
		if len(r.pool) > 0 {
			other = r.pool[rand.IntN(len(r.pool))]
		}
		r.poolMu.Unlock()
		if other != "" {
			if rand.IntN(2) == 0 {
				req.Hints = map[string]any{"same_host": other}
				req.Flavor = "m1.tiny"
			} else {
				req.Hints = map[string]any{"different_host": other}
			}
		}
	}
	if len(r.groups) > 0 && rand.Float64() < r.cfg.GroupRatio {
		if req.Hints == nil {
			req.Hints = map[string]any{}
		}
		req.Hints["group"] = r.groups[rand.IntN(len(r.groups))]
		req.Flavor = "m1.tiny"
	}
	return req
}

// create posts one server and tracks it; it returns its id.
func (r *runner) create(ctx context.Context, i int64) (string, error) {
	req := r.request(i)
	t0 := time.Now()
	id, err := r.nova.createServer(ctx, req)
	t1 := time.Now()
	r.posted.Add(1)
	if err != nil {
		r.apiErrors.Add(1)
		return "", fmt.Errorf("create server: %w", err)
	}
	r.rec.Expect([]string{id}, t0, t1)
	r.expected.Add(1)
	r.idsMu.Lock()
	r.ids = append(r.ids, id)
	r.idsMu.Unlock()
	return id, nil
}

// poolWhenActive adds id to the pool once ACTIVE, without waiting for it.
func (r *runner) poolWhenActive(ctx context.Context, id string) {
	done := r.rec.Done(id)
	go r.poolOnceDone(ctx, id, done)
}

// poolOnceDone waits until id has finished (done) and adds it to the pool
// if it went ACTIVE; false when ctx ended first.
func (r *runner) poolOnceDone(ctx context.Context, id string, done <-chan struct{}) bool {
	select {
	case <-done:
	case <-ctx.Done():
		return false
	}
	if r.rec.isActive(id) {
		r.poolMu.Lock()
		r.pool = append(r.pool, id)
		r.poolMu.Unlock()
	}
	return true
}

// ticker paces creates at rate per second (nil when unlimited).
func pacer(ctx context.Context, rate float64) <-chan struct{} {
	if rate <= 0 {
		return nil
	}
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		interval := time.Duration(float64(time.Second) / rate)
		next := time.Now()
		for {
			// Catch up after a slow send instead of drifting below the rate.
			if d := time.Until(next); d > 0 {
				select {
				case <-time.After(d):
				case <-ctx.Done():
					return
				}
			}
			select {
			case ch <- struct{}{}:
			case <-ctx.Done():
				return
			}
			next = next.Add(interval)
		}
	}()
	return ch
}

func (r *runner) boot(ctx context.Context) error {
	cfg := r.cfg
	n := int64(cfg.Servers)
	if n <= 0 {
		return fmt.Errorf("boot: -servers must be at least 1")
	}
	r.res.Servers, r.res.Clients, r.res.Rate, r.res.BuildTime = cfg.Servers, cfg.Clients, cfg.Rate, cfg.BuildTime.String()
	stop := r.progress(ctx, func() string {
		line := fmt.Sprintf("posted %d/%d, finished %d, API errors %d, casts worked %d", r.posted.Load(), n,
			r.rec.Finished(), r.apiErrors.Load(), r.fleet.Worked())
		if r.fleet.Liveness() == LivenessPerHost {
			bg := r.fleet.Background()
			line += fmt.Sprintf("; %d leases re-granted; %s", bg.Regrants, bg.Liveness)
		}
		return line
	})
	defer stop()
	m, err := r.startMeasuring(ctx)
	if err != nil {
		return err
	}
	pace := pacer(ctx, cfg.Rate)
	var next atomic.Int64
	var failover *failoverWatch
	if cfg.Scenario == "failover" {
		failover = &failoverWatch{at: max(n/3, 1)} // a third of the way in, but always
	}
	var wg sync.WaitGroup
	var firstErr error
	var errMu sync.Mutex
	for c := 0; c < cfg.Clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > n {
					return
				}
				if pace != nil {
					if _, ok := <-pace; !ok {
						return
					}
				}
				if failover != nil && i == failover.at {
					go failover.kill(ctx, r)
				}
				id, err := r.create(ctx, i)
				if err != nil {
					errMu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					errMu.Unlock()
					continue
				}
				if cfg.HintRatio > 0 {
					r.poolWhenActive(ctx, id)
				}
			}
		}()
	}
	wg.Wait()
	wctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	werr := r.rec.WaitFinished(wctx, int(r.expected.Load()))
	cancel()
	if werr != nil {
		// Before finish: its baselines write more, and the state is what
		// the lost servers were left in.
		werr = fmt.Errorf("%w; unfinished:%s", werr, r.unfinishedReport(ctx))
	}
	if err := r.finish(ctx, m); err != nil {
		return err
	}
	if failover != nil {
		if err := failover.wait(ctx); err != nil {
			return err
		}
		r.res.LeaderKilled, r.res.NewLeader, r.res.NewLeaderSeconds = failover.killed, failover.newLeader, failover.took.Seconds()
	}
	if werr != nil {
		return fmt.Errorf("boot: %w", werr)
	}
	if err := r.checkThroughAPI(ctx, 10); err != nil {
		return fmt.Errorf("boot: %w", err)
	}
	if r.res.Lost > 0 {
		return fmt.Errorf("boot: %d servers lost", r.res.Lost)
	}
	if firstErr != nil {
		return fmt.Errorf("boot: %d API errors, first: %w", r.apiErrors.Load(), firstErr)
	}
	return nil
}

func (r *runner) revision(ctx context.Context) (int64, error) {
	resp, err := r.t.Client.Get(ctx, r.t.Keys.Cell("-"), clientv3.WithCountOnly())
	if err != nil {
		return 0, fmt.Errorf("read etcd revision: %w", err)
	}
	return resp.Header.Revision, nil
}

func (r *runner) claimStats() placement.ClaimStats { return r.t.claimStats() }

// fleetCPU is the fleet processes' CPU (-fleet-procs), which is not
// counted as the process's: the fleet stands for hosts elsewhere.
func (r *runner) fleetCPU() time.Duration {
	if r.fleetProcs == nil {
		return 0
	}
	return r.fleetProcs.CPU()
}

// cpuTime is the process's CPU and its scheduler processes'.
func (r *runner) cpuTime() time.Duration { return cpuTime() + r.childCPU() }

func (r *runner) childCPU() time.Duration { return r.t.childCPU() }

// measuring is what a measured phase started from.
type measuring struct {
	claims placement.ClaimStats
	// leaseWon and leaseLost are the superconductors' lease counters.
	leaseWon, leaseLost float64
	rev                 int64
	background          BackgroundStats
	cpu                 time.Duration
	child               time.Duration
	fleetCPU            time.Duration // fleet processes' (not in cpu)
	gc                  gcSnapshot
	start               time.Time
}

// startMeasuring zeroes the recorder's write counters and notes the claim
// counters, etcd revision, process CPU and time the phase starts from.
func (r *runner) startMeasuring(ctx context.Context) (measuring, error) {
	m := measuring{claims: r.claimStats()}
	m.leaseWon, m.leaseLost = r.t.leaseAttempts()
	r.rec.StartCounting()
	if r.t.tally != nil {
		r.t.tally.Reset()
	}
	r.fleet.ResetLate()
	m.background = r.fleet.Background()
	rev, err := r.revision(ctx)
	if err != nil {
		return m, err
	}
	m.rev, m.cpu, m.child, m.start = rev, r.cpuTime(), r.childCPU(), time.Now()
	m.fleetCPU = r.fleetCPU()
	m.gc = readGC()
	return m, nil
}

// finish ends the phase begun by m and fills the result from the recorder.
func (r *runner) finish(ctx context.Context, m measuring) error {
	elapsed := time.Since(m.start)
	r.res.CPUSeconds = (r.cpuTime() - m.cpu).Seconds()
	r.res.SchedulerProcsCPUSeconds = (r.childCPU() - m.child).Seconds()
	r.res.FleetProcsCPUSeconds = (r.fleetCPU() - m.fleetCPU).Seconds()
	gcEnd := readGC()
	rev1, err := r.revision(ctx)
	if err != nil {
		return err
	}
	rev0, claims0 := m.rev, m.claims
	r.idsMu.Lock()
	ids := append([]string(nil), r.ids...)
	r.idsMu.Unlock()
	samples, o := r.rec.stageSamples(ids)
	res := r.res
	res.Active, res.Errors, res.NoValidHost, res.Lost, res.Reschedules = o.Active, o.Error, o.NoValidHost, o.Lost, o.Reschedules
	res.APIErrors = int(r.apiErrors.Load())
	res.Seconds = elapsed.Seconds()
	if span := o.lastActive.Sub(o.firstStart); o.Active > 0 && span > 0 {
		res.ServersPerSec = float64(o.Active) / span.Seconds()
	}
	res.Stages = map[string]Pct{}
	for k, v := range samples {
		res.Stages[k] = pct(v)
	}
	if n, span := r.rec.claimSpan(ids); n > 1 && span > 0 {
		res.ClaimsPerSec = float64(n) / span.Seconds()
	}
	c := r.claimStats()
	res.ClaimRaces, res.ClaimFailures = c.Races-claims0.Races, c.GaveUp-claims0.GaveUp
	res.ClaimReplans = c.Replans - claims0.Replans
	if r.t.countsLeases() {
		won, lost := r.t.leaseAttempts()
		res.LeasesWon, res.LeasesLost = int64(won-m.leaseWon), int64(lost-m.leaseLost)
	}
	if n := c.Txns - claims0.Txns; n > 0 {
		res.ClaimsPerTxn = float64(c.Batched-claims0.Batched) / float64(n)
	}
	if n := c.Writes - claims0.Writes; n > 0 {
		res.ClaimMeanMs = float64((c.Time - claims0.Time).Microseconds()) / 1000 / float64(n)
	}
	bg, bg0 := r.fleet.Background(), m.background
	if secs := elapsed.Seconds(); secs > 0 {
		res.RenewalsPerSec = float64(bg.Renewals-bg0.Renewals) / secs
		res.ProviderSyncsPerSec = float64(bg.ProviderSyncs-bg0.ProviderSyncs) / secs
		res.InstanceSyncsPerSec = float64(bg.InstanceSyncs-bg0.InstanceSyncs) / secs
	}
	res.LeasesRegranted, res.BackgroundFailures = bg.Regrants-bg0.Regrants, bg.Failures-bg0.Failures
	res.BackgroundOverlapped, res.BackgroundPeriodLate = bg.Overlapped-bg0.Overlapped, bg.PeriodLate-bg0.PeriodLate
	res.BackgroundMaxLateMs = float64(bg.MaxLate.Microseconds()) / 1000
	if r.fleet.Liveness() == LivenessPerHost {
		res.LivenessTrace = bg.Liveness.Sub(bg0.Liveness).String()
	}
	// An instance sync puts the host's uuid list when it changed or is
	// due for its periodic rewrite; a re-granted lease puts the alive key
	// again. Provider syncs write only on a change.
	res.BackgroundWrites = (bg.InstanceSyncWrites - bg0.InstanceSyncWrites) + (bg.Regrants - bg0.Regrants)
	if r.rec.member != nil {
		// Read from the member's history once the phase is over, outside
		// its profile: the read is the tool's work, not Berth's.
		r.pendingWrites = &[2]int64{rev0, rev1}
	} else {
		w, err := r.rec.writes(rev0, rev1)
		if err != nil {
			return err
		}
		res.Writes = &w
	}
	res.RecorderLate = r.rec.late()
	if r.t.tally != nil {
		res.EtcdRequests = r.t.tally.Rows()
	}
	res.Measured = len(ids)
	if len(ids) > 0 {
		res.CPUMsPerServer = res.CPUSeconds * 1000 / float64(len(ids))
		// The etcd revision delta: every write transaction of the phase,
		// the pipeline's and anything else's (leader sweeps write nothing
		// when there is nothing to fix).
		res.WritesPerServer = float64(rev1-rev0) / float64(len(ids))
		res.BackgroundWritesPerServer = float64(res.BackgroundWrites) / float64(len(ids))
	}
	res.GC = gcStats(m.gc, gcEnd, len(ids))
	// res.HeapMB: withFleet, once the phase's profile has stopped.
	return nil
}

// churn keeps -servers servers alive and, for -duration, each client
// deletes a random ACTIVE one and boots a replacement, waiting for it.
func (r *runner) churn(ctx context.Context) error {
	cfg := r.cfg
	if cfg.Servers <= 0 || cfg.Duration <= 0 {
		return fmt.Errorf("churn: -servers (the steady population) and -duration must be positive")
	}
	// The steady population first.
	var next atomic.Int64
	var wg sync.WaitGroup
	errc := make(chan error, cfg.Clients)
	for c := 0; c < cfg.Clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > int64(cfg.Servers) {
					return
				}
				id, err := r.create(ctx, i)
				if err != nil {
					errc <- err
					return
				}
				r.poolWhenActive(ctx, id)
			}
		}()
	}
	wg.Wait()
	select {
	case err := <-errc:
		return err
	default:
	}
	wctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	err := r.rec.WaitFinished(wctx, int(r.expected.Load()))
	cancel()
	if err != nil {
		return fmt.Errorf("churn: steady population: %w", err)
	}
	// The measured phase: only the replacements count.
	r.idsMu.Lock()
	r.ids = nil
	r.idsMu.Unlock()
	r.res.Servers, r.res.Clients, r.res.BuildTime = cfg.Servers, cfg.Clients, cfg.BuildTime.String()
	var deleted atomic.Int64
	stop := r.progress(ctx, func() string {
		return fmt.Sprintf("replaced %d, finished %d, API errors %d", deleted.Load(), r.rec.Finished(), r.apiErrors.Load())
	})
	defer stop()
	m, err := r.startMeasuring(ctx)
	if err != nil {
		return err
	}
	deadline := m.start.Add(cfg.Duration)
	for c := 0; c < cfg.Clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) && ctx.Err() == nil {
				r.poolMu.Lock()
				if len(r.pool) == 0 {
					r.poolMu.Unlock()
					errc <- errors.New("churn: no ACTIVE server left to delete")
					return
				}
				k := rand.IntN(len(r.pool))
				victim := r.pool[k]
				r.pool[k] = r.pool[len(r.pool)-1]
				r.pool = r.pool[:len(r.pool)-1]
				r.poolMu.Unlock()
				if err := r.nova.deleteServer(ctx, victim); err != nil {
					errc <- fmt.Errorf("churn: delete %s: %w", victim, err)
					return
				}
				deleted.Add(1)
				id, err := r.create(ctx, int64(cfg.Servers)+next.Add(1))
				if err != nil {
					errc <- err
					return
				}
				if !r.poolOnceDone(ctx, id, r.rec.Done(id)) {
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := r.finish(ctx, m); err != nil {
		return err
	}
	r.res.Deleted = int(deleted.Load())
	// Replacements per second over the phase (each one a delete too).
	r.res.ServersPerSec = float64(r.res.Active) / r.res.Seconds
	select {
	case err := <-errc:
		return err
	default:
	}
	if r.res.Lost > 0 {
		return fmt.Errorf("churn: %d servers lost", r.res.Lost)
	}
	return nil
}

// baseline measures etcd's single-key compare-and-swap transactions with
// as many workers as claims can be in flight, each on its own key (claims
// of different servers mostly touch different providers), and claims
// alone with the same workers, in alternating rounds.
func (r *runner) baseline(ctx context.Context) (err error) {
	workers := r.t.ClaimWorkers
	if workers <= 0 {
		workers = r.cfg.Clients
	}
	// Claims alone, through the schedulers' own placement services when
	// the tool started them (the claim select_destinations makes: planned
	// from the watch-fed index, one compare-and-swap transaction on
	// consumer and provider, batched with the claims ready at the same
	// moment), with the same workers spread over the schedulers: what the
	// claim design costs over a bare CAS, without the scheduling in front.
	var svcs []*placement.Service
	var providers []string
	if r.fleet != nil {
		svcs, r.res.ClaimOnlyVia = r.t.claimServices(), "the schedulers' placement: index-planned claim txn, group commit"
		if len(svcs) == 0 {
			svcs = []*placement.Service{placement.New(r.t.Client, r.t.Keys, r.cfg.Log)}
			r.res.ClaimOnlyVia = "a placement of the tool's own: read + claim txn"
		}
		r.res.ClaimOnlyServices = len(svcs)
		providers = make([]string, r.fleet.Hosts())
		for i := range providers {
			providers[i] = agent.ProviderUUIDForHost(r.fleet.HostName(i + 1))
		}
	}
	var made []string
	defer func() {
		// Every claim is freed again, whatever happened (the rounds free
		// their own; this is for a round that failed).
		if ferr := freeAll(ctx, svcs, made); err == nil {
			err = ferr
		}
	}()
	before := claimStats(svcs)
	var casN, claimN int64
	var casT, claimT, casCPU, claimCPU time.Duration
	for round := 0; round < r.cfg.BaselineRounds; round++ {
		cpu0 := cpuTime()
		n, d, err := casRound(ctx, r.t.Client, r.t.Keys, workers, r.cfg.BaselineTime)
		if err != nil {
			return err
		}
		casN, casT, casCPU = casN+n, casT+d, casCPU+cpuTime()-cpu0
		r.res.CASRounds = append(r.res.CASRounds, float64(n)/d.Seconds())
		if svcs == nil {
			continue
		}
		cpu0 = cpuTime()
		n, d, m, err := claimRound(ctx, svcs, providers, workers, r.cfg.BaselineTime)
		made = append(made, m...)
		if err != nil {
			return err
		}
		claimN, claimT, claimCPU = claimN+n, claimT+d, claimCPU+cpuTime()-cpu0
		// Each round starts from the state the first did: claims left
		// in place would fill small fleets up (1,000 hosts ran out of
		// VCPU in the third round) and grow every index round by round.
		if err := freeAll(ctx, svcs, made); err != nil {
			return err
		}
		made = nil
		r.res.ClaimOnlyRounds = append(r.res.ClaimOnlyRounds, float64(n)/d.Seconds())
	}
	r.res.BaselineRounds, r.res.CASWorkers = r.cfg.BaselineRounds, workers
	r.res.CASPerSec = float64(casN) / casT.Seconds()
	if casN > 0 {
		r.res.CASCPUMicros = float64(casCPU.Microseconds()) / float64(casN)
	}
	if r.res.CASPerSec > 0 {
		r.res.ClaimCASRatio = r.res.ClaimsPerSec / r.res.CASPerSec
	}
	if svcs == nil {
		return nil
	}
	stats := claimStats(svcs)
	if txns := stats.Txns - before.Txns; txns > 0 {
		r.res.ClaimOnlyPerTxn = float64(stats.Batched-before.Batched) / float64(txns)
	}
	r.res.ClaimOnlyPerSec = float64(claimN) / claimT.Seconds()
	if claimN > 0 {
		r.res.ClaimOnlyCPUMicros = float64(claimCPU.Microseconds()) / float64(claimN)
	}
	if r.res.CASPerSec > 0 {
		r.res.ClaimOnlyCASRatio = r.res.ClaimOnlyPerSec / r.res.CASPerSec
	}
	return nil
}

// claimStats sums the services' claim counters.
func claimStats(services []*placement.Service) placement.ClaimStats {
	var sum placement.ClaimStats
	for _, s := range services {
		sum.Add(s.ClaimStats())
	}
	return sum
}

// claimRound runs workers goroutines claiming one VCPU for a fresh
// consumer on providers (worker w uses providers w, w+workers, ...,
// round-robin, so workers do not race each other) through services
// (worker w through services[w % len]) for d. It returns the claims
// made, how long that took, and their consumers, to be freed.
func claimRound(ctx context.Context, services []*placement.Service, providers []string, workers int, d time.Duration) (int64, time.Duration, []string, error) {
	if len(providers) < workers {
		workers = len(providers)
	}
	var total atomic.Int64
	errc := make(chan error, workers)
	var mu sync.Mutex
	var made []string
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(d)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			place := services[w%len(services)]
			var mine []string
			defer func() { mu.Lock(); made = append(made, mine...); mu.Unlock() }()
			for i := w; time.Now().Before(deadline); i += workers {
				c := uuid.NewString()
				err := place.PutAllocations(ctx, c, placement.AllocationWrite{ProjectID: "bench", UserID: "bench",
					Allocations: map[string]placement.ProviderAllocation{providers[i%len(providers)]: {
						Resources: map[string]int64{placement.VCPU: 1}}}})
				if err != nil {
					errc <- fmt.Errorf("claim baseline: %w", err)
					return
				}
				mine = append(mine, c)
				total.Add(1)
			}
		}(w)
	}
	wg.Wait()
	took := time.Since(start)
	select {
	case err := <-errc:
		return total.Load(), took, made, err
	default:
	}
	return total.Load(), took, made, nil
}

// freeAll deletes the baseline's claims, many at a time, through the
// services in turn.
func freeAll(ctx context.Context, services []*placement.Service, consumers []string) error {
	if len(consumers) == 0 {
		return nil
	}
	ctx = context.WithoutCancel(ctx)
	var wg sync.WaitGroup
	errc := make(chan error, 1)
	next := make(chan string)
	for w := 0; w < 64; w++ {
		wg.Add(1)
		place := services[w%len(services)]
		go func() {
			defer wg.Done()
			for c := range next {
				if err := place.DeleteAllocations(ctx, c); err != nil {
					select {
					case errc <- fmt.Errorf("claim baseline: free %s: %w", c, err):
					default:
					}
				}
			}
		}()
	}
	for _, c := range consumers {
		next <- c
	}
	close(next)
	wg.Wait()
	select {
	case err := <-errc:
		return err
	default:
		return nil
	}
}

// casRound runs workers goroutines, each compare-and-swapping its own
// key (If(ModRevision == last) Then(Put)) for d, and returns the swaps
// made and how long they took. The keys are deleted afterwards. The
// clock starts once every worker has written its key, and each swaps at
// least once: the clock once started before the puts, and on a loaded
// machine they outlasted a 300 ms window, no swap ran and the baseline
// read 0 (a smoke run failed on it).
func casRound(ctx context.Context, cli *clientv3.Client, keys etcdschema.Keys, workers int, d time.Duration) (int64, time.Duration, error) {
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_, _ = cli.Delete(dctx, keys.BenchCASPrefix(), clientv3.WithPrefix())
	}()
	var total atomic.Int64
	errc := make(chan error, workers)
	var ready, wg sync.WaitGroup
	begin := make(chan struct{})
	var start, deadline time.Time // written before begin is closed
	for w := 0; w < workers; w++ {
		wg.Add(1)
		ready.Add(1)
		go func(w int) {
			defer wg.Done()
			key := keys.BenchCAS(w)
			resp, err := cli.Put(ctx, key, "0")
			ready.Done()
			if err != nil {
				errc <- fmt.Errorf("baseline: %w", err)
				return
			}
			<-begin
			rev := resp.Header.Revision
			// At least one swap each, however short d: a rate, never 0.
			for i := 1; i == 1 || time.Now().Before(deadline); i++ {
				t, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).
					Then(clientv3.OpPut(key, strconv.Itoa(i))).Commit()
				if err != nil {
					errc <- fmt.Errorf("baseline: %w", err)
					return
				}
				if !t.Succeeded {
					errc <- fmt.Errorf("baseline: %s changed under its only writer", key)
					return
				}
				rev = t.Header.Revision
				total.Add(1)
			}
		}(w)
	}
	ready.Wait()
	start = time.Now()
	deadline = start.Add(d)
	close(begin)
	wg.Wait()
	took := time.Since(start)
	select {
	case err := <-errc:
		return 0, took, err
	default:
	}
	return total.Load(), took, nil
}

// failoverWatch kills the scheduler leader once the at-th server is
// posted and times how long until another scheduler leads.
type failoverWatch struct {
	at        int64
	done      chan struct{}
	once      sync.Once
	killed    string
	newLeader string
	took      time.Duration
	err       error
}

func (f *failoverWatch) kill(ctx context.Context, r *runner) {
	f.once.Do(func() { f.done = make(chan struct{}) })
	defer close(f.done)
	if !r.t.canKill() {
		f.err = errors.New("failover: the target has no in-process schedulers to kill (run without -api/-etcd)")
		return
	}
	leader, err := Leader(ctx, r.t.Client, r.t.Keys)
	if err != nil {
		f.err = err
		return
	}
	f.killed = leader
	start := time.Now()
	if err := r.t.killLeader(ctx, leader); err != nil {
		f.err = fmt.Errorf("failover: kill %s: %w", leader, err)
		return
	}
	for {
		l, err := Leader(ctx, r.t.Client, r.t.Keys)
		if err == nil && l != "" && l != leader {
			f.newLeader, f.took = l, time.Since(start)
			return
		}
		select {
		case <-time.After(20 * time.Millisecond):
		case <-ctx.Done():
			f.err = ctx.Err()
			return
		}
	}
}

func (f *failoverWatch) wait(ctx context.Context) error {
	f.once.Do(func() { f.done = make(chan struct{}) })
	if f.killed == "" && f.err == nil {
		select {
		case <-f.done:
		case <-ctx.Done():
			return ctx.Err()
		}
	} else {
		<-f.done
	}
	return f.err
}

// Leader is the id of the scheduler that leads: the value of the election
// key with the lowest create revision ("" when none campaigns).
func Leader(ctx context.Context, cli *clientv3.Client, keys etcdschema.Keys) (string, error) {
	resp, err := cli.Get(ctx, keys.Election(scheduler.Role)+"/", clientv3.WithFirstCreate()...)
	if err != nil {
		return "", fmt.Errorf("read the scheduler election: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return "", nil
	}
	return string(resp.Kvs[0].Value), nil
}

// checkThroughAPI shows up to n of the run's servers through the
// compute API, after the measured phase, and fails when one the
// recorder saw go ACTIVE (in etcd) is not ACTIVE there: what an
// operator's client reads is what the run counted.
func (r *runner) checkThroughAPI(ctx context.Context, n int) error {
	r.idsMu.Lock()
	ids := append([]string(nil), r.ids...)
	r.idsMu.Unlock()
	for i, id := range ids {
		if i >= n {
			break
		}
		v, err := r.nova.showServer(ctx, id)
		if err != nil {
			return fmt.Errorf("show server %s: %w", id, err)
		}
		if r.rec.isActive(id) && v.Status != etcdschema.StatusActive {
			return fmt.Errorf("server %s is ACTIVE in etcd, %s through the API", id, v.Status)
		}
	}
	return nil
}
