package stack

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/agent"
	"github.com/berth-project/berth/api"
	"github.com/berth-project/berth/compute"
	"github.com/berth-project/berth/conductor"
	"github.com/berth-project/berth/configs"
	"github.com/berth-project/berth/console"
	"github.com/berth-project/berth/drain"
	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/hosts"
	"github.com/berth-project/berth/identity"
	"github.com/berth-project/berth/internal/audit"
	"github.com/berth-project/berth/internal/embedetcd"
	"github.com/berth-project/berth/internal/httpserve"
	"github.com/berth-project/berth/internal/loadgc"
	"github.com/berth-project/berth/internal/members"
	"github.com/berth-project/berth/internal/metrics"
	"github.com/berth-project/berth/internal/rawtxn"
	"github.com/berth-project/berth/internal/rolelabel"
	"github.com/berth-project/berth/internal/status"
	"github.com/berth-project/berth/leader"
	"github.com/berth-project/berth/placement"
	"github.com/berth-project/berth/placement/httpapi"
	"github.com/berth-project/berth/scheduler"
	"github.com/berth-project/berth/servers"
)

// Stack is the set of roles one berth process runs, sharing one etcd
// client and one placement service.
type Stack struct {
	cfg    *configs.Config
	log    hclog.Logger
	keys   etcdschema.Keys
	cli    *clientv3.Client
	etcd   *embedetcd.Server // when this process embeds etcd
	ownCli bool
	// certs is what every listener serves (tls.go); nil without TLS.
	certs *httpserve.Certificates

	placement *placement.Service
	// placementIndexed: the placement service's index is loaded (the
	// scheduler and the Placement API need it; the other roles do not).
	placementIndexed bool
	hosts            *scheduler.HostManager
	sched            *scheduler.Scheduler
	schedID          string // this process's scheduler registration id

	// Credentials (identity.go): the token signing key from etcd, the
	// identity block's Service, the service tokens; each made once.
	tokenKey  []byte
	identity  *identity.Service
	svcTokens *identity.ServiceTokens

	// metrics is this process's registry (see internal/metrics for why
	// not the global one); status its /healthz, /readyz and /metrics.
	metrics   *metrics.Metrics
	status    *status.Status
	statusSrv *httpserve.Server // the status { bind } listener, stopped last
	// openFiles is the process's open-file limit (0: unknown, a stack
	// not started by Run); capLowered logs once that it bounds the caps.
	openFiles  uint64
	capLowered sync.Once

	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	servers  []*httpserve.Server
	errs     chan error
	stopOnce sync.Once
	// Endpoints lists what the process serves, for the banner.
	Endpoints [][2]string
}

// Connect starts embedded etcd or dials the configured cluster; ctx ends
// the wait of a cluster member for its peers.
func Connect(ctx context.Context, cfg *configs.Config, log hclog.Logger) (*Stack, error) {
	s := New(cfg, log)
	if cfg.Etcd.Embedded != nil {
		ec := cfg.Etcd.Embedded.EmbedConfig()
		// etcd's own warnings (slow disk, late heartbeats, lost peers)
		// belong in this process's log, as "<logger>.etcd" lines.
		ec.Logger = log.Named("etcd")
		// Its raft, apply and gRPC goroutines are profiled as one role.
		var srv *embedetcd.Server
		var err error
		rolelabel.Do(ctx, "etcd server", func(ctx context.Context) { srv, err = embedetcd.StartContext(ctx, ec) })
		if err != nil {
			return nil, err
		}
		s.etcd = srv
		s.Attach(srv.Client())
		s.Endpoints = append(s.Endpoints, [2]string{"etcd", srv.ClientURL()})
		return s, nil
	}
	cc, err := cfg.Etcd.ClientConfig()
	if err != nil {
		return nil, err
	}
	// The client's transport goroutines (each answer's and watch event's
	// decoding) are profiled as their own role.
	var cli *clientv3.Client
	rolelabel.Do(ctx, "etcd client", func(context.Context) { cli, err = clientv3.New(cc) })
	if err != nil {
		return nil, fmt.Errorf("etcd client for %v: %w", cc.Endpoints, err)
	}
	rawtxn.Networked(cli, cc)
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Etcd.DialTimeout+5*time.Second)
	defer cancel()
	if _, err := cli.Get(ctx, s.keys.Cell("health-check")); err != nil {
		cli.Close()
		return nil, fmt.Errorf("etcd at %v is not reachable: %w", cc.Endpoints, err)
	}
	s.Attach(cli)
	s.ownCli = true
	return s, nil
}

