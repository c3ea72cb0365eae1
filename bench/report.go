package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/berth-project/berth/internal/etcdtally"
)

// Pct is one stage's latency distribution, in milliseconds.
type Pct struct {
	N   int     `json:"n"`
	P50 float64 `json:"p50_ms"`
	P90 float64 `json:"p90_ms"`
	P99 float64 `json:"p99_ms"`
	Max float64 `json:"max_ms"`
}

func pct(sorted []time.Duration) Pct {
	if len(sorted) == 0 {
		return Pct{}
	}
	at := func(p float64) float64 {
		i := int(float64(len(sorted)-1) * p)
		return float64(sorted[i].Microseconds()) / 1000
	}
	return Pct{N: len(sorted), P50: at(0.50), P90: at(0.90), P99: at(0.99), Max: at(1)}
}

// StageOrder is the pipeline's stages in order, as the report lists them.
var StageOrder = []string{"api_accept", "queue", "schedule", "handoff", "build", "total"}

// StageHelp says what marks each stage's start and end.
var StageHelp = map[string]string{
	"api_accept": "POST /v2.1/servers round trip (client, token checked unless -noauth)",
	"queue":      "BuildRequest put -> superconductor lease put",
	"schedule":   "lease put -> claim (consumer put): select_destinations incl. claim txn",
	"handoff":    "claim -> build cast put (hand-off txn)",
	"build":      "first cast -> instance ACTIVE (agent; incl. reschedules)",
	"total":      "POST sent -> instance ACTIVE",
}

