// Package configs decodes Berth's HCL configuration files into typed
// structs, one block per role, and reports every mistake as an HCL
// diagnostic with the file:line:col of the offending attribute or block.
//
// A file may hold blocks for several roles; each command asks only for what
// it runs with Config.Require. Every option is documented in the example
// files under configs/examples, and every default lives in defaults.go.
package configs

import (
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/berth-project/berth/internal/gctune"
)

// Config is one decoded file with defaults applied. Etcd and Log are always
// usable; a nil role block means the file does not enable that role.
type Config struct {
	// Filename is the file the config came from ("" for Defaults()); errors
	// from Require name it.
	Filename string

	Etcd Etcd
	Log  Log
	// Runtime is the Go runtime's garbage collection policy of the
	// process (package gctune); every role accepts it.
	Runtime gctune.Policy
	// Status is where /healthz, /readyz and /metrics are served on a
	// listener of their own; every role accepts it.
	Status Status
	// HTTP bounds every HTTP listener of the process (package httpserve).
	HTTP HTTP
	// TLS serves every HTTP listener of the process over TLS and is what
	// its Berth clients verify servers with; nil serves plain HTTP.
	TLS *ProcessTLS
	// DefaultAvailabilityZone is the zone of hosts in no AZ aggregate
	// (Nova's default_availability_zone); the API and the scheduler of
	// one deployment must agree on it.
	DefaultAvailabilityZone string

	API            *API
	Placement      *Placement
	Scheduler      *Scheduler
	Superconductor *Superconductor
	Conductor      *Conductor
	Agent          *Agent
	// Identity is the Keystone v3 subset `berth run server` serves (package
	// identity); nil serves none.
	Identity *Identity
	// Image is the image service (package images, a Glance v2 subset);
	// nil serves none.
	Image *Image
}

// Etcd says how to reach the shared state: an external cluster (Endpoints)
// or, when Embedded is non-nil, a single-member etcd started in-process.
type Etcd struct {
	Prefix      string // every Berth key lives under it, e.g. "/berth"
	DialTimeout time.Duration
	Endpoints   []string // external cluster; empty when Embedded is set
	Username    string
	Password    string
	TLS         *TLS // nil: no client certificates or private CA

	// Embedded, when non-nil, tells the caller to start embedded etcd
	// (internal/embedetcd) and use its in-process client.
	Embedded *Embedded

	declRange hcl.Range
}

// TLS names the PEM files for talking to an etcd cluster over TLS and,
// for an embedded member, those it serves with: cert_file on its client
// and peer URLs, requiring client and peer certificates from ca_file.
type TLS struct {
	CAFile   string // private CA; "" trusts the system roots
	CertFile string // client certificate; set together with KeyFile
	KeyFile  string

	body hcl.Body // for CheckFiles' diagnostics
}

// Embedded configures the in-process etcd member.
type Embedded struct {
	DataDir                 string
	ClientURL               string
	PeerURL                 string
	Name                    string
	AutoCompactionRetention time.Duration
	QuotaBackendBytes       int64
	// InitialCluster is "name=peerURL,..." naming every member when this
	// one is part of a multi-member cluster; "" is a cluster of one.
	InitialCluster string
	// InitialClusterState is ClusterStateNew or ClusterStateExisting.
	InitialClusterState string
	// LogLevel is the least severe of etcd's own records that reach the
	// process log (one of embedetcd.LogLevels), apart from log { level }:
	// etcd at info prints some fifty lines at start-up.
	LogLevel string
	// HeartbeatInterval and ElectionTimeout are raft's timing (etcd's
	// --heartbeat-interval and --election-timeout): the leader's beat, and
	// how long a follower goes without one before it calls an election.
	// Raise both together where members are far apart or starved of CPU.
	HeartbeatInterval time.Duration
	ElectionTimeout   time.Duration

	tls *TLS // the etcd block's, served by the member; nil: plain HTTP
}

// Values of etcd { embedded { initial_cluster_state } }.
const (
	ClusterStateNew      = "new"      // the members in initial_cluster bootstrap together
	ClusterStateExisting = "existing" // this member joins a running cluster
)