// New is a stack with no etcd client yet (see Attach).
func New(cfg *configs.Config, log hclog.Logger) *Stack {
	s := &Stack{cfg: cfg, log: log, keys: etcdschema.New(cfg.Etcd.Prefix), errs: make(chan error, 16)}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.metrics = metrics.New()
	s.status = status.New(s.metrics)
	return s
}

// Attach makes cli the stack's etcd client, its KV requests timed (the
// embedded member's in-process client as well as a networked one), and
// adds the etcd readiness check. It runs before any role shares cli.
func (s *Stack) Attach(cli *clientv3.Client) {
	cli.KV = s.metrics.InstrumentKV(cli.KV)
	s.cli = cli
	// The same never-written key Connect reads: a linearizable read needs
	// the cluster's quorum, and a count-only read costs nothing.
	s.status.Etcd(cli, s.keys.Cell("health-check"))
	s.status.EtcdAlarms(cli)
}

// readyWhen adds a readiness check that passes once wait returns nil (a
// role's WaitSynced), failing with notYet until then.
func (s *Stack) readyWhen(name, notYet string, wait func(context.Context) error) {
	ch := make(chan struct{})
	go func() {
		if wait(s.ctx) == nil {
			close(ch)
		}
	}()
	s.status.Ready(name, ch, notYet)
}

// ServeStatus serves /healthz, /readyz and /metrics on status.bind, when
// set. It starts before the roles, so /healthz answers and /readyz says
// what is still loading during start-up, and stops after them.
func (s *Stack) ServeStatus() error {
	if s.cfg.Status.Bind == "" {
		return nil
	}
	ln, err := s.listen("status", s.cfg.Status.Bind)
	if err != nil {
		return err
	}
	s.statusSrv = s.newServer("status", s.status.Handler())
	s.Endpoints = append(s.Endpoints, [2]string{"status", s.url(ln.Addr())})
	go func() {
		if err := s.statusSrv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.errs <- fmt.Errorf("status: %w", err)
		}
	}()
	return nil
}

// run runs a role until the stack stops, its goroutines profiled under
// its name (package rolelabel); a role that fails stops the process.
func (s *Stack) run(name string, f func(ctx context.Context) error) {
	s.wg.Add(1)
	rolelabel.Go(s.ctx, name, func(ctx context.Context) {
		defer s.wg.Done()
		if err := f(ctx); err != nil && s.ctx.Err() == nil {
			s.errs <- fmt.Errorf("%s: %w", name, err)
		}
	})
}

// placementStore makes the stack's placement service without loading its
// index: the compute API, the conductors, the superconductors and agents
// only write allocations (a claim without the index reads what it needs
// from etcd), and an index is every provider and consumer in memory
// (1.3 GB at 100,000 hosts with a million instances) kept current by a
// watch of every claim.
func (s *Stack) placementStore() {
	if s.placement == nil {
		s.placement = placement.New(s.cli, s.keys, s.log)
		s.placement.SetMetrics(s.metrics)
	}
}

// waitPlacement waits until the stack's placement index has seen rev; a
// stack without an index has nothing to wait for.
func (s *Stack) waitPlacement(ctx context.Context, rev int64) error {
	if !s.placementIndexed {
		return nil
	}
	return s.placement.WaitForRevision(ctx, rev)
}