// Result is one scenario run: the report's table and one JSON line.
type Result struct {
	Scenario string    `json:"scenario"`
	At       time.Time `json:"at"`
	Command  string    `json:"command,omitempty"`
	// Error is why the run failed ("" when it did not).
	Error      string    `json:"error,omitempty"`
	LoadAvg    [2]string `json:"loadavg"` // /proc/loadavg at start and end
	Hosts      int       `json:"hosts"`
	Cells      int       `json:"cells"`
	Schedulers int       `json:"schedulers"`
	Servers    int       `json:"servers,omitempty"`
	// Auth is how the load authenticated to the compute API: keystone
	// (a token from Berth's identity, checked on every request) or
	// noauth (-noauth); Logins how many tokens it got (1, more after a
	// 401).
	Auth   string `json:"auth,omitempty"`
	Logins int    `json:"logins,omitempty"`
	// Measured is how many servers the measured phase created (boot:
	// Servers; churn: the replacements). Per-server figures divide by it.
	Measured  int     `json:"measured,omitempty"`
	Clients   int     `json:"clients,omitempty"`
	Rate      float64 `json:"rate,omitempty"`
	BuildTime string  `json:"build_time,omitempty"`

	// The simulated hosts' liveness model (per-host or shared) and
	// periodic work, at the agents' intervals.
	Liveness             string `json:"liveness,omitempty"`
	PeriodicSyncs        bool   `json:"periodic_syncs,omitempty"`
	ReportInterval       string `json:"report_interval,omitempty"`
	ServiceDownTime      string `json:"service_down_time,omitempty"`
	ProviderSyncInterval string `json:"provider_sync_interval,omitempty"`
	InstanceSyncInterval string `json:"instance_sync_interval,omitempty"`

	PopulateSeconds float64 `json:"populate_s,omitempty"`
	HostsPerSec     float64 `json:"hosts_per_s,omitempty"`

	Seconds       float64        `json:"seconds,omitempty"`
	ServersPerSec float64        `json:"servers_per_s,omitempty"`
	Active        int            `json:"active,omitempty"`
	Errors        int            `json:"errors,omitempty"`
	NoValidHost   int            `json:"no_valid_host"`
	Lost          int            `json:"lost"`
	Reschedules   int            `json:"reschedules,omitempty"`
	APIErrors     int            `json:"api_errors,omitempty"`
	Deleted       int            `json:"deleted,omitempty"`
	Stages        map[string]Pct `json:"stages,omitempty"`

	ClaimsPerSec float64 `json:"claims_per_s,omitempty"`
	ClaimRaces   int64   `json:"claim_races"`
	// ClaimReplans counts claims planned again from the index, unsent,
	// after a concurrent claim of the same scheduler committed first.
	ClaimReplans  int64 `json:"claim_replans,omitempty"`
	ClaimFailures int64 `json:"claim_failures"`
	// ClaimMeanMs is the mean time of a successful allocation write in the
	// tool's own schedulers and conductors (read, txn and retries).
	ClaimMeanMs float64 `json:"claim_mean_ms,omitempty"`
	// BaselineRounds is how many times the CAS and the claim baselines
	// alternated; CASPerSec and ClaimOnlyPerSec are over all rounds,
	// CASRounds and ClaimOnlyRounds each round's rate.
	BaselineRounds  int       `json:"baseline_rounds,omitempty"`
	CASRounds       []float64 `json:"cas_rounds_per_s,omitempty"`
	ClaimOnlyRounds []float64 `json:"claim_only_rounds_per_s,omitempty"`
	CASPerSec       float64   `json:"cas_per_s,omitempty"`
	// CASCPUMicros and ClaimOnlyCPUMicros are the tool process's CPU
	// (etcd, and the schedulers when they run in it) per CAS transaction
	// and per claim in the baselines: steadier than the rates when the
	// machine is shared.
	CASCPUMicros       float64 `json:"cas_cpu_us,omitempty"`
	ClaimOnlyCPUMicros float64 `json:"claim_only_cpu_us,omitempty"`
	CASWorkers         int     `json:"cas_workers,omitempty"`
	ClaimCASRatio      float64 `json:"claims_to_cas,omitempty"`
	// ClaimOnlyPerSec is placement's claim alone (no scheduling in front),
	// with the CAS baseline's workers, and its ratio to the CAS rate.
	ClaimOnlyPerSec   float64 `json:"claim_only_per_s,omitempty"`
	ClaimOnlyCASRatio float64 `json:"claim_only_to_cas,omitempty"`
	// ClaimOnlyVia says which placement the claim baseline claimed
	// through, ClaimOnlyServices how many (one per scheduler), and
	// ClaimOnlyPerTxn how many claims an etcd transaction carried.
	ClaimOnlyVia      string  `json:"claim_only_via,omitempty"`
	ClaimOnlyServices int     `json:"claim_only_services,omitempty"`
	ClaimOnlyPerTxn   float64 `json:"claim_only_per_txn,omitempty"`
	// LeasesWon and LeasesLost are the superconductors' build-request
	// lease transactions in the measured phase (several superconductors
	// racing for the same requests lose many).
	LeasesWon  int64 `json:"leases_won,omitempty"`
	LeasesLost int64 `json:"leases_lost"`
	// ClaimsPerTxn is how many claims an etcd transaction carried in the
	// measured phase (the schedulers' and conductors' group commit).
	ClaimsPerTxn float64 `json:"claims_per_txn,omitempty"`

	// The hosts' background load in the measured phase: liveness
	// renewals (beats on the fleet's one keepalive stream), provider and instance syncs per second,
	// leases found lost and granted again, runs that failed, slots passed
	// over because the host's previous run was still going, runs started
	// a whole period or more late, and how late a run started at worst.
	RenewalsPerSec       float64 `json:"renewals_per_s,omitempty"`
	ProviderSyncsPerSec  float64 `json:"provider_syncs_per_s,omitempty"`
	InstanceSyncsPerSec  float64 `json:"instance_syncs_per_s,omitempty"`
	LeasesRegranted      int64   `json:"leases_regranted,omitempty"`
	BackgroundFailures   int64   `json:"background_failures,omitempty"`
	BackgroundOverlapped int64   `json:"background_overlapped,omitempty"`
	BackgroundPeriodLate int64   `json:"background_period_late,omitempty"`
	BackgroundMaxLateMs  float64 `json:"background_max_late_ms,omitempty"`
	// LivenessTrace is the measured phase's grants and beats: how long
	// they took and why leases were lost (per-host leases only).
	LivenessTrace string `json:"liveness_trace,omitempty"`
	// BackgroundWrites are the etcd writes of that work (instance sync
	// puts, re-granted alive keys), part of WritesPerServer.
	BackgroundWrites          int64   `json:"background_writes,omitempty"`
	BackgroundWritesPerServer float64 `json:"background_writes_per_server,omitempty"`

	WritesPerServer float64 `json:"writes_per_server,omitempty"`
	Writes          *Writes `json:"writes,omitempty"`
	// RecorderLate counts the events the recorder's watches delivered
	// after one of a later revision: several watches on the member's
	// stream, one of which fell behind. Each is timed as the first
	// arrival of a later revision (Recorder.arrivalLocked): the stages
	// keep etcd's order, and its time is a bound (etcd made it before the
	// later one arrived), not its own delivery. Zero on a run that kept
	// up.
	RecorderLate int64 `json:"recorder_late_events,omitempty"`
	// EtcdRequests are the measured phase's etcd requests by role and
	// kind (-etcd-tally): the in-process clients' and the tool's own,
	// not -fleet-procs children's.
	EtcdRequests []etcdtally.Row `json:"etcd_requests,omitempty"`

	CPUSeconds     float64 `json:"process_cpu_s,omitempty"`
	CPUMsPerServer float64 `json:"process_cpu_ms_per_server,omitempty"`
	HeapMB         float64 `json:"heap_mb,omitempty"`
	// GC is the tool process's garbage collection in the measured phase.
	GC *GCStats `json:"gc,omitempty"`
	// The measured phase's CPU profile (-cpuprofile with -profile-phase
	// scenario, or moves for drain and resize) split by its role labels:
	// the share of the tool's own roles (its API clients, recorder and
	// etcd client) and of the simulated fleet's in the profiled CPU, and
	// the process CPU per server (or per move) with the tool's share
	// taken out, then the fleet's too. Unlabelled CPU (mostly the
	// garbage collector's) stays in: the figures are Berth's at most.
	ProfileToolShare      float64 `json:"profile_tool_share,omitempty"`
	ProfileFleetShare     float64 `json:"profile_fleet_share,omitempty"`
	CPUMsLessTool         float64 `json:"process_cpu_ms_less_tool,omitempty"`
	CPUMsLessToolAndFleet float64 `json:"process_cpu_ms_less_tool_and_fleet,omitempty"`
	// Scheduler processes (-scheduler-procs): how many, each one's CPU
	// quota (0: none), the CPU they used in the measured phase (part of
	// CPUSeconds) and the GOMAXPROCS Go's runtime chose in each.
	SchedulerProcs           int     `json:"scheduler_procs,omitempty"`
	SchedulerCPUQuota        float64 `json:"scheduler_cpu_quota,omitempty"`
	SchedulerProcsCPUSeconds float64 `json:"scheduler_procs_cpu_s,omitempty"`
	SchedulerGOMAXPROCS      []int   `json:"scheduler_gomaxprocs,omitempty"`
	// Fleet processes (-fleet-procs): how many, and the CPU they used in
	// the measured phase (not part of CPUSeconds).
	FleetProcs           int     `json:"fleet_procs,omitempty"`
	FleetProcsCPUSeconds float64 `json:"fleet_procs_cpu_s,omitempty"`
	// FleetEtcd is "in-process" when the simulated hosts reached etcd
	// through an in-process client (-fleet-etcd in-process); empty for
	// gRPC, the default.
	FleetEtcd string `json:"fleet_etcd,omitempty"`

	// Failover.
	LeaderKilled     string  `json:"leader_killed,omitempty"`
	NewLeader        string  `json:"new_leader,omitempty"`
	NewLeaderSeconds float64 `json:"new_leader_s,omitempty"`

	// Drain: hosts drained at once with each one's servers and
	// parallelism; the moves done and failed, their rate over the
	// drains' whole time, one move's time from its request to its
	// confirm, and the process's CPU per move.
	DrainedHosts   int     `json:"drained_hosts,omitempty"`
	ServersPerHost int     `json:"servers_per_host,omitempty"`
	DrainParallel  int     `json:"drain_parallel,omitempty"`
	Moves          int     `json:"moves,omitempty"`
	MovesFailed    int     `json:"moves_failed,omitempty"`
	MovesPerSec    float64 `json:"moves_per_s,omitempty"`
	Move           *Pct    `json:"move_ms,omitempty"`
	CPUMsPerMove   float64 `json:"process_cpu_ms_per_move,omitempty"`
	// Resize: servers resized at once (the moves' figures above), and
	// one resize's time from its request to VERIFY_RESIZE.
	ResizeParallel int `json:"resize_parallel,omitempty"`
	// MoveStages split the moves' times by their migrations' events
	// (moveStages), drain and resize.
	MoveStages   map[string]Pct `json:"move_stages_ms,omitempty"`
	ResizeVerify *Pct           `json:"resize_verify_ms,omitempty"`

	// Coldstart.
	Instances          int     `json:"instances,omitempty"`
	PlacementLoadSec   float64 `json:"placement_load_s,omitempty"`
	HostManagerLoadSec float64 `json:"hostmanager_load_s,omitempty"`
	ColdStartSec       float64 `json:"coldstart_s,omitempty"`
	ColdStartCPUSec    float64 `json:"coldstart_cpu_s,omitempty"`
	ColdStartHeapMB    float64 `json:"coldstart_heap_mb,omitempty"`
}

