// Package agent is Berth's per-host compute service: it registers the host
// and its compute node resource provider, keeps a liveness lease, builds and
// deletes what conductors cast to its host prefix through a driver, reports
// instance info for the schedulers (seed isolate-scheduler-db), files
// reschedules for its cell's conductors (seed return-alternate-hosts), and
// keeps the COMPUTE_STATUS_DISABLED trait in step with its service record
// (seed pre-filter-disabled-computes).
package agent

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/informer"
	"github.com/berth-project/berth/internal/metrics"
)

// Version is the agent version written into its service record.
const Version = "0.1.0"

// providerNamespace derives a host's compute node provider uuid from its
// name, so a re-registered host (new disk, lost state) keeps its provider.
var providerNamespace = uuid.MustParse("6f1f7c59-6a1a-4d57-9c66-5d1c0b8e2f10")

// ProviderUUIDForHost is the compute node provider uuid of host.
func ProviderUUIDForHost(host string) string {
	return uuid.NewSHA1(providerNamespace, []byte(host)).String()
}

// Placement is what an agent needs of the placement service.
type Placement interface {
	EnsureProvider(ctx context.Context, uuid, name, parentUUID string) error
	UpdateProvider(ctx context.Context, uuid string, mutate func(p *etcdschema.Provider) error) error
	DeleteAllocations(ctx context.Context, consumer string) error
}

// Inventory is the host's reportable capacity; zero sizes are detected.
type Inventory struct {
	VCPUs, MemoryMB, DiskGB                                     int64
	ReservedHostCPUs, ReservedHostMemoryMB, ReservedHostDiskGB  int64
	CPUAllocationRatio, RAMAllocationRatio, DiskAllocationRatio float64
}

// Config is an agent's settings, from the HCL agent block.
type Config struct {
	Host                 string
	Cell                 string
	ReportInterval       time.Duration
	ServiceDownTime      time.Duration
	ProviderSyncInterval time.Duration
	// ProviderRefresh is how long a provider sync trusts what it last
	// read or wrote of the provider (provider_cache.go): 0 is the
	// default, 300 s; NeverRefreshProvider trusts it until a sync fails.
	ProviderRefresh      time.Duration
	MaxConcurrentBuilds  int
	TrackInstanceChanges bool
	InstanceSyncInterval time.Duration
	Inventory            Inventory
	// DataDir is where disk size is detected when not configured.
	DataDir string
	// Metrics counts finished builds by outcome (nil: not counted).
	Metrics *metrics.Metrics
	// Fed says the caller drives the agent through the methods a
	// simulated fleet uses (fleet.go: Register, Work, Follow, the syncs)
	// and never calls Run: New builds none of Run's three watches (the
	// builds informer and the follow's two), which such an agent never
	// starts. A fleet keeps 100,000s of agents alive, and the watches
	// were 7 of a host's 39 live heap objects, which every collection
	// of a fleet process scans (BenchmarkFleetBackground's heap profile).
	Fed bool
}

// Agent is one host's compute service.
type Agent struct {
	cfg       Config
	cli       *clientv3.Client
	keys      etcdschema.Keys
	placement Placement
	driver    Driver
	log       hclog.Logger
	provider  string
	own       ownKeys

	builds   *informer.Informer
	mu       sync.Mutex
	pending  map[string]informer.Event // latest cast per instance, not yet worked
	inFlight map[string]bool
	sem      chan struct{}
	wg       sync.WaitGroup
	wake     chan struct{}
	syncNow  chan struct{} // the service's disabled flag changed
	// follow is the host's service record and instance info, and its
	// host mapping, as the agent's watches (followInf and mappingInf,
	// run by Run) or a fleet's deliver them (host_follow.go).
	follow     hostFollow
	followInf  *informer.Informer
	mappingInf *informer.Informer

	// failedBuilds is the failed_builds this agent last read or wrote
	// (-1: not known yet), registration's read included. The agent is the
	// field's only writer (the API and registration keep it), so a
	// success with the count already 0 needs no read of the service
	// record: one etcd read less per build, the first one too.
	failedMu     sync.Mutex
	failedBuilds int

	// lastCapacity is the HostCapacity this agent last wrote (capacity.go).
	capacityMu   sync.Mutex
	lastCapacity *etcdschema.HostCapacity

	// seen is what this agent last read or wrote of its provider
	// (provider_cache.go).
	seenMu sync.Mutex
	seen   seenProvider

	// readAtRegister is the service record register read, for goUp's
	// first try (nil once used).
	upMu           sync.Mutex
	readAtRegister *serviceRead

	// lastSync is the HostSync this agent last wrote, and unwritten how
	// many syncs since found the same list (register.go syncInstances).
	syncMu    sync.Mutex
	lastSync  *etcdschema.HostSync
	unwritten int
}

