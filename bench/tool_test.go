package bench

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-project/berth/internal/leakcheck"
	"github.com/berth-project/berth/internal/logtest"
)

// TestMain lets the test binary stand in for berth as the child of
// `berth bench -scheduler-procs`, which runs os.Executable() with
// "bench scheduler-process" (and of its own benchmarks' etcd member,
// benchMemberCmd).
func TestMain(m *testing.M) {
	if len(os.Args) > 2 && os.Args[1] == "bench" && os.Args[2] == SchedulerProcessCmd {
		os.Exit(SchedulerProcess(os.Args[3:], os.Stdout, os.Stderr))
	}
	if len(os.Args) > 2 && os.Args[1] == "bench" && os.Args[2] == FleetProcessCmd {
		os.Exit(FleetProcess(os.Args[3:], os.Stdin, os.Stdout, os.Stderr))
	}
	if len(os.Args) > 2 && os.Args[1] == "bench" && os.Args[2] == benchMemberCmd {
		os.Exit(benchMember(os.Args[3:], os.Stdin, os.Stdout, os.Stderr))
	}
	leakcheck.Main(m)
}

// runBench runs the tool as `berth bench ARGS...` does, its flags bound
// to a Config: over a fresh data dir, and interrupted by the test's end.
// It fails on an error (a failed run, or a lost server), never on timing.
func runBench(t *testing.T, args ...string) *Result {
	t.Helper()
	c := DefaultConfig()
	c.Scenario, args = args[0], args[1:]
	fs := flag.NewFlagSet("berth bench", flag.ContinueOnError)
	c.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	c.DataDir = filepath.Join(t.TempDir(), "etcd")
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	var stderr logtest.Buffer
	res, err := Main(t.Context(), c, &stderr)
	if err != nil || res == nil {
		t.Fatalf("berth bench %s: %v (result %+v)\nstderr:\n%s", strings.Join(args, " "), err, res, stderr.String())
	}
	return res
}

// TestBenchBootSmoke is CI's small `berth bench`: 1,000 simulated hosts,
// 200 servers with hints, groups and reschedulable build failures, and
// the CAS baseline. It fails only on errors or lost servers.
func TestBenchBootSmoke(t *testing.T) {
	const servers = 200
	prof := filepath.Join(t.TempDir(), "baseline.pprof")
	res := runBench(t, "boot", "-hosts", "1000", "-cells", "2", "-servers", "200", "-clients", "8",
		"-hint-ratio", "0.1", "-group-ratio", "0.1", "-groups", "4", "-failure-rate", "0.05",
		"-baseline", "-baseline-time", "300ms", "-baseline-rounds", "2", "-cpuprofile", prof, "-profile-phase", "baseline",
		"-timeout", "5m", "-report-interval", "30s", "-service-down-time", "90s")
	if res.Lost != 0 || res.APIErrors != 0 {
		t.Fatalf("%d servers lost, %d API errors: %+v", res.Lost, res.APIErrors, res)
	}
	if res.Auth != "keystone" || res.Logins != 1 {
		t.Fatalf("auth %q with %d logins, want keystone with one token for the whole run", res.Auth, res.Logins)
	}
	if got := res.Active + res.Errors + res.NoValidHost; got != servers {
		t.Fatalf("%d servers accounted for (%d ACTIVE, %d ERROR, %d NoValidHost), want %d",
			got, res.Active, res.Errors, res.NoValidHost, servers)
	}
	if res.Active == 0 || res.Stages["total"].N != res.Active {
		t.Fatalf("stage samples %+v for %d ACTIVE servers", res.Stages["total"], res.Active)
	}
	if res.Writes == nil || res.Writes.Puts["placement/consumers"] == 0 || res.CASPerSec <= 0 || res.ClaimOnlyPerSec <= 0 {
		t.Fatalf("no claims or no CAS baseline recorded: %+v", res)
	}
	if res.BaselineRounds != 2 || len(res.CASRounds) != 2 || len(res.ClaimOnlyRounds) != 2 {
		t.Fatalf("baselines: %d rounds, CAS per round %v, claims per round %v; want 2 of each",
			res.BaselineRounds, res.CASRounds, res.ClaimOnlyRounds)
	}
	if fi, err := os.Stat(prof); err != nil || fi.Size() == 0 {
		t.Fatalf("no CPU profile of the baseline phase: %v", err)
	}
	if res.HostsPerSec <= 0 || res.Hosts != 1000 {
		t.Fatalf("populate not reported: %+v", res)
	}
	// Each host its own lease, renewed all along: every 30 s rather than
	// the default 10 s, which under -race on a busy CI machine doubled the
	// run (the syncs' rates are too low to be sure of one in a short
	// phase).
	if res.Liveness != "per-host" || !res.PeriodicSyncs || res.ReportInterval != "30s" || res.RenewalsPerSec <= 0 {
		t.Fatalf("the hosts' liveness and syncs not reported: %+v", res)
	}
	if res.LeasesRegranted != 0 || res.BackgroundFailures != 0 {
		t.Fatalf("the hosts' liveness failed: %d leases lost, %d periodic runs failed", res.LeasesRegranted, res.BackgroundFailures)
	}
}