// startPlacement loads the placement index, which the scheduler and the
// Placement HTTP API search, into the stack's placement service.
func (s *Stack) startPlacement(ctx context.Context) error {
	if s.placementIndexed {
		return nil
	}
	s.placementStore()
	s.placementIndexed = true
	loaded := make(chan error, 1)
	indexReady := make(chan struct{})
	s.status.Ready("placement index", indexReady, "the placement index has not loaded the providers yet")
	s.run("placement", func(ctx context.Context) error {
		start := s.placement.Start
		switch {
		case s.hosts != nil && s.cfg.Placement == nil:
			// A scheduler's without the Placement API: only its
			// leader's orphaned-allocation sweep reads every consumer,
			// so they are listed when that sweep first asks, once the
			// host manager has synced; a scheduler that never leads
			// never holds them (placement.StartOnDemand).
			start = func(ctx context.Context) error { return s.placement.StartOnDemand(ctx, s.hosts.WaitSynced) }
		case s.hosts != nil:
			// A scheduler's: the consumers are listed once the host
			// manager has synced, so the scheduler serves from the
			// providers and hosts first (placement.StartDeferred).
			start = func(ctx context.Context) error { return s.placement.StartDeferred(ctx, s.hosts.WaitSynced) }
		}
		err := start(ctx)
		loaded <- err
		if err == nil {
			close(indexReady)
		}
		if err != nil {
			return err
		}
		<-ctx.Done()
		return nil
	})
	select {
	case err := <-loaded:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Serve serves h on bind, its listener passed through each wrap, until
// the stack stops.
func (s *Stack) Serve(name, bind string, h http.Handler, wrap ...func(net.Listener) net.Listener) error {
	_, err := s.serveAddr(name, bind, h, wrap...)
	return err
}

// serveAddr serves h on bind, its listener passed through each wrap, and
// returns the address it listens on.
func (s *Stack) serveAddr(name, bind string, h http.Handler, wrap ...func(net.Listener) net.Listener) (net.Addr, error) {
	ln, err := s.listen(name, bind)
	if err != nil {
		return nil, err
	}
	for _, w := range wrap {
		ln = w(ln)
	}
	// Every API server of the process also answers the status paths. No
	// API has them as routes (the compute API's own /healthz said the
	// same as this one).
	h = status.Mount(s.metrics.InstrumentHTTP(name, h), s.status.Handler())
	srv := s.newServer(name, h)
	s.servers = append(s.servers, srv)
	s.Endpoints = append(s.Endpoints, [2]string{name, s.url(ln.Addr())})
	// Its connections' goroutines are profiled under the listener's name.
	rolelabel.Go(s.ctx, name, func(context.Context) {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.errs <- fmt.Errorf("%s: %w", name, err)
		}
	})
	return ln.Addr(), nil
}

// newServer is every listener's server: the config's http limits
// (package httpserve says why each), the same for every listener.
func (s *Stack) newServer(name string, h http.Handler) *httpserve.Server {
	l := httpLimits(s.cfg.HTTP)
	l.MaxConnections = s.connectionCap()
	if name == "scheduler" {
		// Its client, the superconductor, waits select_timeout (30 s by
		// default) for an answer; read_timeout bounds it instead.
		l.RequestTimeout = l.ReadTimeout
	}
	return httpserve.New(name, h, l, s.log.Named("http"))
}

// connectionCap is each listener's connection cap: http {
// max_connections }, lowered to a tenth of the open-file limit when that
// is smaller. So even the five listeners of `berth server`, every one
// full, leave half the descriptors to etcd, whose member exits when it
// cannot open a file: with a limit of 1,024 and caps of 1,024, 1,000 idle
// connections to one listener did that.
func (s *Stack) connectionCap() int {
	limit := int(s.cfg.HTTP.MaxConnections)
	if tenth := int(s.openFiles / 10); s.openFiles > 0 && tenth < limit {
		tenth = max(tenth, 1)
		s.capLowered.Do(func() {
			s.log.Warn("http { max_connections } lowered to a tenth of the open file limit; raise the limit (LimitNOFILE) to serve more",
				"max_connections", limit, "open_file_limit", s.openFiles, "lowered_to", tenth)
		})
		return tenth
	}
	return limit
}

// httpLimits maps the HCL http block to httpserve's limits.
func httpLimits(c configs.HTTP) httpserve.Limits {
	return httpserve.Limits{
		ReadHeaderTimeout: c.ReadHeaderTimeout, ReadTimeout: c.ReadTimeout, WriteTimeout: c.WriteTimeout,
		IdleTimeout: c.IdleTimeout, RequestTimeout: c.RequestTimeout, MaxHeaderBytes: int(c.MaxHeaderBytes), MaxBodyBytes: c.MaxBodyBytes,
		MaxConnections: int(c.MaxConnections),
	}
}

// StartServerRoles starts the roles of `berth server` its config enables.
func (s *Stack) StartServerRoles(ctx context.Context) error {
	cfg := s.cfg
	// The scheduler needs both the placement index and the host manager:
	// the host manager starts loading first, so the two loads overlap
	// (one's decoding runs while the other waits for etcd) instead of
	// adding up.
	// Nothing answers from the host manager before startScheduler waits
	// for it, and /readyz names each until it has loaded.
	// While they load, the GC runs at a tighter target (loadgc): the
	// etcd client's garbage would otherwise double the peak memory.
	loaded := loadgc.Tighten()
	defer loaded()
	if cfg.Scheduler != nil {
		if err := cfg.Scheduler.CheckFilters(scheduler.FilterNames()); err != nil {
			return err
		}
		s.startHostManager(cfg.Scheduler)
	}
	if cfg.Scheduler != nil || cfg.Placement != nil {
		if err := s.startPlacement(ctx); err != nil {
			return err
		}
	} else {
		s.placementStore()
	}
	if cfg.Placement != nil {
		// The limit holds for the scheduler's searches in this process too.
		s.placement.SetCandidateWorkLimit(cfg.Placement.CandidateWorkLimit)
		opts, err := s.placementAuth(ctx, cfg.Placement)
		if err != nil {
			return err
		}
		h := httpapi.New(s.placement, s.log.Named("placement"), opts)
		// httpapi.Listener lets the API answer a non-integer
		// Content-Length as Placement does, not with net/http's bare 400.
		if err := s.Serve("placement", cfg.Placement.Bind, audit.Handler("placement", s.log.Named("audit"), h), httpapi.Listener); err != nil {
			return err
		}
	}
	if cfg.Scheduler != nil {
		if err := s.startScheduler(ctx, cfg.Scheduler); err != nil {
			return err
		}
	}
	loaded() // both loads are done: startScheduler waited for the host manager
	if cfg.Superconductor != nil {
		if err := s.startSuperconductor(ctx, cfg.Superconductor); err != nil {
			return err
		}
	}
	if cfg.API != nil {
		if err := api.EnsureFlavors(ctx, s.cli, s.keys, api.DefaultFlavors()); err != nil {
			return err
		}
		computeAPI := api.New(s.cli, s.keys, s.placement, s.log.Named("api"))
		computeAPI.SetDefaultAvailabilityZone(cfg.DefaultAvailabilityZone)
		// Nova's API (package compute) and Berth's /v1 share the listener
		// until /v1 goes (issue 16).
		nova := compute.New(s.cli, s.keys, s.log.Named("compute"))
		nova.SetAggregateMirror(s.placement)
		nova.SetQuotaDefaults(cfg.API.Quota)
		auth, err := s.computeAuth(ctx, cfg.API)
		if err != nil {
			return err
		}
		nova.SetAuth(auth)
		// /v1 (a deprecated alias beside Nova's API) checks the same tokens.
		computeAPI.SetAuth(api.Auth{Keystone: auth.Mode == compute.AuthKeystone, Verifier: auth.Verifier, IdentityURI: auth.IdentityURI})
		imageStore, err := s.imageStore(ctx)
		if err != nil {
			return err
		}
		nova.SetImages(imageStore)
		novaHosts := hosts.New(s.cli, s.keys, s.log.Named("hosts"))
		novaHosts.DefaultZone = cfg.DefaultAvailabilityZone
		nova.SetHosts(novaHosts, hosts.DefaultTraitSyncTimeout)
		nova.SetPlacement(s.placement)
		nova.SetDefaultAvailabilityZone(cfg.DefaultAvailabilityZone)
		nova.SetAllowResizeToSameHost(cfg.API.AllowResizeToSameHost)
		nova.SetShelvedOffloadTime(time.Duration(cfg.API.ShelvedOffloadTime) * time.Second)
		// The web console (package console) under /console/ on the same
		// listener, behind the compute API's auth mode; every other path
		// is the APIs' as before.
		idSvc, err := s.identityService(ctx)
		if err != nil {
			return err
		}
		// Drains started from /v1 or the console may be live: the
		// leader's duty does them through the same entry point.
		live := drain.ServersLive(servers.New(s.cli, s.keys, s.placement, s.log.Named("drain")))
		computeAPI.SetLiveMigrator(live)
		consoleDrains := drain.NewStore(s.cli, s.keys, novaHosts, s.log.Named("console"))
		consoleDrains.SetLiveMigrator(live)
		consoleCfg := console.Config{Client: s.cli, Keys: s.keys, Hosts: novaHosts,
			Servers: servers.New(s.cli, s.keys, s.placement, s.log.Named("console")), Auth: cfg.API.Auth,
			Drains: consoleDrains, Log: s.log.Named("console")}
		if idSvc != nil {
			consoleCfg.Verifier, consoleCfg.Issuer = idSvc.Verifier(), idSvc
		}
		ui := console.New(consoleCfg)
		if err := s.Serve("compute API", cfg.API.Bind, audit.Handler("compute", s.log.Named("audit"), ui.Beside(nova.Beside(computeAPI)))); err != nil {
			return err
		}
	}
	if cfg.Identity != nil {
		if err := s.startIdentity(ctx, cfg.Identity); err != nil {
			return err
		}
	}
	if cfg.Image != nil {
		if err := s.startImage(ctx, cfg.Image); err != nil {
			return err
		}
	}
	return nil
}

// startHostManager starts the scheduler's host manager loading and
// following the hosts, without waiting for it.
func (s *Stack) startHostManager(c *configs.Scheduler) {
	if s.hosts != nil {
		return
	}
	s.hosts = scheduler.NewHostManager(s.cli, s.keys, s.log.Named("scheduler").Named("hosts"),
		scheduler.WithTrackInstanceChanges(c.TrackInstanceChanges))
	rolelabel.Go(s.ctx, "scheduler host manager", func(ctx context.Context) { s.hosts.Run(ctx) })
	s.readyWhen("host manager", "the host manager has not read the hosts yet", s.hosts.WaitSynced)
	s.metrics.WatchHosts(s.hosts.HostCounts)
}

// startScheduler waits for the host manager (started by startHostManager,
// started here if not yet), serves select_destinations over HTTP,
// registers the endpoint under /members/scheduler/ and campaigns for
// leadership. The placement index is loaded before it is called.
func (s *Stack) startScheduler(ctx context.Context, c *configs.Scheduler) error {
	log := s.log.Named("scheduler")
	s.startHostManager(c)
	if err := c.CheckFilters(scheduler.FilterNames()); err != nil {
		return err
	}
	var err error
	sc := schedulerConfig(c)
	sc.DefaultAvailabilityZone = s.cfg.DefaultAvailabilityZone
	s.sched, err = scheduler.New(sc, s.placement, s.hosts, log)
	if err != nil {
		return err
	}
	s.sched.SetMetrics(s.metrics)
	s.metrics.WatchCapacity(s.hosts.CapacitySource(s.placement, s.cfg.DefaultAvailabilityZone), c.HostCapacityMetrics)
	if err := s.hosts.WaitSynced(ctx); err != nil {
		return err
	}
	// select_destinations claims resources: only Berth's own processes,
	// with a service token, may call it (identity.ServiceTokens).
	tokens, err := s.serviceTokens(ctx)
	if err != nil {
		return err
	}
	addr, err := s.serveAddr("scheduler", c.Bind, scheduler.RequireServiceToken(s.sched.Handler(), tokens, log))
	if err != nil {
		return err
	}
	url := c.AdvertiseURL
	if url == "" {
		url = advertiseFrom(s.scheme(), addr)
	}
	s.schedID = memberID(scheduler.Role)
	reg := &members.Registration{Cli: s.cli, Keys: s.keys, Role: scheduler.Role, ID: s.schedID, URL: url,
		TTL: c.ElectionTTL, Log: log}
	s.run("scheduler registration", reg.Run)
	s.status.Ready("scheduler registration", reg.Registered(), "the scheduler is not registered under /members/scheduler/ yet")
	sups := members.NewWatcher(s.cli, s.keys, conductor.SuperconductorRole, log)
	go sups.Run(s.ctx)
	// The automatic confirm reads the window from this file's api block
	// (Nova's resize_confirm_window sits with the API's move options).
	var confirmWindow time.Duration
	if s.cfg.API != nil {
		confirmWindow = s.cfg.API.ResizeConfirmWindow
	}
	candidate := leader.New(leader.Config{
		Client: s.cli, Keys: s.keys, Election: scheduler.Role, ID: s.schedID, TTL: c.ElectionTTL, Log: log.Named("leader"),
		Metrics: s.metrics,
		Duties: append(leader.Duties(leader.DutyConfig{
			Client: s.cli, Keys: s.keys, Placement: s.placement, Hosts: s.hosts, Superconductors: sups,
			ID: s.schedID, Interval: c.LeaderInterval, DownHostGrace: c.DownHostGrace,
			OrphanGrace: c.OrphanGrace, StuckBuildRequestTimeout: c.StuckBuildRequestTimeout,
			ResizeConfirmWindow: confirmWindow, Confirmer: servers.New(s.cli, s.keys, s.placement, log.Named("leader")),
			Log: log.Named("leader"),
		}), append(leader.EtcdSpaceDuties(leader.EtcdSpaceConfig{
			Client: s.cli, Defrag: c.EtcdDefrag, DefragInterval: c.EtcdDefragInterval,
			DefragRatio: c.EtcdDefragRatio, DefragMinBytes: c.EtcdDefragMinBytes,
			AlarmInterval: c.LeaderInterval, Metrics: s.metrics, Log: log.Named("leader"),
		}), leader.ServerCountDuty(s.cli, s.keys, c.LeaderInterval, s.metrics),
			// Host drains (package drain): moves servers off drained hosts.
			func() leader.Duty {
				srv := servers.New(s.cli, s.keys, s.placement, log.Named("drain"))
				return drain.Duty(drain.DutyConfig{Client: s.cli, Keys: s.keys, Servers: srv,
					Live: drain.ServersLive(srv), Interval: c.LeaderInterval, Log: log.Named("drain")})
			}(),
			leader.QuotaIndexDuty(s.cli, s.keys, c.LeaderInterval, s.schedID, log.Named("leader")),
			leader.ShelvedOffloadDuty(s.cli, s.keys, c.LeaderInterval, log.Named("leader"), nil))...),
	})
	s.run("scheduler leader", candidate.Run)
	select {
	case <-reg.Registered():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// startSuperconductor runs a superconductor that asks the in-process
// scheduler first, when there is one, and otherwise (or when it fails)
// the schedulers registered under /members/scheduler/.
func (s *Stack) startSuperconductor(ctx context.Context, c *configs.Superconductor) error {
	log := s.log.Named("superconductor")
	maxAttempts := configs.Defaults().Scheduler.MaxAttempts
	if s.cfg.Scheduler != nil {
		maxAttempts = s.cfg.Scheduler.MaxAttempts
	}
	scheds := members.NewWatcher(s.cli, s.keys, scheduler.Role, log)
	go scheds.Run(s.ctx)
	if err := scheds.WaitSynced(ctx); err != nil {
		return err
	}
	var local scheduler.Selector
	if s.sched != nil {
		local = s.sched
	}
	client, err := s.schedulerClient(ctx)
	if err != nil {
		return err
	}
	holder := memberID(conductor.SuperconductorRole)
	sup := conductor.NewSuperconductor(conductor.SuperconductorConfig{
		Client: s.cli, Keys: s.keys, Schedulers: scheduler.NewPool(local, s.schedID, scheds, client),
		Placement: s.placement, Holder: holder, Workers: c.Workers, LeaseTTL: c.LeaseTTL,
		SelectTimeout: c.SelectTimeout, MaxAttempts: maxAttempts, Log: log, Metrics: s.metrics,
		RankGrace: c.Ranking.Grace, HolderIdleAfter: c.Ranking.IdleAfter, StealAfter: c.Ranking.StealAfter,
	})
	s.run("superconductor", sup.Run)
	s.readyWhen("superconductor queue", "the superconductor has not read the build requests yet", sup.WaitSynced)
	reg := &members.Registration{Cli: s.cli, Keys: s.keys, Role: conductor.SuperconductorRole, ID: holder,
		TTL: c.LeaseTTL, Log: log}
	s.run("superconductor registration", reg.Run)
	return sup.WaitSynced(ctx)
}

// advertiseFrom turns a listen address into a URL others can call: an
// unspecified host (0.0.0.0, ::) becomes this machine's hostname.
func advertiseFrom(scheme string, addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return scheme + "://" + addr.String()
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		if h, err := os.Hostname(); err == nil {
			host = h
		}
	}
	return scheme + "://" + net.JoinHostPort(host, port)
}

// placementHandlerOptions maps the HCL placement block to the Placement
// API's options: its auth mode and, in tokens mode, what each token stands
// for. noauth (the default) needs nothing more: the API itself reads the
// identity from the token as Placement's noauth2 does.
func placementHandlerOptions(p *configs.Placement) httpapi.Options {
	auth := httpapi.AuthConfig{Mode: p.Auth}
	if p.Auth == configs.AuthTokens {
		auth.Tokens = make(map[string]httpapi.TokenInfo, len(p.Tokens))
		for _, t := range p.Tokens {
			auth.Tokens[t.Token] = httpapi.TokenInfo{UserID: t.UserID, ProjectID: t.ProjectID, Roles: t.Roles,
				SystemScope: t.SystemScope}
		}
	}
	return httpapi.Options{Auth: auth}
}

// schedulerConfig maps the HCL scheduler block to the scheduler's config.
func schedulerConfig(c *configs.Scheduler) scheduler.Config {
	sc := scheduler.Config{
		MaxAttempts: c.MaxAttempts, HostSubsetSize: c.HostSubsetSize,
		MaxPlacementResults: c.MaxPlacementResults, ShuffleBestSameWeighedHosts: c.ShuffleBestSameWeighedHosts,
		EnabledFilters:                       c.EnabledFilters,
		MaxHostsToWeigh:                      c.MaxHostsToWeigh,
		PlacementSampleSize:                  c.PlacementSampleSize,
		LimitTenantsToPlacementAggregate:     c.LimitTenantsToPlacementAggregate,
		PlacementAggregateRequiredForTenants: c.PlacementAggregateRequiredForTenants,
		EnableIsolatedAggregateFiltering:     c.EnableIsolatedAggregateFiltering,
		EmptyPlacementFallback:               c.EmptyPlacementFallback,
	}
	// Every multiplier is passed, 0 too: an aggregate's
	// <name>_weight_multiplier metadata may switch a weigher on for its hosts.
	sc.Weights = map[string]float64{
		"ram": c.Weights.RAM, "cpu": c.Weights.CPU, "disk": c.Weights.Disk, "io_ops": c.Weights.IOOps,
		"build_failure": c.Weights.BuildFailure, "soft_affinity": c.Weights.SoftAffinity,
		"soft_anti_affinity": c.Weights.SoftAntiAffinity, "num_instances": c.Weights.NumInstances,
	}
	return sc
}

// StartConductor runs a cell conductor and records its cell.
func (s *Stack) StartConductor(ctx context.Context, c *configs.Conductor) error {
	if err := conductor.EnsureCell(ctx, s.cli, s.keys, c.Cell, uuid.NewString()); err != nil {
		return err
	}
	s.placementStore() // a retry's claim reads what it needs
	cc := conductor.NewCellConductor(conductor.CellConductorConfig{
		Client: s.cli, Keys: s.keys, Cell: c.Cell, Placement: s.placement, Holder: holderID(conductor.CellConductorRole + "-" + c.Cell),
		Workers: c.Workers, LeaseTTL: c.LeaseTTL, Log: s.log.Named("conductor"), Metrics: s.metrics,
		RankGrace: c.Ranking.Grace, HolderIdleAfter: c.Ranking.IdleAfter, StealAfter: c.Ranking.StealAfter,
	})
	s.run("conductor "+c.Cell, cc.Run)
	s.readyWhen("conductor "+c.Cell+" queue", "the cell conductor is not watching its retries yet", cc.WaitSynced)
	return cc.WaitSynced(ctx)
}

// StartAgent runs one host's agent with the given driver.
func (s *Stack) StartAgent(ctx context.Context, a *configs.Agent, dataDir string) error {
	s.placementStore() // agents only write
	drv, err := agent.NewDriver(a.Driver, a.Host, agent.DriverConfig{Fake: agent.FakeConfig{
		BuildTime: a.Fake.BuildTime, FailureRate: a.Fake.FailureRate, Fail: a.Fake.Fail,
		FailReschedulable: a.Fake.FailReschedulable, LiveMigrationTime: a.Fake.LiveMigrationTime,
		FailLiveCheck: a.Fake.FailLiveCheck, FailLiveStart: a.Fake.FailLiveStart, FailLiveOut: a.Fake.FailLiveOut,
	}, Process: agent.ProcessConfig{
		Command: a.Process.Command, StateDir: a.Process.StateDir, StopGrace: a.Process.StopGrace,
	}})
	if err != nil {
		return fmt.Errorf("agent %s: %w", a.Host, err)
	}
	inv := a.Inventory
	ag, err := agent.New(agent.Config{
		Host: a.Host, Cell: a.Cell, ReportInterval: a.ReportInterval, ServiceDownTime: a.ServiceDownTime,
		MaxConcurrentBuilds: a.MaxConcurrentBuilds, TrackInstanceChanges: a.TrackInstanceChanges,
		InstanceSyncInterval: a.InstanceSyncInterval, ProviderSyncInterval: a.ProviderSyncInterval, DataDir: dataDir,
		ProviderRefresh: providerRefresh(a.ProviderRefresh),
		Metrics:         s.metrics,
		Inventory: agent.Inventory{VCPUs: inv.VCPUs, MemoryMB: inv.MemoryMB, DiskGB: inv.DiskGB,
			ReservedHostCPUs: inv.ReservedHostCPUs, ReservedHostMemoryMB: inv.ReservedHostMemoryMB,
			ReservedHostDiskGB: inv.ReservedHostDiskGB, CPUAllocationRatio: inv.CPUAllocationRatio,
			RAMAllocationRatio: inv.RAMAllocationRatio, DiskAllocationRatio: inv.DiskAllocationRatio},
	}, s.cli, s.keys, s.placement, drv, s.log.Named("agent").With("host", a.Host))
	if err != nil {
		return err
	}
	s.run("agent "+a.Host, ag.Run)
	// The builds watch starts once the host is registered, reconciled and
	// alive, so its first list means the agent is taking work.
	s.readyWhen("agent "+a.Host, "the agent has not registered its host and read its builds yet", ag.WaitSynced)
	return nil
}

// providerRefresh is the agent's ProviderRefresh for the agent block's
// resource_provider_association_refresh, where 0 means never (Nova's).
func providerRefresh(d time.Duration) time.Duration {
	if d == 0 {
		return agent.NeverRefreshProvider
	}
	return d
}

// wait blocks until a signal or a role's failure, then stops everything.
// A second signal during the stop exits at once, for an operator who
// will not wait for running builds.
func (s *Stack) wait(sig <-chan os.Signal) error {
	var err error
	select {
	case got := <-sig:
		s.log.Info("shutting down", "signal", got.String())
	case err = <-s.errs:
		s.log.Error("role failed, shutting down", "error", err)
	}
	stopped := make(chan struct{})
	go func() { s.Stop(); close(stopped) }()
	select {
	case <-stopped:
	case got := <-sig:
		s.log.Warn("second signal: exiting without waiting for the roles to stop", "signal", got.String())
		return fmt.Errorf("interrupted during shutdown by %s", got)
	}
	return err
}

// Stop shuts down in dependency order, once:
//  1. /readyz answers 503, and the API, Placement and scheduler servers
//     stop accepting and finish the requests they have;
//  2. the roles stop: queues stop leasing, hand their in-flight items back
//     and revoke their session, so another conductor takes them at once
//     rather than after the lease TTL; the scheduler resigns leadership
//     and revokes its member key; agents finish the builds they started
//     (casts not started stay in etcd for the restarted agent, or for the
//     leader's down-host duty should it not come back, as a stopped
//     nova-compute leaves its queue) and revoke their liveness lease;
//  3. the status listener stops, then the etcd client or embedded member.
func (s *Stack) Stop() {
	s.stopOnce.Do(s.stopNow)
}

// waitRoles waits up to 30 s for the stack's roles to return after its
// context was cancelled, and logs warning if they do not.
func (s *Stack) waitRoles(warning string) {
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		s.log.Warn(warning)
	}
}

func (s *Stack) stopNow() {
	start := time.Now()
	s.status.Stopping()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var shut sync.WaitGroup
	for _, srv := range s.servers {
		shut.Add(1)
		go func() { defer shut.Done(); _ = srv.Shutdown(ctx) }()
	}
	shut.Wait()
	s.cancel()
	s.waitRoles("roles did not stop within 30s")
	if s.statusSrv != nil {
		_ = s.statusSrv.Shutdown(ctx)
	}
	if s.ownCli {
		s.cli.Close()
	}
	if s.etcd != nil {
		s.etcd.Close()
	}
	s.log.Info("stopped", "took", time.Since(start).Round(time.Millisecond))
}

// memberID is holderID made one etcd key segment (/members/<role>/<id>):
// "role@host:pid:rand".
func memberID(role string) string {
	return strings.ReplaceAll(holderID(role), "/", ":")
}

func holderID(role string) string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s@%s/%d/%s", role, host, os.Getpid(), uuid.NewString()[:8])
}