// WriteJSON appends the result as one JSON line.
func (r *Result) WriteJSON(w io.Writer) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// WriteTable prints the result for a human.
func (r *Result) WriteTable(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k, f string, a ...any) { fmt.Fprintf(tw, "%s\t%s\n", k, fmt.Sprintf(f, a...)) }
	row("scenario", "%s (%d hosts, %d cells, %d scheduler(s))", r.Scenario, r.Hosts, r.Cells, r.Schedulers)
	row("load average", "start %s, end %s", r.LoadAvg[0], r.LoadAvg[1])
	if r.Error != "" {
		row("FAILED", "%s", r.Error)
	}
	if r.HostsPerSec > 0 {
		row("populate", "%.1f s, %.0f hosts/s", r.PopulateSeconds, r.HostsPerSec)
	}
	if r.Liveness != "" {
		syncs := fmt.Sprintf("provider sync every %s, instance sync every %s", r.ProviderSyncInterval, r.InstanceSyncInterval)
		if !r.PeriodicSyncs {
			syncs = "no periodic syncs"
		}
		live := fmt.Sprintf("a lease per host (TTL %s) renewed every %s", r.ServiceDownTime, r.ReportInterval)
		if r.Liveness == LivenessShared {
			live = fmt.Sprintf("one shared lease (TTL %s), one keepalive stream", r.ServiceDownTime)
		}
		if r.FleetEtcd == FleetEtcdInProcess {
			syncs += "; the hosts reach etcd in process (as berth dev's agents), not over gRPC"
		}
		row("hosts' liveness", "%s: %s; %s", r.Liveness, live, syncs)
	}
	if r.Servers > 0 && r.DrainedHosts == 0 && r.ResizeParallel == 0 {
		row("servers", "%d requested from %d clients (rate %s), build time %s", r.Servers, r.Clients, rateString(r.Rate), r.BuildTime)
		if r.Auth != "" {
			row("auth", "%s (%d logins): every request through the Nova API (/v2.1)", r.Auth, r.Logins)
		}
		row("outcome", "%d ACTIVE, %d ERROR, %d NoValidHost, %d lost, %d reschedules, %d API errors",
			r.Active, r.Errors, r.NoValidHost, r.Lost, r.Reschedules, r.APIErrors)
		if r.Deleted > 0 {
			row("deleted", "%d", r.Deleted)
		}
		row("throughput", "%.1f servers/s to ACTIVE over %.2f s", r.ServersPerSec, r.Seconds)
	}
	if len(r.Stages) > 0 {
		fmt.Fprintf(tw, "stage (ms)\tp50 / p90 / p99 / max  (n)\n")
		for _, s := range StageOrder {
			p, ok := r.Stages[s]
			if !ok {
				continue
			}
			fmt.Fprintf(tw, "  %s\t%.1f / %.1f / %.1f / %.1f  (%d)   %s\n", s, p.P50, p.P90, p.P99, p.Max, p.N, StageHelp[s])
		}
	}
	if r.ClaimsPerSec > 0 {
		row("claims", "%.1f/s, %d races lost (retried), %d replanned unsent, %d gave up; mean claim %.1f ms (read + txn + retries, in-process counter); %.2f claims per etcd txn",
			r.ClaimsPerSec, r.ClaimRaces, r.ClaimReplans, r.ClaimFailures, r.ClaimMeanMs, r.ClaimsPerTxn)
	}
	if r.LeasesWon > 0 {
		row("superconductor leases", "%d won, %d lost (%.3f lost per request leased)", r.LeasesWon, r.LeasesLost,
			float64(r.LeasesLost)/float64(r.LeasesWon))
	}
	if r.CASPerSec > 0 {
		row("etcd CAS baseline", "%.1f txn/s with %d workers over %d round(s)%s, %.0f µs of process CPU per txn; pipeline claims/CAS = %.3f",
			r.CASPerSec, r.CASWorkers, max(r.BaselineRounds, 1), perRound(r.CASRounds), r.CASCPUMicros, r.ClaimCASRatio)
		if r.ClaimOnlyPerSec > 0 {
			row("claim baseline", "%.1f claims/s alone with %d workers through %d x %s%s, %.0f µs of process CPU per claim; %.2f claims per etcd txn; claims/CAS = %.3f%s",
				r.ClaimOnlyPerSec, r.CASWorkers, r.ClaimOnlyServices, r.ClaimOnlyVia, perRound(r.ClaimOnlyRounds),
				r.ClaimOnlyCPUMicros, r.ClaimOnlyPerTxn, r.ClaimOnlyCASRatio, roundRatios(r.ClaimOnlyRounds, r.CASRounds))
		}
	}
	if r.Liveness != "" && r.Seconds > 0 && r.DrainedHosts == 0 && r.ResizeParallel == 0 {
		row("hosts' background", "%.0f renewals/s, %.1f provider syncs/s, %.1f instance syncs/s; %d leases re-granted, %d failed, %d overlapped, %d started a period or more late, worst start %.0f ms late",
			r.RenewalsPerSec, r.ProviderSyncsPerSec, r.InstanceSyncsPerSec, r.LeasesRegranted, r.BackgroundFailures,
			r.BackgroundOverlapped, r.BackgroundPeriodLate, r.BackgroundMaxLateMs)
		if r.LivenessTrace != "" {
			row("hosts' liveness", "%s", r.LivenessTrace)
		}
	}
	if r.Writes != nil && r.Measured > 0 {
		row("etcd writes", "%.2f revisions per measured server (%d servers, %d revisions seen; %.2f of them the hosts' background writes)",
			r.WritesPerServer, r.Measured, r.Writes.Revisions, r.BackgroundWritesPerServer)
		kinds := map[string]bool{}
		for k := range r.Writes.Puts {
			kinds[k] = true
		}
		for k := range r.Writes.Deletes {
			kinds[k] = true
		}
		names := make([]string, 0, len(kinds))
		for k := range kinds {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			fmt.Fprintf(tw, "  %s\t%.2f puts, %.2f deletes per server\n", k,
				float64(r.Writes.Puts[k])/float64(r.Measured), float64(r.Writes.Deletes[k])/float64(r.Measured))
		}
	}
	if r.RecorderLate > 0 {
		row("recorder fell behind", "%d events delivered after a later revision's, each timed as a later revision's first arrival (a bound: etcd made it before that one arrived)",
			r.RecorderLate)
	}
	r.etcdRequestRows(tw)
	if r.SchedulerProcs > 0 {
		quota := "no CPU quota"
		if r.SchedulerCPUQuota > 0 {
			quota = fmt.Sprintf("a CPU cgroup of %g CPUs each", r.SchedulerCPUQuota)
		}
		row("scheduler procs", "%d child processes (scheduler + superconductor), %s, GOMAXPROCS %v",
			r.SchedulerProcs, quota, r.SchedulerGOMAXPROCS)
	}
	switch {
	case r.DrainedHosts > 0, r.ResizeParallel > 0: // its own process row below, per move
	case r.CPUSeconds > 0 && r.SchedulerProcs > 0:
		row("process", "%.1f CPU s (%.1f ms per measured server: the tool and its scheduler processes, %.1f CPU s in those), tool heap %.0f MB",
			r.CPUSeconds, r.CPUMsPerServer, r.SchedulerProcsCPUSeconds, r.HeapMB)
	case r.CPUSeconds > 0:
		row("process", "%.1f CPU s (%.1f ms per measured server, everything in the process), heap %.0f MB",
			r.CPUSeconds, r.CPUMsPerServer, r.HeapMB)
	}
	if r.GC != nil && r.DrainedHosts == 0 && r.ResizeParallel == 0 {
		row("garbage collection", "%s", r.GC)
	}
	if r.DrainedHosts == 0 && r.ResizeParallel == 0 {
		r.lessToolRow(row, "server")
	}
	if r.FleetProcs > 0 {
		per := ""
		if r.Measured > 0 {
			per = fmt.Sprintf(" (%.1f ms per measured server or move)", r.FleetProcsCPUSeconds*1000/float64(r.Measured))
		}
		row("fleet processes", "%d child processes ran the simulated hosts: %.1f CPU s%s, not in the process figures",
			r.FleetProcs, r.FleetProcsCPUSeconds, per)
	}
	if r.DrainedHosts > 0 {
		row("drain", "%d hosts drained at once, %d servers put on each beside %d servers of load anywhere (%s, %d clients), %d moves at once per drain",
			r.DrainedHosts, r.ServersPerHost, r.Servers, r.Auth, r.Clients, r.DrainParallel)
		row("moves", "%d moved, %d failed, %d lost; %.1f moves/s over %.2f s", r.Moves, r.MovesFailed, r.Lost, r.MovesPerSec, r.Seconds)
		if r.Move != nil {
			row("one move (ms)", "p50 %.1f / p90 %.1f / p99 %.1f / max %.1f  (%d): migration request -> confirmed", r.Move.P50, r.Move.P90, r.Move.P99, r.Move.Max, r.Move.N)
		}
		r.stageRows(row)
		row("process", "%.1f CPU s, %.1f ms per move (everything in the process)", r.CPUSeconds, r.CPUMsPerMove)
		r.lessToolRow(row, "move")
	}
	if r.ResizeParallel > 0 {
		row("resize", "%d servers resized at once, back and forth between %s and %s with a confirm each, beside %d servers of load anywhere (%s)",
			r.ResizeParallel, resizeFlavors[0], resizeFlavors[1], r.Servers, r.Auth)
		row("moves", "%d resized, %d failed, %d lost; %.1f moves/s over %.2f s", r.Moves, r.MovesFailed, r.Lost, r.MovesPerSec, r.Seconds)
		if r.Move != nil && r.ResizeVerify != nil {
			row("one move (ms)", "p50 %.1f / p90 %.1f / p99 %.1f / max %.1f  (%d): resize request -> ACTIVE on the new flavor, confirm included",
				r.Move.P50, r.Move.P90, r.Move.P99, r.Move.Max, r.Move.N)
			row("to VERIFY_RESIZE", "p50 %.1f / p90 %.1f / p99 %.1f / max %.1f", r.ResizeVerify.P50, r.ResizeVerify.P90, r.ResizeVerify.P99, r.ResizeVerify.Max)
		}
		r.stageRows(row)
		row("process", "%.1f CPU s, %.1f ms per move (everything in the process)", r.CPUSeconds, r.CPUMsPerMove)
		r.lessToolRow(row, "move")
	}
	if r.LeaderKilled != "" {
		row("failover", "killed leader %s; new leader %s after %.2f s", r.LeaderKilled, r.NewLeader, r.NewLeaderSeconds)
	}
	if r.ColdStartSec > 0 {
		row("cold start", "%.1f s (at once: placement index %.1f s, host manager %.1f s), %.1f CPU s, heap %.0f MB, %d instances",
			r.ColdStartSec, r.PlacementLoadSec, r.HostManagerLoadSec, r.ColdStartCPUSec, r.ColdStartHeapMB, r.Instances)
	}
	tw.Flush()
}

