package configs

import (
	"time"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/gctune"
)

// DevCell is the cell `berth dev` puts its conductor and simulated agents
// in. It is not a default for files: a conductor or agent in the wrong cell
// would build nothing and say nothing, so those must name their cell.
const DevCell = "cell1"

// defaultRanking spreads a queue's items over its holders (superconductors,
// a cell's conductors). The grace is well above the time a live holder
// takes to lease an item it was told of (a watch event and a
// transaction: milliseconds) and well below a lease TTL. The idle window
// is four graces: on a loaded machine a watch event can arrive hundreds
// of milliseconds late, and a live holder taken for stalled is raced for
// its items. workqueue.DefaultHolderGrace and DefaultHolderIdleAfter are
// the same values, for queues built without a config. A live but slow
// holder's items are taken by an idle second-ranked holder after 2 s
// (two idle windows): long enough that a holder merely a little behind
// keeps its share, short next to a build's seconds; with one holder of
// three doing 400 ms of work an item, stealing after 2 s cut a burst
// from 7.5-10.1 s to 4.7-6.0 s with no lease lost (conductor tests).
var defaultRanking = Ranking{Grace: 250 * time.Millisecond, IdleAfter: time.Second, StealAfter: 2 * time.Second}

// Defaults is the one place every default lives. It is the configuration
// `berth dev` runs with when given no file: every role enabled on loopback
// with an embedded etcd. Decoding a file takes every value the file leaves
// unset from here; role blocks the file omits stay nil (role not enabled).
//
// Agent.Host and the cells are left empty on purpose (see DevCell), and the
// inventory sizes are zero, which means "detect from the host".
func Defaults() *Config {
	return &Config{
		Etcd: Etcd{
			Prefix:      etcdschema.DefaultPrefix,
			DialTimeout: 5 * time.Second,
			// With no endpoints Berth runs its own single-member etcd:
			// the design's try-it-now default.
			Embedded: &Embedded{
				// Relative, so that `berth dev` works for any user; a
				// packaged server sets an absolute path.
				DataDir:   "berth-data/etcd",
				ClientURL: "http://127.0.0.1:2379",
				PeerURL:   "http://127.0.0.1:2380",
				Name:      "berth",
				// Short retention keeps the backend small at thousands of
				// claims a second; Berth never reads old revisions.
				AutoCompactionRetention: 5 * time.Minute,
				// 8 GiB is etcd's suggested maximum; its 2 GiB default
				// fills quickly between compactions under claim load.
				QuotaBackendBytes: 8 << 30,
				// A cluster of this member alone, bootstrapped on first start.
				InitialClusterState: ClusterStateNew,
				// A healthy member is silent at warn; a struggling one
				// (slow disk, late heartbeats, lost peers) is heard.
				LogLevel: "warn",
				// etcd's own defaults: fit for members on one LAN.
				HeartbeatInterval: 100 * time.Millisecond,
				ElectionTimeout:   time.Second,
			},
		},
		Log: Log{Level: "info", Format: LogFormatText},
		// GC percent 400, the heap's growth bounded (package gctune;
		// measured in docs/operations.md, "Garbage collection").
		Runtime: gctune.Default(),
		// No status listener unless the file asks for one. Server roles
		// answer /healthz, /readyz and /metrics on their own HTTP servers
		// anyway; conductors and agents have none, and any fixed port
		// would clash when several run on one machine (berth dev, the e2e
		// tests, a lab VM with a conductor and an agent). The deployment
		// templates set a port per role by convention, next to the
		// scheduler's 8790: etcd 8791, conductor 8792, agent 8793 (not
		// 9100, node_exporter's port on many hosts).
		Status: Status{Bind: ""},
		// Every HTTP listener's limits (package httpserve says why each).
		// The read timeout is over twice the slowest legitimate request
		// (a scheduler answers within its superconductor's 30 s
		// select_timeout); the write timeout leaves a request whose
		// context it ended 30 s to answer. Heads: 64 KiB holds any token
		// (net/http's default is 1 MiB). Bodies: 16 MiB is the largest any
		// API reads (a Placement reshape); each API bounds its own tighter.
		// Connections: 1,024 a listener, so that the five listeners of
		// `berth run server` at their caps hold about 5,000 descriptors, well
		// within the units' LimitNOFILE=65536 (a process lowers it to a
		// tenth of a smaller limit: stack.connectionCap).
		HTTP: HTTP{
			ReadHeaderTimeout: 10 * time.Second,
			ReadTimeout:       time.Minute,
			WriteTimeout:      90 * time.Second,
			IdleTimeout:       time.Minute,
			MaxHeaderBytes:    64 << 10,
			MaxBodyBytes:      16 << 20,
			MaxConnections:    1024,
			// 15 s: the documented bound on an answer while etcd has no
			// quorum (docs/operations.md), as long as a create retries its
			// store; above a service update's 10 s wait for its agent.
			RequestTimeout: 15 * time.Second,
		},
		DefaultAvailabilityZone: "nova",
		API:                     &API{Bind: "127.0.0.1:8774", Auth: AuthNoAuth}, // Nova's compute API port
		Placement: &Placement{
			Bind: "127.0.0.1:8778", // Placement's usual port
			Auth: AuthNoAuth,
			// placement.DefaultCandidateWorkLimit: about two seconds of
			// a core for the largest searches.
			CandidateWorkLimit: 200_000,
		},
		Scheduler: &Scheduler{
			Bind:                        "127.0.0.1:8775",
			MaxAttempts:                 3,
			HostSubsetSize:              1,
			MaxPlacementResults:         1000,
			ShuffleBestSameWeighedHosts: false,
			TrackInstanceChanges:        true,
			EnabledFilters: []string{
				"ComputeFilter",
				"SameHostFilter",
				"DifferentHostFilter",
				// Nova enables the server-group filters by default; a
				// group request is refused without its policy's filter.
				"ServerGroupAntiAffinityFilter",
				"ServerGroupAffinityFilter",
			},
			MaxHostsToWeigh: 0,
			// Not Nova's behaviour (0): a request samples 100 candidates
			// from a random start instead of filtering and weighing 1,000
			// in index order, which was most of its CPU at 10,000 hosts
			// (docs/benchmarks-history.md). Requests that must land on given hosts
			// are not sampled, and a sample that finds no valid host is
			// retried over max_placement_results (scheduler/sample.go).
			PlacementSampleSize: 100,
			ElectionTTL:         10 * time.Second,
			AdvertiseURL:        "",
			// The leader sweeps every 30 s. A host must be down a minute
			// past its alive lease before its casts are taken back; an
			// allocation or alternates list must be 10 minutes without an
			// owner before it is freed, longer than any build step.
			LeaderInterval:           30 * time.Second,
			DownHostGrace:            60 * time.Second,
			OrphanGrace:              10 * time.Minute,
			StuckBuildRequestTimeout: 10 * time.Minute,
			// A member is defragmented when its file is at least twice its
			// live data and 256 MiB larger: both, so that a small backend
			// (a few MiB, mostly free pages after a compaction) is left
			// alone, and a large one is not blocked for a few percent.
			// Looked at every 10 minutes: the file grows with bursts, and
			// a defragmentation costs the member a pause.
			EtcdDefrag:         true,
			EtcdDefragInterval: 10 * time.Minute,
			EtcdDefragRatio:    2,
			EtcdDefragMinBytes: 256 << 20,
			// Nova's multipliers: spread by free RAM/CPU/disk, avoid busy
			// and recently failing hosts.
			Weights: Weights{
				RAM:              1.0,
				CPU:              1.0,
				Disk:             1.0,
				IOOps:            -1.0,
				BuildFailure:     1000000.0,
				SoftAffinity:     1.0,
				SoftAntiAffinity: 1.0,
				NumInstances:     0.0,
			},
		},
		// A worker spends most of a request waiting on etcd round trips
		// (lease, claim, hand-off) and well under 1 ms on the CPU
		// scheduling (sampled candidates): with 4, then 16, a 2-core
		// machine stayed half idle under a burst, the queue stage was most
		// of a server's time, and etcd batched fewer writes per fsync. 64
		// took `berth bench boot` at 10,000 hosts from 126 to 340
		// servers/s (docs/benchmarks-history.md). Idle workers cost nothing.
		// By session 17 a request's CPU had fallen to ~1 ms and 64 workers
		// were the limit again: requests queued 1.1-1.6 s (p50) for a
		// worker while the cores were ~20% idle; 128 took the boot from
		// 1,580-1,704 to 1,860-1,872 servers/s at the same CPU per server
		// (1.0 ms) and a request's whole time from 1.2-1.7 s to 0.16-0.17 s
		// (p50); 192 and 256 gave 1,930 and 1,870, with longer schedule
		// and build stages (docs/benchmarks.md).
		Superconductor: &Superconductor{Workers: 128, LeaseTTL: 10 * time.Second, SelectTimeout: 30 * time.Second,
			Ranking: defaultRanking},
		Conductor: &Conductor{
			Workers:  4,
			LeaseTTL: 15 * time.Second,
			Ranking:  defaultRanking,
		},
		Agent: &Agent{
			Driver:               DriverFake,
			ReportInterval:       10 * time.Second,
			ServiceDownTime:      60 * time.Second,
			MaxConcurrentBuilds:  10,
			TrackInstanceChanges: true,
			InstanceSyncInterval: 120 * time.Second,
			ProviderSyncInterval: 60 * time.Second,  // Nova's update_resources_interval is 60 s too
			ProviderRefresh:      300 * time.Second, // Nova's resource_provider_association_refresh
			Inventory: Inventory{
				ReservedHostMemoryMB: 512,
				CPUAllocationRatio:   4.0,
				RAMAllocationRatio:   1.0,
				DiskAllocationRatio:  1.0,
			},
			Fake:    FakeDriver{FailReschedulable: true},
			Process: ProcessDriver{StopGrace: 10 * time.Second},
		},
	}
}