// New builds an agent; Run starts it.
func New(cfg Config, cli *clientv3.Client, keys etcdschema.Keys, p Placement, d Driver, log hclog.Logger) (*Agent, error) {
	if cfg.Host == "" || cfg.Cell == "" {
		return nil, fmt.Errorf("agent: host and cell are required")
	}
	if cfg.ReportInterval <= 0 {
		cfg.ReportInterval = 10 * time.Second
	}
	if cfg.ServiceDownTime <= cfg.ReportInterval {
		// Nova forces service_down_time to 2.5 x report_interval when it is
		// not longer than the interval: one late beat must not mean down.
		cfg.ServiceDownTime = cfg.ReportInterval * 5 / 2
	}
	if cfg.ProviderSyncInterval <= 0 {
		cfg.ProviderSyncInterval = 60 * time.Second
	}
	if cfg.ProviderRefresh == 0 {
		cfg.ProviderRefresh = DefaultProviderRefresh
	}
	if cfg.InstanceSyncInterval <= 0 {
		cfg.InstanceSyncInterval = 120 * time.Second
	}
	if cfg.MaxConcurrentBuilds <= 0 {
		cfg.MaxConcurrentBuilds = 10
	}
	a := &Agent{cfg: cfg, cli: cli, keys: keys, placement: p, driver: d,
		log: log.With("host", cfg.Host, "cell", cfg.Cell), provider: ProviderUUIDForHost(cfg.Host), own: newOwnKeys(keys, cfg),
		pending: map[string]informer.Event{}, inFlight: map[string]bool{},
		sem: make(chan struct{}, cfg.MaxConcurrentBuilds), wake: make(chan struct{}, 1),
		syncNow: make(chan struct{}, 1), failedBuilds: -1}
	// The handler works puts only (a cast's delete is the agent's own
	// outcome, or a take-back its outcome's compare finds): etcd leaves
	// the deletes out, one event per build fewer.
	if cfg.Fed {
		return a, nil
	}
	a.builds = informer.New(cli, a.own.builds, buildsHandler{a}, a.log, informer.PutsOnly())
	// The follow needs deletes (instance info goes), so its watch is not
	// puts only.
	from, end := keys.HostInstancesToService(cfg.Host)
	a.followInf = informer.New(cli, from, followHandler{a}, a.log, informer.Until(end))
	// The mapping is outside that range: a watcher of its own, on the
	// one key (see hostFollow).
	a.mappingInf = informer.New(cli, a.own.mapping, mappingFollowHandler{a}, a.log, informer.Key())
	return a, nil
}

// ProviderUUID is the host's compute node provider.
func (a *Agent) ProviderUUID() string { return a.provider }

// Run registers the host, reconciles it with its driver, makes it up
// (service record and alive key in one transaction) and serves it until
// ctx ends; then it stops
// taking work, lets running builds finish, and revokes its liveness lease
// so the host reads down at once instead of after service_down_time.
func (a *Agent) Run(ctx context.Context) error {
	if a.cfg.Fed {
		return fmt.Errorf("agent %s: built to be fed by its caller (Config.Fed), not run", a.cfg.Host)
	}
	if err := a.register(ctx); err != nil {
		return err
	}
	// Like Nova's init_host, before the host reads up and before any cast
	// is worked: the driver and etcd must agree on what runs here.
	a.watchExits(ctx)
	evacuations := map[string]int64{}
	if err := a.reconcile(ctx, evacuations); err != nil {
		return err
	}
	lease, err := a.startLiveness(ctx)
	if err != nil {
		return err
	}
	// A server evacuated while the reconcile ran or after it, the host
	// still reading down, goes now, before any cast is worked; the host
	// being up, no more can be (cleanEvacuated).
	a.cleanEvacuated(ctx, evacuations)
	go a.builds.Run(ctx)
	dispatched := make(chan struct{})
	go func() { a.dispatch(ctx); close(dispatched) }()
	go a.periodic(ctx)
	go a.runServiceWatch(ctx)
	a.log.Info("agent running", "provider", a.provider)
	<-ctx.Done()
	<-dispatched // no wg.Add after this point
	a.wg.Wait()
	lease.close() // the ticker has ended: lease.get() is the last lease
	rctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := a.cli.Revoke(rctx, lease.get()); err != nil {
		a.log.Debug("revoke liveness lease", "error", err)
	}
	return nil
}

// WaitSynced blocks until the agent has read its pending builds once.
func (a *Agent) WaitSynced(ctx context.Context) error {
	if a.builds == nil {
		return fmt.Errorf("agent %s: built to be fed by its caller (Config.Fed): no builds watch to wait for", a.cfg.Host)
	}
	return a.builds.WaitSynced(ctx)
}

// periodic runs the provider sync (update_available_resource) and the
// instance uuid sync for the schedulers.
func (a *Agent) periodic(ctx context.Context) {
	prov := time.NewTicker(a.cfg.ProviderSyncInterval)
	sync := time.NewTicker(a.cfg.InstanceSyncInterval)
	defer prov.Stop()
	defer sync.Stop()
	// One uuid list at once: until a host's first HostSync the schedulers
	// read its instances from its cell on every request that needs them.
	if a.cfg.TrackInstanceChanges {
		if _, err := a.syncInstances(ctx); err != nil && ctx.Err() == nil {
			a.log.Warn("instance sync failed", "error", err)
		}
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-prov.C:
			a.providerTick(ctx)
		case <-sync.C:
			if a.cfg.TrackInstanceChanges {
				if _, err := a.syncInstances(ctx); err != nil && ctx.Err() == nil {
					a.log.Warn("instance sync failed", "error", err)
				}
			}
		}
	}
}

// ownKeys are the keys of the agent's own host and cell, spelled once:
// every cast, liveness beat and periodic sync used them, and each use
// built its string again.
type ownKeys struct {
	builds, service, instances, sync, capacity, mapping, cell string
}

func newOwnKeys(k etcdschema.Keys, cfg Config) ownKeys {
	return ownKeys{builds: k.Builds(cfg.Host), service: k.Service(cfg.Host), instances: k.HostInstances(cfg.Host),
		sync: k.HostSync(cfg.Host), capacity: k.HostCapacity(cfg.Host), mapping: k.HostMapping(cfg.Host),
		cell: k.Cell(cfg.Cell)}
}
