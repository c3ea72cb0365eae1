package bench

import (
	"flag"
	"strings"
	"testing"
	"time"
)

// TestConfigValidate: the defaults run, and each bad value is rejected
// with an error that names its flag.
func TestConfigValidate(t *testing.T) {
	if err := (&Config{}).Validate(); err == nil {
		t.Errorf("the zero Config validates; want an error (no hosts)")
	}
	for _, tc := range []struct {
		desc string
		set  func(c *Config)
		want string // "" for valid
	}{
		{"defaults", func(c *Config) {}, ""},
		{"every scenario", func(c *Config) { c.Scenario, c.Schedulers = "failover", 2 }, ""},
		{"existing Berth", func(c *Config) { c.Etcd, c.API = "127.0.0.1:2379", "http://127.0.0.1:8774" }, ""},
		{"coldstart needs no API", func(c *Config) { c.Scenario, c.Etcd = "coldstart", "127.0.0.1:2379" }, ""},
		{"scheduler processes with a quota", func(c *Config) { c.SchedulerProcs, c.SchedulerCPU = true, 0.5 }, ""},
		{"liveness periods", func(c *Config) { c.ReportInterval, c.ServiceDownTime = 30*time.Second, 90*time.Second }, ""},

		{"unknown scenario", func(c *Config) { c.Scenario = "nosuch" }, `unknown scenario "nosuch"`},
		{"no hosts", func(c *Config) { c.Hosts = 0 }, "-hosts and -cells must be at least 1"},
		{"no cells", func(c *Config) { c.Cells = 0 }, "-hosts and -cells must be at least 1"},
		{"no schedulers", func(c *Config) { c.Schedulers = 0 }, "-schedulers must be at least 1"},
		{"negative servers", func(c *Config) { c.Servers = -1 }, "-servers must not be negative"},
		{"negative rate and clients", func(c *Config) { c.Rate, c.Clients = -1, -1 }, "-rate, -clients must not be negative"},
		{"negative build time", func(c *Config) { c.BuildTime = -time.Second }, "-build-time must not be negative"},
		{"negative groups", func(c *Config) { c.Groups = -1 }, "-groups must not be negative"},
		{"negative duration", func(c *Config) { c.Duration = -time.Second }, "-duration must not be negative"},
		{"negative instances per host", func(c *Config) { c.InstancesPerHost = -1 }, "-instances-per-host must not be negative"},
		{"negative baseline time", func(c *Config) { c.BaselineTime = -time.Second }, "-baseline-time must not be negative"},
		{"negative workers", func(c *Config) { c.Workers = -1 }, "-workers must not be negative"},
		{"negative conductor workers", func(c *Config) { c.ConductorWorkers = -1 }, "-conductor-workers must not be negative"},
		{"negative register workers", func(c *Config) { c.RegisterWorkers = -1 }, "-register-workers must not be negative"},
		{"negative timeout", func(c *Config) { c.Timeout = -time.Second }, "-timeout must not be negative"},
		{"failure rate 1", func(c *Config) { c.FailureRate = 1 }, "-failure-rate must be in [0, 1)"},
		{"negative failure rate", func(c *Config) { c.FailureRate = -0.1 }, "-failure-rate must be in [0, 1)"},
		{"hint ratio over 1", func(c *Config) { c.HintRatio = 1.5 }, "-hint-ratio and -group-ratio must be in [0, 1]"},
		{"negative group ratio", func(c *Config) { c.GroupRatio = -0.5 }, "-hint-ratio and -group-ratio must be in [0, 1]"},
		{"format", func(c *Config) { c.Format = "xml" }, `-format must be table or json, not "xml"`},
		{"etcd without api", func(c *Config) { c.Etcd = "127.0.0.1:1" }, "an existing Berth needs both -etcd and -api"},
		{"api without etcd", func(c *Config) { c.API = "http://127.0.0.1:1" }, "an existing Berth needs both -etcd and -api"},
		{"failover with one scheduler", func(c *Config) { c.Scenario = "failover" }, "failover needs -schedulers 2 or more"},
		{"scheduler cpu too small", func(c *Config) { c.SchedulerProcs, c.SchedulerCPU = true, 0.001 }, "-scheduler-cpu must be 0 (no quota) or at least 0.01 CPUs"},
		{"negative scheduler cpu", func(c *Config) { c.SchedulerProcs, c.SchedulerCPU = true, -1 }, "-scheduler-cpu must be 0"},
		{"scheduler cpu without processes", func(c *Config) { c.SchedulerCPU = 0.5 }, "-scheduler-cpu needs -scheduler-procs"},
		{"more fleet processes than hosts", func(c *Config) { c.Hosts, c.FleetProcs = 2, 3 }, "-fleet-procs must be between 0 and -hosts"},
		{"fleet processes against an existing Berth", func(c *Config) { c.FleetProcs, c.Etcd, c.API = 2, "http://x:2379", "http://x:8774" }, "-fleet-procs is for a Berth the tool starts"},
		{"scheduler processes for coldstart", func(c *Config) { c.Scenario, c.SchedulerProcs = "coldstart", true }, "-scheduler-procs is for a Berth the tool starts"},
		{"scheduler processes for an existing Berth", func(c *Config) {
			c.SchedulerProcs, c.Etcd, c.API = true, "127.0.0.1:2379", "http://127.0.0.1:8774"
		}, "-scheduler-procs is for a Berth the tool starts"},
		{"liveness", func(c *Config) { c.Liveness = "each" }, `-liveness must be per-host or shared, not "each"`},
		{"negative background workers", func(c *Config) { c.BackgroundWorkers = -1 }, "-background-workers must not be negative"},
		{"negative provider sync", func(c *Config) { c.ProviderSyncInterval = -time.Second }, "-provider-sync-interval and -instance-sync-interval must not be negative"},
		{"report interval too short", func(c *Config) { c.ReportInterval = 50 * time.Millisecond }, "-report-interval must be at least 100ms"},
		{"service down time too short", func(c *Config) { c.ServiceDownTime = 500 * time.Millisecond }, "-service-down-time at least 1s"},
		{"instance sync too short", func(c *Config) { c.InstanceSyncInterval = 10 * time.Millisecond }, "-provider-sync-interval and -instance-sync-interval must be at least 100ms"},
		{"down time not past the report interval", func(c *Config) { c.ReportInterval, c.ServiceDownTime = 20*time.Second, 20*time.Second },
			"-service-down-time and -report-interval: the hosts' service_down_time (20s) must exceed their report_interval (20s)"},
		{"fleet profile without fleet processes", func(c *Config) { c.FleetCPUProfile = "/tmp/f" }, "-fleet-cpuprofile profiles the -fleet-procs children"},
		{"profile phase", func(c *Config) { c.ProfilePhase = "build" }, `-profile-phase "build": want all, populate, scenario, moves or baseline`},
		{"baseline rounds", func(c *Config) { c.BaselineRounds = 0 }, "-baseline-rounds 0: want at least 1"},
		{"drain every host", func(c *Config) { c.Scenario, c.DrainHosts = "drain", c.Hosts }, "-drain-hosts must be at least 1 and fewer than -hosts"},
		{"drain too parallel", func(c *Config) { c.Scenario, c.DrainParallel = "drain", 65 }, "-drain-parallel between 1 and 64"},
		{"drain", func(c *Config) { c.Scenario = "drain" }, ""},
		{"resize with nothing at once", func(c *Config) { c.Scenario, c.ResizeParallel = "resize", 0 }, "-resize-parallel and -duration must be positive"},
		{"resize", func(c *Config) { c.Scenario = "resize" }, ""},
		{"resize under a quota", func(c *Config) { c.Scenario, c.ResizeQuota = "resize", "cores=4000,ram=4096000" }, ""},
		{"a quota outside resize", func(c *Config) { c.ResizeQuota = "cores=4" }, "-resize-quota is for the resize scenario"},
		{"a quota that is not one", func(c *Config) { c.Scenario, c.ResizeQuota = "resize", "vcpus=4" }, `-resize-quota "vcpus=4": want name=limit pairs`},
		{"tally of another Berth", func(c *Config) { c.EtcdTally, c.Etcd, c.API = true, "a", "http://b" }, "-etcd-tally counts the clients of a Berth the tool starts"},
		{"tally of scheduler processes", func(c *Config) { c.EtcdTally, c.SchedulerProcs = true, true }, "-etcd-tally counts the clients of a Berth the tool starts"},
		{"tally", func(c *Config) { c.EtcdTally = true }, ""},
		{"fleet etcd unknown", func(c *Config) { c.FleetEtcd = "unix" }, `-fleet-etcd must be grpc or in-process, not "unix"`},
		{"fleet etcd in process with fleet processes", func(c *Config) { c.FleetEtcd, c.FleetProcs = FleetEtcdInProcess, 2 }, "-fleet-etcd in-process is for a fleet in the tool's process"},
		{"fleet etcd in process", func(c *Config) { c.FleetEtcd = FleetEtcdInProcess }, ""},
		{"a quota below unlimited", func(c *Config) { c.Scenario, c.ResizeQuota = "resize", "cores=-2" }, `-resize-quota "cores=-2"`},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			c := DefaultConfig()
			tc.set(&c)
			err := c.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Validate() = %v, want nil", err)
			case tc.want != "" && err == nil:
				t.Fatalf("Validate() = nil, want an error saying %q", tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Fatalf("Validate() = %q, want it to say %q", err, tc.want)
			}
		})
	}
}