// TestBenchColdstartSmoke loads a fresh scheduler's views over a small
// directly-populated etcd; the scenario itself checks every host and
// instance was loaded.
func TestBenchColdstartSmoke(t *testing.T) {
	res := runBench(t, "coldstart", "-hosts", "300", "-instances-per-host", "3")
	if res.ColdStartSec <= 0 || res.Instances != 900 {
		t.Fatalf("cold start not reported: %+v", res)
	}
}

// TestBenchFailoverSmoke kills the scheduler leader of three during a
// burst; the run itself fails if any server is lost or no new leader is
// elected. Short TTLs keep it to seconds.
func TestBenchFailoverSmoke(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "bench.hcl")
	if err := os.WriteFile(cfg, []byte("scheduler {\n  election_ttl = \"2s\"\n}\nsuperconductor {\n  lease_ttl = \"2s\"\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	res := runBench(t, "failover", "-config", cfg, "-schedulers", "3", "-hosts", "200", "-servers", "90",
		"-clients", "4", "-rate", "30", "-timeout", "3m")
	if res.Lost != 0 || res.Active != 90 {
		t.Fatalf("%d ACTIVE, %d lost of 90: %+v", res.Active, res.Lost, res)
	}
	if res.LeaderKilled == "" || res.NewLeader == "" || res.NewLeader == res.LeaderKilled {
		t.Fatalf("no failover recorded: killed %q, new leader %q", res.LeaderKilled, res.NewLeader)
	}
}

// cpuQuotaArgs is -scheduler-cpu 0.5 when this process may make CPU
// cgroups, with a stale group of a dead run planted for the tool to
// remove (its path returned); otherwise nothing, and the test says why.
func cpuQuotaArgs(t *testing.T) ([]string, string) {
	parent, v2, err := cpuCgroupParent()
	if err != nil {
		t.Logf("scheduler processes without a CPU quota: %v", err)
		return nil, ""
	}
	probe, err := newCPUGroup(parent, v2, 0, 0.5)
	if err != nil {
		t.Logf("scheduler processes without a CPU quota: %v", err)
		return nil, ""
	}
	if err := probe.remove(); err != nil {
		t.Fatal(err)
	}
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(parent, fmt.Sprintf("%s%d-1", benchCgroupPrefix, dead.Process.Pid))
	if err := os.Mkdir(stale, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(stale) })
	return []string{"-scheduler-cpu", "0.5"}, stale
}

