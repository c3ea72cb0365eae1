package bench

import (
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/berth-project/berth/etcdschema"
)

// Load is what a run asks of Berth: the scenario, the servers and their
// requests, the fleet's size, and the baselines. Config (the flags) and
// RunConfig (a resolved run) both carry it, so Main hands it over whole.
type Load struct {
	Scenario         string
	Hosts, Cells     int
	Servers          int
	Rate             float64
	Clients          int
	BuildTime        time.Duration
	FailureRate      float64
	HintRatio        float64
	GroupRatio       float64
	Groups           int
	Duration         time.Duration
	InstancesPerHost int
	// The drain scenario: how many hosts are drained at once, the
	// servers put on each first, and each drain's parallelism.
	DrainHosts     int
	ServersPerHost int
	DrainParallel  int
	// The resize scenario: servers resized back and forth at once, and
	// the quota limits of every project of the Berth the tool starts
	// ("cores=N,ram=M", os-quota-sets names; "": none, unlimited).
	ResizeParallel int
	ResizeQuota    string
	Baseline       bool
	BaselineTime   time.Duration
	// BaselineRounds alternates the CAS and the claim baselines this many
	// times, BaselineTime each, and reports both rates over all rounds:
	// the machine's speed drifts by a third within minutes (other
	// tenants, CPU steal), and one sample of each, taken one after the
	// other, put that drift into their ratio.
	BaselineRounds int
}

// Config is what `berth bench` is asked, one field per flag: the scenario
// and its load, the Berth it runs against (started here, or an existing
// one), the simulated hosts' periods, and the outputs. AddFlags binds
// the flags to it, Validate checks it, and Main runs it.
type Config struct {
	Load

	// The Berth the tool starts: its schedulers, in this process or as
	// child processes (in CPU cgroups of their own with SchedulerCPU),
	// and its workers.
	Schedulers     int
	SchedulerProcs bool
	SchedulerCPU   float64
	// FleetProcs runs the simulated hosts in child processes (0: in the
	// tool's process).
	FleetProcs int
	// FleetEtcd is how the simulated hosts in the tool's process reach
	// etcd: FleetEtcdGRPC (default), as agents on other machines do, or
	// FleetEtcdInProcess, as berth dev's agents do (the member's gRPC
	// serving of the agents left out of the figures).
	FleetEtcd        string
	Workers          int
	ConductorWorkers int

	// The simulated hosts: how they register, keep their liveness and
	// sync (zero periods: the config's agent block).
	RegisterWorkers      int
	Liveness             string
	Syncs                bool
	ReportInterval       time.Duration
	ServiceDownTime      time.Duration
	ProviderSyncInterval time.Duration
	InstanceSyncInterval time.Duration
	BackgroundWorkers    int

	// Etcd (comma-separated endpoints) and API name an existing Berth
	// instead of starting one.
	Etcd       string
	API        string
	Prefix     string
	ConfigPath string
	DataDir    string
	// NoAuth runs the compute API without authentication (noauth2), to
	// compare with the default: keystone auth, every request with a
	// token from Berth's identity. Against an existing Berth the login
	// is OS_AUTH_URL, OS_USERNAME, OS_PASSWORD and OS_PROJECT_NAME.
	NoAuth bool
	// EtcdTally counts the measured phase's etcd requests by kind and
	// by the role that made them (package etcdtally), for a Berth the
	// tool starts; off by default, as counting costs a little CPU.
	EtcdTally bool

	// Outputs.
	JSONPath     string
	Format       string
	CPUProfile   string
	ProfilePhase string
	// FleetCPUProfile is where -fleet-procs children write their CPU
	// profiles of -profile-phase: FleetCPUProfile.N for child N.
	FleetCPUProfile string
	MemProfile      string
	Timeout         time.Duration
	LogLevel        string
}

// The scenario and output names Config accepts.
const (
	FormatTable = "table"
	FormatJSON  = "json"
)

// profilePhases are what -profile-phase accepts: the whole run, or one
// of the phases Run reports to RunConfig.OnPhase.
var profilePhases = []string{"all", "populate", "scenario", "moves", "baseline"}