// TestConfigFlags: every flag binds to its field, and the flags'
// defaults are DefaultConfig.
func TestConfigFlags(t *testing.T) {
	c := DefaultConfig()
	fs := flag.NewFlagSet("berth bench", flag.ContinueOnError)
	c.AddFlags(fs)
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	if n != 51 {
		t.Errorf("%d flags, want the 51 of berth bench", n)
	}
	if err := fs.Parse([]string{"-scenario", "churn", "-hosts", "7", "-syncs=false", "-scheduler-cpu", "0.5",
		"-report-interval", "3s", "-etcd", "a,b", "-format", "json", "-log-level", "debug", "-noauth", "-etcd-tally", "-fleet-etcd", "in-process",
		"-fleet-cpuprofile", "/tmp/fleet"}); err != nil {
		t.Fatal(err)
	}
	want := DefaultConfig()
	want.Scenario, want.Hosts, want.Syncs, want.SchedulerCPU = "churn", 7, false, 0.5
	want.ReportInterval, want.Etcd, want.Format, want.LogLevel = 3*time.Second, "a,b", FormatJSON, "debug"
	want.NoAuth, want.EtcdTally, want.FleetEtcd, want.FleetCPUProfile = true, true, FleetEtcdInProcess, "/tmp/fleet"
	if c != want {
		t.Errorf("after parsing:\n got %+v\nwant %+v", c, want)
	}
}