// TestBenchSchedulerProcsSmoke boots 200 servers on 1,000 hosts through
// two scheduler processes (in CPU cgroups where this process may make
// them): the children start, sync, claim and report their counters and
// CPU, and stop with the tool. It fails only on errors or lost servers.
func TestBenchSchedulerProcsSmoke(t *testing.T) {
	const servers = 200
	quota, stale := cpuQuotaArgs(t)
	res := runBench(t, append([]string{"boot", "-hosts", "1000", "-cells", "2", "-servers", "200", "-clients", "8",
		"-failure-rate", "0.05", "-schedulers", "2", "-scheduler-procs", "-timeout", "5m",
		"-report-interval", "30s", "-service-down-time", "90s"}, quota...)...)
	if res.Lost != 0 || res.APIErrors != 0 {
		t.Fatalf("%d servers lost, %d API errors: %+v", res.Lost, res.APIErrors, res)
	}
	if got := res.Active + res.Errors + res.NoValidHost; got != servers {
		t.Fatalf("%d servers accounted for, want %d: %+v", got, servers, res)
	}
	if res.SchedulerProcs != 2 || len(res.SchedulerGOMAXPROCS) != 2 {
		t.Fatalf("scheduler processes not reported: %+v", res)
	}
	// The children's CPU is read and part of the run's; their claim
	// counters (transactions and claims per transaction) were read too.
	if res.SchedulerProcsCPUSeconds <= 0 || res.CPUSeconds < res.SchedulerProcsCPUSeconds {
		t.Fatalf("CPU %.2f s with %.2f s in the scheduler processes", res.CPUSeconds, res.SchedulerProcsCPUSeconds)
	}
	if res.ClaimsPerTxn <= 0 {
		t.Fatalf("no claim counters read from the scheduler processes: %+v", res)
	}
	if stale != "" {
		if _, err := os.Stat(stale); !os.IsNotExist(err) {
			t.Errorf("stale cgroup %s of a dead run not removed (%v)", stale, err)
		}
		left, _ := filepath.Glob(filepath.Join(filepath.Dir(stale), fmt.Sprintf("%s%d-*", benchCgroupPrefix, os.Getpid())))
		if len(left) > 0 {
			t.Errorf("the run left its cgroups behind: %v", left)
		}
	}
}

// TestBenchFleetProcsSmoke runs the simulated hosts in two child
// processes with per-host leases and periodic syncs: every server is
// built by a child's agents, the children's periodic work and CPU are
// reported apart from the process's, each child profiles the boot
// (-fleet-cpuprofile), and they stop with the tool.
func TestBenchFleetProcsSmoke(t *testing.T) {
	const servers = 200
	prof := filepath.Join(t.TempDir(), "fleet.prof")
	res := runBench(t, "boot", "-hosts", "300", "-cells", "2", "-servers", "200", "-clients", "8",
		"-fleet-procs", "2", "-timeout", "5m", "-report-interval", "1s", "-service-down-time", "30s",
		"-provider-sync-interval", "2s", "-instance-sync-interval", "2s",
		"-fleet-cpuprofile", prof, "-profile-phase", "scenario")
	if res.Lost != 0 || res.APIErrors != 0 {
		t.Fatalf("%d servers lost, %d API errors: %+v", res.Lost, res.APIErrors, res)
	}
	if got := res.Active + res.Errors + res.NoValidHost; got != servers || res.Active != servers {
		t.Fatalf("%d servers accounted for, %d ACTIVE, want %d: %+v", got, res.Active, servers, res)
	}
	if res.FleetProcs != 2 || res.FleetProcsCPUSeconds <= 0 {
		t.Fatalf("fleet processes not reported: %d, %.2f CPU s", res.FleetProcs, res.FleetProcsCPUSeconds)
	}
	if res.BackgroundFailures != 0 {
		t.Fatalf("%d of the hosts' periodic runs failed", res.BackgroundFailures)
	}
	for _, child := range []string{prof + ".1", prof + ".2"} {
		// A whole profile: the child stopped it at the boot's end.
		if _, err := profileCPUByRole(child); err != nil {
			t.Errorf("fleet child's profile %s: %v", child, err)
		}
	}
}

// TestBenchSchedulerProcsFailover kills the leader's process (SIGKILL)
// during a burst: nothing lost, another process leads.
func TestBenchSchedulerProcsFailover(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "bench.hcl")
	if err := os.WriteFile(cfg, []byte("scheduler {\n  election_ttl = \"2s\"\n}\nsuperconductor {\n  lease_ttl = \"2s\"\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	res := runBench(t, "failover", "-config", cfg, "-schedulers", "2", "-scheduler-procs", "-hosts", "200",
		"-servers", "60", "-clients", "4", "-rate", "30", "-timeout", "3m")
	if res.Lost != 0 || res.Active != 60 {
		t.Fatalf("%d ACTIVE, %d lost of 60: %+v", res.Active, res.Lost, res)
	}
	if res.LeaderKilled == "" || res.NewLeader == "" || res.NewLeader == res.LeaderKilled {
		t.Fatalf("no failover recorded: killed %q, new leader %q", res.LeaderKilled, res.NewLeader)
	}
}