// Log configures the process logger (see internal/logging).
type Log struct {
	Level  string // trace, debug, info, warn or error
	Format string // text or json
}

// Status configures the status listener (/healthz, /readyz, /metrics).
// Server roles also answer the three paths on their own HTTP servers;
// conductors, agents and etcd members have no other HTTP server.
type Status struct {
	Bind string // host:port; "" serves no status listener
}

// HTTP is the limits every HTTP listener of a process serves under (the
// compute API, Placement, the scheduler, identity and the status port):
// see package httpserve for why each. Timeouts and sizes are per request,
// MaxConnections per listener.
type HTTP struct {
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	WriteTimeout      time.Duration
	IdleTimeout       time.Duration
	// RequestTimeout is every request's deadline: its context ends then,
	// so the etcd calls under it are cancelled and it answers 503 when
	// etcd could not (quorum lost) instead of hanging.
	RequestTimeout time.Duration
	MaxHeaderBytes int64
	MaxBodyBytes   int64
	MaxConnections int64
}

// API is the compute API role.
type API struct {
	Bind string // host:port
	// Auth is how callers authenticate: AuthKeystone (tokens of the
	// file's identity block) or AuthNoAuth (Nova's noauth2, for
	// development: every caller names itself, "admin" is an admin).
	Auth string
	// Quota are the default quota limits of every project (Nova's
	// [quota] options), by os-quota-sets resource name: only those the
	// file sets; the others are Nova's defaults. -1 is unlimited.
	Quota map[string]int64
	// AllowResizeToSameHost is Nova's allow_resize_to_same_host: a
	// resize may land on the server's own host (default false).
	AllowResizeToSameHost bool
	// ShelvedOffloadTime is Nova's shelved_offload_time, in seconds: 0
	// offloads a shelved server as soon as it has stopped (the default,
	// as in Nova), -1 never, N > 0 after N seconds (the leader's
	// shelved_offloads duty, every scheduler.leader_interval).
	ShelvedOffloadTime int64
	// ResizeConfirmWindow is Nova's resize_confirm_window: a resize or
	// cold migration left unconfirmed (VERIFY_RESIZE) this long is
	// confirmed by the scheduler leader (leader.DutyConfig). 0, the
	// default, never confirms automatically.
	ResizeConfirmWindow time.Duration

	declRange hcl.Range
}

// Placement is the Placement API role.
type Placement struct {
	Bind string // host:port
	Auth string // AuthNoAuth, AuthTokens or AuthKeystone
	// Tokens are the accepted X-Auth-Token values in AuthTokens mode, in
	// file order; no two share a Token.
	Tokens []Token
	// CandidateWorkLimit is the combinations one allocation candidates
	// search may try before it answers 400 (placement.SetCandidateWorkLimit).
	CandidateWorkLimit int64

	declRange hcl.Range
}

// Image is the image API role: Glance's own endpoint (port 9292), as
// clients find it in the catalog.
type Image struct {
	Bind string // host:port
	// Auth is AuthKeystone (check X-Auth-Token against this file's
	// identity block: its directory and the signing key in etcd) or
	// AuthNoAuth (every caller an admin: berth dev and tests).
	Auth string

	declRange hcl.Range
}

// Identity is the identity API: its directory (users, projects, role
// assignments) and the service catalog its tokens carry. Every reference
// is checked by the decoder: an assignment names a user and a project
// defined in the block.
type Identity struct {
	// Bind is the identity API's host:port; "" serves no identity API:
	// the block then only lets this process check the tokens another
	// server issued (api and placement with auth = "keystone", which
	// need the directory to know a token's roles).
	Bind     string
	TokenTTL time.Duration // a token's lifetime
	Region   string        // the catalog's region
	Users    []IdentityUser
	Projects []IdentityProject
	// Assignments give a user a role on a project or on the system.
	Assignments []RoleAssignment
	// Endpoints are the catalog, one per service type, in file order.
	Endpoints []CatalogEndpoint

	declRange hcl.Range
}