// stageRows prints the moves' stages (moveStages), in a move's order.
func (r *Result) stageRows(row func(name, format string, args ...any)) {
	for _, name := range moveStageOrder {
		if p, ok := r.MoveStages[name]; ok {
			row("  "+name, "p50 %.1f / p90 %.1f / p99 %.1f ms  (%d)", p.P50, p.P90, p.P99, p.N)
		}
	}
}

func rateString(r float64) string {
	if r <= 0 {
		return "unlimited"
	}
	return fmt.Sprintf("%.0f/s", r)
}

// LoadAvg is /proc/loadavg's first three fields ("" where unreadable).
func LoadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// cpuTime is the process's user + system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// heapMB is the live heap after a GC.
func heapMB() float64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return float64(m.HeapAlloc) / (1 << 20)
}

// perRound lists each round's rate when there was more than one.
func perRound(rates []float64) string {
	if len(rates) < 2 {
		return ""
	}
	parts := make([]string, len(rates))
	for i, v := range rates {
		parts[i] = fmt.Sprintf("%.0f", v)
	}
	return " (rounds: " + strings.Join(parts, ", ") + ")"
}

// roundRatios lists each round's claims/CAS when there was more than one
// round: how much of the ratio is the machine's drift.
func roundRatios(claims, cas []float64) string {
	if len(claims) < 2 || len(claims) != len(cas) {
		return ""
	}
	parts := make([]string, len(claims))
	for i := range claims {
		if cas[i] > 0 {
			parts[i] = fmt.Sprintf("%.3f", claims[i]/cas[i])
		}
	}
	return " (rounds: " + strings.Join(parts, ", ") + ")"
}