// EnableAllRoles gives every role block the file omitted its default, and
// an empty conductor or agent cell DevCell: `berth dev` runs every role in
// one process whatever its file enables.
func (c *Config) EnableAllRoles() {
	d := Defaults()
	if c.API == nil {
		c.API = d.API
	}
	if c.Placement == nil {
		c.Placement = d.Placement
	}
	if c.Scheduler == nil {
		c.Scheduler = d.Scheduler
	}
	if c.Superconductor == nil {
		c.Superconductor = d.Superconductor
	}
	if c.Conductor == nil {
		c.Conductor = d.Conductor
	}
	if c.Agent == nil {
		c.Agent = d.Agent
	}
	if c.Conductor.Cell == "" {
		c.Conductor.Cell = DevCell
	}
	if c.Agent.Cell == "" {
		c.Agent.Cell = DevCell
	}
}

// DefaultImage is the image block's defaults: Glance's port, tokens
// checked by the identity block. Like the identity block it is in
// neither Defaults() nor EnableAllRoles: a process serves images when its
// file says so, or it is berth dev, which adds it; the load tool and the
// tests start their stacks from those and must not take port 9292.
func DefaultImage() *Image {
	return &Image{Bind: "127.0.0.1:9292", Auth: AuthKeystone}
}

// DefaultIdentity is the identity block's defaults: Keystone's port and
// token lifetime (an hour), and OpenStack's usual region name. It is not
// in Defaults(): the in-process stacks of the load tool and the tests
// start from Defaults() and must not take port 5000.
func DefaultIdentity() *Identity {
	return &Identity{Bind: "127.0.0.1:5000", TokenTTL: time.Hour, Region: "RegionOne"}
}

// The login `berth dev` creates when its config has no identity block, and
// prints on start: a loopback-only development default, never a
// deployment's (a rendered server config names its own users).
const (
	DevAdminUser     = "admin"
	DevAdminPassword = "berth-dev-admin"
	DevAdminProject  = "admin"
)

// DevIdentity is `berth dev`'s identity block: DefaultIdentity with
// DevAdminUser (passwordHash is DevAdminPassword's bcrypt hash, made at
// start) holding admin on DevAdminProject and on the system.
func DevIdentity(passwordHash string) *Identity {
	id := DefaultIdentity()
	id.Users = []IdentityUser{{Name: DevAdminUser, PasswordHash: passwordHash}}
	id.Projects = []IdentityProject{{Name: DevAdminProject}}
	id.Assignments = []RoleAssignment{
		{User: DevAdminUser, Project: DevAdminProject, Role: "admin"},
		{User: DevAdminUser, System: true, Role: "admin"},
	}
	return id
}