// IdentityUser is one user; ID "" is derived from the name by package
// identity, the same on every server.
type IdentityUser struct {
	Name, ID     string
	PasswordHash string // bcrypt; `berth identity hash-password` makes one
}

// IdentityProject is one project; ID "" is derived from the name.
type IdentityProject struct {
	Name, ID string
}

// RoleAssignment gives User the role Role on Project or, when System,
// on the system (Keystone's system scope "all").
type RoleAssignment struct {
	User, Project string
	System        bool
	Role          string
}

// CatalogEndpoint is one service of the catalog; Internal and Admin are
// Public when the file leaves them out.
type CatalogEndpoint struct {
	Type                    string
	Public, Internal, Admin string
}

// The identity roles (Keystone's defaults) and catalog service types.
var (
	IdentityRoles        = []string{"admin", "member", "reader"}
	CatalogEndpointTypes = []string{"compute", "placement", "image", "identity"}
)

// Token is one static API token and the identity it stands for.
type Token struct {
	Token     string
	Roles     []string
	ProjectID string
	UserID    string
	// SystemScope is "all" for a system-scoped token ("" = project
	// scope): with the reader role it may read everything.
	SystemScope string
}

// Scheduler is the scheduler role; the field names follow Nova's
// [filter_scheduler] options.
type Scheduler struct {
	Bind                        string // host:port of select_destinations
	MaxAttempts                 int    // 1 + alternates per instance
	HostSubsetSize              int
	MaxPlacementResults         int
	ShuffleBestSameWeighedHosts bool
	TrackInstanceChanges        bool
	// HostCapacityMetrics exports berth_host_resource_* per host beside
	// the aggregates (three series per class per host).
	HostCapacityMetrics bool
	EnabledFilters      []string // in the order they run
	MaxHostsToWeigh     int      // 0 weighs every host that passed the filters
	PlacementSampleSize int      // 0 asks placement for max_placement_results candidates in its order
	ElectionTTL         time.Duration
	// AdvertiseURL is the URL registered under /members/scheduler/ for
	// superconductors to call; "" derives it from Bind.
	AdvertiseURL string
	// The leader's singleton duties: how often each runs, and the graces.
	LeaderInterval           time.Duration
	DownHostGrace            time.Duration
	OrphanGrace              time.Duration
	StuckBuildRequestTimeout time.Duration
	// The leader's etcd space duty: every EtcdDefragInterval, defragment
	// (one at a time, the raft leader last) each member whose file is at
	// least EtcdDefragRatio times its live data and EtcdDefragMinBytes
	// larger. The NOSPACE alarm's recovery runs every LeaderInterval
	// whatever EtcdDefrag says.
	EtcdDefrag         bool
	EtcdDefragInterval time.Duration
	EtcdDefragRatio    float64
	EtcdDefragMinBytes int64
	Weights            Weights

	// Nova's [scheduler] gates of the aggregate request filters.
	LimitTenantsToPlacementAggregate     bool
	PlacementAggregateRequiredForTenants bool
	EnableIsolatedAggregateFiltering     bool

	// EmptyPlacementFallback: when Placement has no resource provider at
	// all, schedule over the hosts the agents registered with the legacy
	// Core/Ram/Disk filters on their reported capacities, instead of
	// NoValidHost (seed resource-providers-scheduler-db-filters; default
	// false).
	EmptyPlacementFallback bool

	declRange           hcl.Range
	enabledFiltersRange *hcl.Range // nil when the filters are the defaults
	filename            string
}

// Weights are the weigher multipliers; a negative multiplier turns a
// preference into an aversion, 0 disables the weigher.
type Weights struct {
	RAM              float64
	CPU              float64
	Disk             float64
	IOOps            float64
	BuildFailure     float64
	SoftAffinity     float64
	SoftAntiAffinity float64
	NumInstances     float64
}

// Superconductor is the role that turns build requests into builds.
type Superconductor struct {
	Workers int
	// LeaseTTL is the session lease of its build-request leases: a dead
	// superconductor's requests are taken over after it.
	LeaseTTL time.Duration
	// SelectTimeout bounds one scheduler's answer before the next is asked.
	SelectTimeout time.Duration
	// Ranking spreads the build requests over the superconductors.
	Ranking Ranking

	declRange hcl.Range
}