// DefaultConfig is the flags' defaults: a boot of 1,000 servers on 1,000
// hosts in two cells, one scheduler, against a Berth the tool starts.
func DefaultConfig() Config {
	return Config{
		Load: Load{Scenario: "boot", Hosts: 1000, Cells: 2, Servers: 1000, Clients: 16, Groups: 20,
			Duration: 30 * time.Second, InstancesPerHost: 10, DrainHosts: 10, ServersPerHost: 10, DrainParallel: 4,
			ResizeParallel: 16,
			BaselineTime:   2 * time.Second, BaselineRounds: 3},
		Schedulers: 1, RegisterWorkers: 32, Liveness: LivenessPerHost, Syncs: true, FleetEtcd: FleetEtcdGRPC,
		Prefix: etcdschema.DefaultPrefix, Format: FormatTable, ProfilePhase: "all",
		Timeout: 10 * time.Minute, LogLevel: "warn",
	}
}

// AddFlags binds c's fields to their flags on fs, c's values as the
// defaults (start from DefaultConfig).
func (c *Config) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Scenario, "scenario", c.Scenario, "populate, boot, churn, failover, coldstart, drain or resize (or give it as the first argument)")
	fs.IntVar(&c.Hosts, "hosts", c.Hosts, "simulated hosts")
	fs.IntVar(&c.Cells, "cells", c.Cells, "cells (hosts round-robin; one conductor each when the tool starts Berth)")
	fs.IntVar(&c.Servers, "servers", c.Servers, "servers to boot (churn: the steady population; drain, resize: the load beside the moved servers)")
	fs.Float64Var(&c.Rate, "rate", c.Rate, "servers posted per second (0: as fast as the clients go)")
	fs.IntVar(&c.Clients, "clients", c.Clients, "concurrent API clients")
	fs.DurationVar(&c.BuildTime, "build-time", c.BuildTime, "simulated build time per server")
	fs.Float64Var(&c.FailureRate, "failure-rate", c.FailureRate, "probability that a build fails (reschedulable)")
	fs.Float64Var(&c.HintRatio, "hint-ratio", c.HintRatio, "fraction of servers with a same_host or different_host hint naming an ACTIVE server")
	fs.Float64Var(&c.GroupRatio, "group-ratio", c.GroupRatio, "fraction of servers in a server group (m1.tiny)")
	fs.IntVar(&c.Groups, "groups", c.Groups, "server groups to spread -group-ratio servers over (policies rotate)")
	fs.DurationVar(&c.Duration, "duration", c.Duration, "churn: how long to delete and replace servers; resize: how long to resize servers")
	fs.IntVar(&c.InstancesPerHost, "instances-per-host", c.InstancesPerHost, "coldstart: instances written per host")
	fs.IntVar(&c.DrainHosts, "drain-hosts", c.DrainHosts, "drain: hosts drained at once")
	fs.IntVar(&c.ServersPerHost, "servers-per-host", c.ServersPerHost, "drain: servers put on each drained host before it is drained")
	fs.IntVar(&c.DrainParallel, "drain-parallel", c.DrainParallel, "drain: each drain's moves at once")
	fs.IntVar(&c.ResizeParallel, "resize-parallel", c.ResizeParallel, "resize: servers resized at once (each back and forth between m1.tiny and m1.small, confirmed, for -duration)")
	fs.StringVar(&c.ResizeQuota, "resize-quota", c.ResizeQuota, "resize: every project's quota limits in the Berth the tool starts, as cores=N,ram=M (os-quota-sets names; default none: unlimited), so each upsize is checked")
	fs.BoolVar(&c.Baseline, "baseline", c.Baseline, "after the scenario, measure etcd's single-key CAS txn/s with as many workers as claims in flight")
	fs.DurationVar(&c.BaselineTime, "baseline-time", c.BaselineTime, "how long each round of the CAS and of the claim baseline runs")
	fs.IntVar(&c.BaselineRounds, "baseline-rounds", c.BaselineRounds, "rounds of the baselines, CAS and claims alternating (their rates are over all rounds)")
	fs.IntVar(&c.Schedulers, "schedulers", c.Schedulers, "schedulers (each with its superconductor) to start")
	fs.StringVar(&c.FleetEtcd, "fleet-etcd", c.FleetEtcd, "how the simulated hosts in the tool's process reach its etcd: grpc (as agents on other machines) or in-process (as berth dev's agents)")
	fs.IntVar(&c.FleetProcs, "fleet-procs", c.FleetProcs, "run the simulated hosts in N child processes (each a range of the hosts with its own etcd client) instead of the tool's process; their CPU is reported apart")
	fs.BoolVar(&c.SchedulerProcs, "scheduler-procs", c.SchedulerProcs, "run each scheduler (with its superconductor) as a child process instead of in the tool's process")
	fs.Float64Var(&c.SchedulerCPU, "scheduler-cpu", c.SchedulerCPU, "with -scheduler-procs: put each scheduler process in a CPU cgroup of its own with this many CPUs of quota (0: none)")
	fs.IntVar(&c.Workers, "workers", c.Workers, "superconductor workers per scheduler (0: the config's)")
	fs.IntVar(&c.ConductorWorkers, "conductor-workers", c.ConductorWorkers, "cell conductor workers (0: the config's)")
	fs.IntVar(&c.RegisterWorkers, "register-workers", c.RegisterWorkers, "hosts registering at once")
	fs.StringVar(&c.Liveness, "liveness", c.Liveness, "hosts' liveness: per-host (a lease each, renewed every report_interval as agents do) or shared (one lease, one keepalive stream: cheaper than real agents, for comparison)")
	fs.BoolVar(&c.Syncs, "syncs", c.Syncs, "run the hosts' periodic provider and instance syncs at the agents' intervals (-syncs=false -liveness shared: the fleet of earlier runs)")
	fs.DurationVar(&c.ReportInterval, "report-interval", c.ReportInterval, "hosts' liveness renewal period (0: the config's agent report_interval)")
	fs.DurationVar(&c.ServiceDownTime, "service-down-time", c.ServiceDownTime, "hosts' liveness lease TTL (0: the config's agent service_down_time)")
	fs.DurationVar(&c.ProviderSyncInterval, "provider-sync-interval", c.ProviderSyncInterval, "hosts' provider sync period (0: the config's agent provider_sync_interval)")
	fs.DurationVar(&c.InstanceSyncInterval, "instance-sync-interval", c.InstanceSyncInterval, "hosts' instance sync period (0: the config's agent instance_sync_interval)")
	fs.IntVar(&c.BackgroundWorkers, "background-workers", c.BackgroundWorkers, "goroutines doing each of the hosts' periodic tasks, renewals, provider syncs and instance syncs each a pool of its own (0: one per 20 hosts, 64 to 1024; renewals at least one per beat due in a second; -fleet-procs children share them)")
	fs.StringVar(&c.Etcd, "etcd", c.Etcd, "comma-separated endpoints of an existing Berth's etcd (with -api)")
	fs.StringVar(&c.API, "api", c.API, "an existing Berth's compute API URL (with -etcd)")
	fs.StringVar(&c.Prefix, "prefix", c.Prefix, "etcd key prefix")
	fs.StringVar(&c.ConfigPath, "config", c.ConfigPath, "HCL config for the started Berth (scheduler options, ...)")
	fs.BoolVar(&c.NoAuth, "noauth", c.NoAuth, "compute API without authentication (noauth2), to compare with the default keystone auth (a token on every request)")
	fs.BoolVar(&c.EtcdTally, "etcd-tally", c.EtcdTally, "count the measured phase's etcd requests (ranges, puts, txns and what ran in them, watch events) per server by role (a Berth the tool starts; counting costs a little CPU)")
	fs.StringVar(&c.DataDir, "data-dir", c.DataDir, "embedded etcd data dir (default: a temp dir, removed at exit)")
	fs.StringVar(&c.JSONPath, "json", c.JSONPath, "append the result as a JSON line to FILE")
	fs.StringVar(&c.Format, "format", c.Format, "stdout: table or json")
	fs.StringVar(&c.CPUProfile, "cpuprofile", c.CPUProfile, "write a CPU profile to FILE (of the whole run, or of -profile-phase)")
	fs.StringVar(&c.ProfilePhase, "profile-phase", c.ProfilePhase, "what -cpuprofile covers: all, populate, scenario (the boot, churn or failover itself), moves (drain, resize: only the measured moves, not the load's boot) or baseline")
	fs.StringVar(&c.FleetCPUProfile, "fleet-cpuprofile", c.FleetCPUProfile, "with -fleet-procs: each fleet child writes a CPU profile of -profile-phase to PREFIX.N (N from 1)")
	fs.StringVar(&c.MemProfile, "memprofile", c.MemProfile, "write a heap profile at the end to FILE (with -profile-phase P other than all, also FILE.start and FILE.end around P, after a forced collection each)")
	fs.DurationVar(&c.Timeout, "timeout", c.Timeout, "how long to wait for servers to finish")
	fs.StringVar(&c.LogLevel, "log-level", c.LogLevel, "log level of the started roles")
}