// lessToolRow is the process's CPU per server (or move) without the
// tool's own roles, then without the simulated fleet's too, when a
// profile of the measured phase said their shares.
func (r *Result) lessToolRow(row func(name, format string, args ...any), per string) {
	if r.CPUMsLessTool <= 0 {
		return
	}
	row("process less the tool", "%.2f ms per %s without the tool's API clients, recorder and etcd client (%.1f%% of the profiled CPU); "+
		"%.2f ms without the simulated fleet too (%.1f%% more); by the profile's role labels, GC and unlabelled CPU kept in",
		r.CPUMsLessTool, per, 100*r.ProfileToolShare, r.CPUMsLessToolAndFleet, 100*r.ProfileFleetShare)
}

// setRoleShares takes the tool's and the fleet's shares of the measured
// phase's profile out of the process CPU per server or per move.
func (r *Result) setRoleShares(s roleShares) {
	r.ProfileToolShare, r.ProfileFleetShare = s.Tool, s.Fleet
	per := r.CPUMsPerServer
	if r.CPUMsPerMove > 0 {
		per = r.CPUMsPerMove
	}
	r.CPUMsLessTool = per * (1 - s.Tool)
	r.CPUMsLessToolAndFleet = per * (1 - s.Tool - s.Fleet)
	if r.GC != nil {
		r.GC.ProfileShare, r.GC.CPUMsPerServer = s.GC, per*s.GC
	}
}

// etcdRequestRows lists -etcd-tally's counts per measured server, a line
// per role with its kinds in etcdtally's order.
func (r *Result) etcdRequestRows(w io.Writer) {
	if len(r.EtcdRequests) == 0 || r.Measured == 0 {
		return
	}
	fmt.Fprintf(w, "etcd requests\tper measured server, by the role that made them (ranges, puts, txns and what ran in them, watch events delivered)\n")
	var role string
	var parts []string
	flush := func() {
		if role != "" {
			fmt.Fprintf(w, "  %s\t%s\n", role, strings.Join(parts, ", "))
		}
	}
	for _, row := range r.EtcdRequests {
		if row.Role != role {
			flush()
			role, parts = row.Role, nil
		}
		// Three significant digits: a role's one watch in 10,000 servers
		// is 0.0001, not 0.00.
		parts = append(parts, fmt.Sprintf("%s %.3g", row.Kind, float64(row.Count)/float64(r.Measured)))
	}
	flush()
}