// Conductor is a cell conductor.
type Conductor struct {
	Cell     string
	Workers  int
	LeaseTTL time.Duration
	// Ranking spreads the cell's retries over its conductors.
	Ranking Ranking

	declRange hcl.Range
}

// Ranking is how a leased work queue spreads its items over the processes
// that hold it (workqueue.Queue): each item is ranked over the holders by
// rendezvous hashing; the first tries it at once, the k-th after k
// graces (at most two) and only while every better-ranked holder has
// leased something within IdleAfter.
type Ranking struct {
	// Grace is how long an item waits for a better-ranked holder per rank.
	Grace time.Duration
	// IdleAfter is how long a better-ranked holder may go without a
	// lease before its items are taken over; at least Grace.
	IdleAfter time.Duration
	// StealAfter is how long an item may wait for a live but slow
	// holder before its second-ranked holder, with workers idle, takes
	// it (newest first); 0 never does. At least IdleAfter.
	StealAfter time.Duration
}

// Agent is the per-compute-host agent.
type Agent struct {
	Host                 string
	Cell                 string
	Driver               string // DriverFake or DriverProcess
	ReportInterval       time.Duration
	ServiceDownTime      time.Duration
	MaxConcurrentBuilds  int
	TrackInstanceChanges bool
	InstanceSyncInterval time.Duration
	// ProviderSyncInterval is the period of update_provider_tree: inventory
	// and the disabled trait, the backstop for a missed service change.
	ProviderSyncInterval time.Duration
	// ProviderRefresh is Nova's [compute]
	// resource_provider_association_refresh: how long a provider sync
	// trusts what it last read or wrote of the host's provider before it
	// reads it again. 0 reads it once and then never again on its own,
	// as in Nova.
	ProviderRefresh time.Duration
	Inventory       Inventory
	Fake            FakeDriver
	Process         ProcessDriver

	declRange hcl.Range
}

// Inventory is what the agent reports to Placement. A zero size (VCPUs,
// MemoryMB, DiskGB) means "detect from the host"; the agent does that.
type Inventory struct {
	VCPUs                int64
	MemoryMB             int64
	DiskGB               int64
	ReservedHostMemoryMB int64
	ReservedHostDiskGB   int64
	ReservedHostCPUs     int64
	CPUAllocationRatio   float64
	RAMAllocationRatio   float64
	DiskAllocationRatio  float64
}

// FakeDriver tunes the fake driver, which builds nothing and is used by
// `berth dev` and the e2e tests to exercise scheduling and retries.
type FakeDriver struct {
	BuildTime         time.Duration
	FailureRate       float64 // 0..1, chance that a build fails
	Fail              bool    // every build fails
	FailReschedulable bool    // failures ask for a reschedule rather than ERROR
	// The live migration's operations: each takes LiveMigrationTime;
	// the Fail flags fail the destination's pre-check (the
	// superconductor tries the next host), the start on the destination
	// and the source's hand-over (both rolled back).
	LiveMigrationTime time.Duration
	FailLiveCheck     bool
	FailLiveStart     bool
	FailLiveOut       bool
}

// ProcessDriver configures the process driver: each instance is a child
// process running the flavor's berth:command extra spec, or Command.
type ProcessDriver struct {
	Command   string        // run by /bin/sh -c when the flavor names none; "" fails such builds
	StateDir  string        // pid records and output, in <StateDir>/<host>; "" is <tmp>/berth-process
	StopGrace time.Duration // SIGTERM to SIGKILL on delete
}

// Enumerated values accepted in the config.
const (
	AuthNoAuth   = "noauth"
	AuthTokens   = "tokens"
	AuthKeystone = "keystone" // tokens of the identity block

	DriverFake    = "fake"
	DriverProcess = "process"

	LogFormatText = "text"
	LogFormatJSON = "json"
)

// LogLevels are the accepted log levels, most verbose first.
var LogLevels = []string{"trace", "debug", "info", "warn", "error"}