// Validate says what is wrong with c, naming the flag; nil when it can
// run. The hosts' service_down_time against their report_interval is
// checked here when both flags are given, and by Main against the
// config's agent block otherwise.
func (c *Config) Validate() error {
	bad := func(f string, a ...any) error { return fmt.Errorf(f, a...) }
	var negative []string
	for _, n := range []struct {
		flag string
		v    float64
	}{
		{"-servers", float64(c.Servers)}, {"-rate", c.Rate}, {"-clients", float64(c.Clients)},
		{"-build-time", float64(c.BuildTime)}, {"-groups", float64(c.Groups)}, {"-duration", float64(c.Duration)},
		{"-instances-per-host", float64(c.InstancesPerHost)}, {"-baseline-time", float64(c.BaselineTime)},
		{"-workers", float64(c.Workers)}, {"-conductor-workers", float64(c.ConductorWorkers)},
		{"-register-workers", float64(c.RegisterWorkers)}, {"-timeout", float64(c.Timeout)},
	} {
		if n.v < 0 {
			negative = append(negative, n.flag)
		}
	}
	switch {
	case c.Hosts < 1 || c.Cells < 1:
		return bad("-hosts and -cells must be at least 1")
	case c.Schedulers < 1:
		return bad("-schedulers must be at least 1")
	case len(negative) > 0:
		return bad("%s must not be negative", strings.Join(negative, ", "))
	case c.FailureRate < 0 || c.FailureRate >= 1:
		return bad("-failure-rate must be in [0, 1)")
	case c.HintRatio < 0 || c.HintRatio > 1 || c.GroupRatio < 0 || c.GroupRatio > 1:
		return bad("-hint-ratio and -group-ratio must be in [0, 1]")
	case c.Format != FormatTable && c.Format != FormatJSON:
		return bad("-format must be table or json, not %q", c.Format)
	case (c.Etcd == "") != (c.API == "") && c.Scenario != "coldstart":
		return bad("an existing Berth needs both -etcd and -api")
	case c.Scenario == "drain" && (c.DrainHosts < 1 || c.DrainHosts >= c.Hosts):
		return bad("drain: -drain-hosts must be at least 1 and fewer than -hosts (the servers need somewhere to go)")
	case c.Scenario == "drain" && (c.ServersPerHost < 1 || c.DrainParallel < 1 || c.DrainParallel > 64):
		return bad("drain: -servers-per-host must be at least 1 and -drain-parallel between 1 and 64")
	case c.Scenario == "resize" && (c.ResizeParallel < 1 || c.Duration <= 0 || c.Hosts < 2):
		return bad("resize: -resize-parallel and -duration must be positive, and a resize needs another host (-hosts 2 or more)")
	case c.ResizeQuota != "" && (c.Scenario != "resize" || c.Etcd != ""):
		return bad("-resize-quota is for the resize scenario against a Berth the tool starts")
	case c.ResizeQuota != "" && parseQuota(c.ResizeQuota) == nil:
		return bad("-resize-quota %q: want name=limit pairs, comma-separated, of quota resources (e.g. cores=4000,ram=4096000)", c.ResizeQuota)
	case c.Scenario == "failover" && c.Schedulers < 2 && c.Etcd == "":
		return bad("failover needs -schedulers 2 or more")
	case c.SchedulerCPU < 0 || (c.SchedulerCPU > 0 && c.SchedulerCPU < 0.01):
		return bad("-scheduler-cpu must be 0 (no quota) or at least 0.01 CPUs")
	case c.SchedulerCPU > 0 && !c.SchedulerProcs:
		return bad("-scheduler-cpu needs -scheduler-procs")
	case c.FleetProcs < 0 || c.FleetProcs > c.Hosts:
		return bad("-fleet-procs must be between 0 and -hosts")
	case c.FleetProcs > 0 && (c.Etcd != "" || c.Scenario == "coldstart"):
		return bad("-fleet-procs is for a Berth the tool starts, and coldstart runs no fleet")
	case c.FleetEtcd != FleetEtcdGRPC && c.FleetEtcd != FleetEtcdInProcess:
		return bad("-fleet-etcd must be %s or %s, not %q", FleetEtcdGRPC, FleetEtcdInProcess, c.FleetEtcd)
	case c.FleetEtcd == FleetEtcdInProcess && (c.Etcd != "" || c.FleetProcs > 0):
		return bad("-fleet-etcd in-process is for a fleet in the tool's process beside the etcd the tool starts (not -etcd, not -fleet-procs)")
	case c.EtcdTally && (c.Etcd != "" || c.SchedulerProcs):
		return bad("-etcd-tally counts the clients of a Berth the tool starts in its own process (not -etcd's, not -scheduler-procs')")
	case c.SchedulerProcs && (c.Etcd != "" || c.Scenario == "coldstart"):
		return bad("-scheduler-procs is for a Berth the tool starts, and coldstart starts no scheduler")
	case c.Liveness != LivenessPerHost && c.Liveness != LivenessShared:
		return bad("-liveness must be %s or %s, not %q", LivenessPerHost, LivenessShared, c.Liveness)
	case c.BackgroundWorkers < 0:
		return bad("-background-workers must not be negative")
	case c.ReportInterval < 0 || c.ServiceDownTime < 0 || c.ProviderSyncInterval < 0 || c.InstanceSyncInterval < 0:
		return bad("-report-interval, -service-down-time, -provider-sync-interval and -instance-sync-interval must not be negative")
	case (c.ReportInterval > 0 && c.ReportInterval < 100*time.Millisecond) || (c.ServiceDownTime > 0 && c.ServiceDownTime < time.Second):
		return bad("-report-interval must be at least 100ms and -service-down-time at least 1s (a lease TTL is whole seconds)")
	case (c.ProviderSyncInterval > 0 && c.ProviderSyncInterval < 100*time.Millisecond) || (c.InstanceSyncInterval > 0 && c.InstanceSyncInterval < 100*time.Millisecond):
		return bad("-provider-sync-interval and -instance-sync-interval must be at least 100ms")
	case !slices.Contains(Scenarios, c.Scenario):
		return bad("unknown scenario %q (want one of %s)", c.Scenario, strings.Join(Scenarios, ", "))
	case c.ReportInterval > 0 && c.ServiceDownTime > 0:
		if err := checkLiveness(c.ServiceDownTime, c.ReportInterval); err != nil {
			return fmt.Errorf("-service-down-time and -report-interval: %w", err)
		}
	}
	switch {
	case !slices.Contains(profilePhases, c.ProfilePhase):
		return bad("-profile-phase %q: want all, populate, scenario, moves or baseline", c.ProfilePhase)
	case c.FleetCPUProfile != "" && c.FleetProcs == 0:
		return bad("-fleet-cpuprofile profiles the -fleet-procs children: give -fleet-procs too")
	case c.BaselineRounds < 1:
		return bad("-baseline-rounds %d: want at least 1", c.BaselineRounds)
	}
	return nil
}

// The ways the simulated hosts reach etcd (-fleet-etcd).
const (
	FleetEtcdGRPC      = "grpc"
	FleetEtcdInProcess = "in-process"
)

// checkLiveness: a host's liveness lease must outlive the period it is
// renewed at.
func checkLiveness(down, report time.Duration) error {
	if down <= report {
		return fmt.Errorf("the hosts' service_down_time (%s) must exceed their report_interval (%s), or a healthy host looks down between two reports", down, report)
	}
	return nil
}

// UsageError is a mistake in what the tool was asked that shows only
// once -config is read (its agent periods against the flags', the file
// itself): `berth bench` exits 2 on it, as on a flag Validate rejects.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// IsUsage says whether err is a UsageError.
func IsUsage(err error) bool {
	var u *UsageError
	return errors.As(err, &u)
}
