// Package bench is Berth's load tool (`berth bench`): a fleet of simulated
// hosts that run the agent's own code, a recorder that timestamps the
// boot pipeline from etcd's events, the scenarios (populate, boot, churn,
// failover, coldstart), an etcd compare-and-swap baseline, and the
// report (a table and JSON lines).
//
// The tool's flags are a Config (config.go, with Validate); Main
// (tool.go) resolves it against -config and starts the Target the
// scenarios run against (target.go): Berth's own stacks (internal/stack)
// in this process, the schedulers as child processes (procs.go, each
// optionally in a CPU cgroup of its own: cgroup.go), or an existing
// Berth. The simulated hosts may run in child processes too
// (fleet_procs.go, -fleet-procs; -fleet-cpuprofile profiles them), so
// that the tool's process is Berth's. Their periodic work (liveness
// beats, provider and instance syncs) is a schedule per task worked by a
// pool of workers (periodic.go, worker_pool.go), not a ticker per host.
// With a profile of the measured phase the report takes the tool's own
// roles out of the process CPU (profile_roles.go). cmd/berth only parses
// the flags and prints the Result.
package bench

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/agent"
	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/informer"
	"github.com/berth-project/berth/internal/rolelabel"
)

// Liveness models the fleet's liveness leases.
const (
	// LivenessPerHost gives every host a lease of its own, renewed by
	// the agent's beat every report_interval (all hosts' beats on the
	// fleet's one keepalive stream, agent.LeaseRenewer): what a real
	// fleet puts on etcd, and a host can go down alone.
	LivenessPerHost = "per-host"
	// LivenessShared binds every host's alive key to one lease kept alive
	// by one keepalive stream: the cheap model of earlier runs, kept for
	// comparison.
	LivenessShared = "shared"
)

// FleetConfig shapes the simulated hosts.
type FleetConfig struct {
	Hosts int
	Cells int
	// HostPrefix names hosts <prefix><n> (n from 1, zero-padded).
	HostPrefix string
	// FirstHost is the number of the fleet's first host (0: 1): a fleet
	// process runs hosts FirstHost..FirstHost+Hosts-1 of the whole
	// fleet, each in the cell it has in the whole fleet.
	FirstHost int
	// BuildTime and FailureRate go to each host's fake driver; failures
	// are reschedulable, as `berth dev`'s failing hosts.
	BuildTime   time.Duration
	FailureRate float64
	// Inventory of every host; zero sizes mean berth dev's 16 vCPU,
	// 64 GiB, 1,000 GB.
	Inventory agent.Inventory
	// Liveness is LivenessPerHost ("" too) or LivenessShared.
	Liveness string
	// The agents' periods (zero: the agent's defaults, which are the
	// config's): liveness renewal and lease TTL, provider sync, instance
	// sync.
	ReportInterval       time.Duration
	ServiceDownTime      time.Duration
	ProviderSyncInterval time.Duration
	InstanceSyncInterval time.Duration
	// SkipSyncs leaves out the periodic provider and instance syncs (the
	// registration's first ones still run).
	SkipSyncs bool
	// LeaveLeases makes Close leave the hosts' leases to expire instead
	// of revoking them: for a Berth whose etcd the tool removes when it
	// exits, where revoking only sends its scheduler leader after
	// thousands of hosts going down while it is being stopped.
	LeaveLeases bool
	// RegisterWorkers is how many hosts register at once.
	RegisterWorkers int
	// BackgroundWorkers is how many goroutines do each of the hosts'
	// periodic syncs (0: one per 20 hosts, at least 64, at most 1,024):
	// provider syncs and instance syncs each have a pool of their own.
	// The liveness beats have none: a beat is sent by the schedule's
	// dispatcher and its answer calls back (Fleet.beat), so a beat never
	// waits for a sync, as an agent's has its own goroutine. A real
	// fleet has as many calls in flight as etcd's latency makes it (100
	// syncs/s at 100 ms each are 10 at once); too few workers would queue
	// the calls in the tool instead and make them late.
	BackgroundWorkers int
}

// CellName is the name of cell c (1-based), as `berth dev` names them.
func CellName(c int) string { return fmt.Sprintf("cell%d", c) }

// Fleet is H simulated hosts. Each host is an agent.Agent that is never
// Run: the fleet calls its Register, GrantAlive, SyncInstances, Work,
// RenewAlive and SyncProvider, so every key, value, transaction and lease
// call is the agent's own. What the fleet shares instead of running per
// host: one etcd watch on its hosts' keys that hands each cast to its
// host, and one schedule of the hosts' periodic work (liveness renewals,
// provider syncs, instance syncs) spread evenly over each period and
// worked by a few goroutines, not a ticker per host. With
// LivenessShared, one lease bound to every alive key and kept alive by
// one keepalive stream stands in for the per-host leases. All hosts use
// the same etcd client.
type Fleet struct {
	cli    *clientv3.Client
	keys   etcdschema.Keys
	place  agent.Placement
	cfg    FleetConfig
	log    hclog.Logger
	agents map[string]*agent.Agent
	hosts  []*fleetHost // host i at i-1
	every  agent.Intervals
	lease  clientv3.LeaseID // LivenessShared
	// renewer carries every host's liveness beats (LivenessPerHost), as
	// the hosts share one client; started by Register, closed by Close.
	renewer *agent.LeaseRenewer

	mu sync.Mutex
	// casts are the casts being worked, by cast key (host and instance),
	// like each agent's pending/inFlight: one at a time per instance on
	// one host. Not by instance alone: a reschedule's cast on another host
	// could arrive while the failed host was still finishing, wait behind
	// it, and then be worked by the failed host's agent, which ended it
	// unbuilt as stale (the instance names the other host) and lost the
	// server (a smoke run under load: 199 of 200 finished).
	casts map[string]*castQueue
	// disabled is each host's service disabled flag as last seen
	// (under mu), so only a flip syncs its provider (serviceChanged).
	disabled map[string]bool
	wg       sync.WaitGroup
	// workers run the casts (offer), counted in wg, each at once (no
	// bound), under the submitter's role; Run closes them.
	workers *workerPool[func()]

	worked atomic.Int64

	// The periodic work's schedule, started by Register, stopped by Close.
	bgCancel   context.CancelFunc
	workCancel context.CancelFunc
	bgWG       sync.WaitGroup
	tasks      []*periodicTask
	regrants   atomic.Int64
	// syncWrites are instance syncs that put the host's HostSync (an
	// unchanged list is rewritten only every 10th interval).
	syncWrites atomic.Int64
	maxLate    atomic.Int64 // ns, since the last ResetLate
	trace      livenessTrace
}

// fleetHost is one host's agent and liveness lease.
type fleetHost struct {
	ag    *agent.Agent
	lease atomic.Int64 // clientv3.LeaseID; 0 until registered
	busy  [numTasks]atomic.Bool
	// lastAnswer is when etcd last answered for the lease (its grant
	// or a renewal), unix ns; renewed says a renewal was answered since
	// the grant (livenessTrace).
	lastAnswer atomic.Int64
	renewed    atomic.Bool
}

type castQueue struct {
	next *informer.Event // newest cast waiting behind the running one
}

// withDefaults is cfg with its zero fields given their defaults, for
// a fleet of cfg.Hosts hosts.
func (cfg FleetConfig) withDefaults() (FleetConfig, error) {
	if cfg.Hosts < 1 || cfg.Cells < 1 {
		return cfg, fmt.Errorf("fleet: need at least 1 host and 1 cell, have %d and %d", cfg.Hosts, cfg.Cells)
	}
	switch cfg.Liveness {
	case "":
		cfg.Liveness = LivenessPerHost
	case LivenessPerHost, LivenessShared:
	default:
		return cfg, fmt.Errorf("fleet: liveness %q: want %s or %s", cfg.Liveness, LivenessPerHost, LivenessShared)
	}
	if cfg.HostPrefix == "" {
		cfg.HostPrefix = "bench-"
	}
	if cfg.Inventory.VCPUs == 0 {
		cfg.Inventory.VCPUs = 16
	}
	if cfg.Inventory.MemoryMB == 0 {
		cfg.Inventory.MemoryMB = 65536
	}
	if cfg.Inventory.DiskGB == 0 {
		cfg.Inventory.DiskGB = 1000
	}
	if cfg.FirstHost <= 0 {
		cfg.FirstHost = 1
	}
	if cfg.RegisterWorkers <= 0 {
		cfg.RegisterWorkers = 32
	}
	if cfg.BackgroundWorkers <= 0 {
		cfg.BackgroundWorkers = min(max(cfg.Hosts/20, 64), 1024)
	}
	return cfg, nil
}

// NewFleet prepares the hosts; Register writes them.
func NewFleet(cli *clientv3.Client, keys etcdschema.Keys, place agent.Placement, cfg FleetConfig, log hclog.Logger) (*Fleet, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	f := &Fleet{cli: cli, keys: keys, place: place, cfg: cfg, log: log,
		agents: make(map[string]*agent.Agent, cfg.Hosts), hosts: make([]*fleetHost, 0, cfg.Hosts),
		casts: map[string]*castQueue{}, disabled: map[string]bool{}}
	f.workers = newWorkerPool(context.Background(), "", 0, func(job func()) { job() }, &f.wg)
	for i := cfg.FirstHost; i < cfg.FirstHost+cfg.Hosts; i++ {
		host := f.HostName(i)
		drv := agent.NewFakeDriver(host, agent.FakeConfig{BuildTime: cfg.BuildTime, FailureRate: cfg.FailureRate,
			FailReschedulable: true})
		ag, err := agent.New(agent.Config{Host: host, Cell: CellName((i-1)%cfg.Cells + 1),
			ReportInterval: cfg.ReportInterval, ServiceDownTime: cfg.ServiceDownTime,
			ProviderSyncInterval: cfg.ProviderSyncInterval, InstanceSyncInterval: cfg.InstanceSyncInterval,
			TrackInstanceChanges: true, Inventory: cfg.Inventory, Fed: true},
			cli, keys, place, drv, log)
		if err != nil {
			return nil, err
		}
		f.agents[host] = ag
		f.hosts = append(f.hosts, &fleetHost{ag: ag})
	}
	f.every = f.hosts[0].ag.Intervals() // every host has the same
	f.tasks = f.periodicTasks()
	return f, nil
}

// HostName is host i's name (1-based, numbered in the whole fleet).
func (f *Fleet) HostName(i int) string { return hostName(f.cfg.HostPrefix, i) }

func hostName(prefix string, i int) string { return fmt.Sprintf("%s%06d", prefix, i) }

// Hosts is the number of hosts.
func (f *Fleet) Hosts() int { return len(f.agents) }

// Liveness is the fleet's lease model (LivenessPerHost or LivenessShared).
func (f *Fleet) Liveness() string { return f.cfg.Liveness }

// Intervals are the hosts' periods (the agent's, after its defaults).
func (f *Fleet) Intervals() agent.Intervals { return f.every }

// Lease is host i's liveness lease (1-based; 0 before it registered).
func (f *Fleet) Lease(i int) clientv3.LeaseID { return clientv3.LeaseID(f.hosts[i-1].lease.Load()) }

// Register writes every host as its agent does at start (service record,
// provider and inventory, host mapping), then its liveness lease and
// alive key and its first instance sync, and starts the hosts' periodic
// work (kept until Close). progress is called with the count done so
// far, from one goroutine at a time.
func (f *Fleet) Register(ctx context.Context, progress func(done int)) error {
	// The periodic work starts first: registering 100,000 hosts takes
	// longer than the TTL, and a host's first renewal is due within one
	// report_interval of its lease grant as in a real agent (hosts not
	// registered yet are passed over). It ends with Close, not ctx: the
	// hosts stay up until the fleet revokes their leases.
	bgCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	f.bgCancel = cancel
	// Runs under way when Close stops the schedule finish under workCtx
	// (cancelled only if they outlast a grace), so no call is cut off
	// in the middle.
	// Its context carries the background role, so that the etcd requests
	// of those runs are counted as the fleet's (-etcd-tally), not as the
	// caller's (the tool's clients).
	var workCtx context.Context
	rolelabel.Do(ctx, "agent fleet background", func(ctx context.Context) {
		workCtx, f.workCancel = context.WithCancel(context.WithoutCancel(ctx))
	})
	if f.cfg.Liveness == LivenessShared {
		lease, err := f.cli.Grant(ctx, int64(f.every.ServiceDownTime/time.Second))
		if err != nil {
			return fmt.Errorf("fleet: grant liveness lease: %w", err)
		}
		f.lease = lease.ID
		ka, err := f.cli.KeepAlive(bgCtx, f.lease)
		if err != nil {
			return fmt.Errorf("fleet: keep lease alive: %w", err)
		}
		f.bgWG.Add(1)
		go func() {
			defer f.bgWG.Done()
			for range ka { // drain, or the client logs a full channel
			}
		}()
	}
	if f.cfg.Liveness == LivenessPerHost {
		// A beat waits for its answer as long as in the agent. The
		// renewer's stream goroutines are the fleet's background work in
		// a profile, not the caller's (the tool's clients).
		var r *agent.LeaseRenewer
		var err error
		rolelabel.Do(ctx, "agent fleet background", func(context.Context) {
			r, err = agent.NewLeaseRenewerStreams(f.cli, f.every.RenewTimeout(), renewStreams(len(f.hosts)), f.log)
		})
		if err != nil {
			return fmt.Errorf("fleet: %w", err)
		}
		f.renewer = r
	}
	f.startPeriodic(bgCtx, workCtx)
	work := make(chan *fleetHost)
	errc := make(chan error, f.cfg.RegisterWorkers)
	var done atomic.Int64
	var pmu sync.Mutex
	var wg sync.WaitGroup
	for w := 0; w < f.cfg.RegisterWorkers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for h := range work {
				if err := f.registerOne(ctx, h); err != nil {
					errc <- err
					return
				}
				n := done.Add(1)
				if progress != nil && pmu.TryLock() {
					progress(int(n))
					pmu.Unlock()
				}
			}
		}()
	}
	ferr := feed(ctx, len(f.hosts), func(i int) *fleetHost { return f.hosts[i-1] }, work, errc, &wg)
	if progress != nil {
		progress(int(done.Load()))
	}
	return ferr
}

// hostsPerRenewStream is how many hosts' leases share one keepalive
// stream in a fleet: real agents each have a stream of their own, and
// etcd answers a stream's beats one after another, so one slow answer
// (a renewal of a lease being revoked) holds up every host behind it on
// the stream (agent.renewLane). A stream per 1,000 hosts keeps that to a
// thousand hosts at most, up to 128 streams (100,000 hosts: 100).
const (
	hostsPerRenewStream = 1000
	maxRenewStreams     = 128
)

func renewStreams(hosts int) int {
	return min(max(1, (hosts+hostsPerRenewStream-1)/hostsPerRenewStream), maxRenewStreams)
}

// registerOne is an agent's start: registration, liveness (a lease of its
// own, or the fleet's), the first instance sync.
func (f *Fleet) registerOne(ctx context.Context, h *fleetHost) error {
	if err := h.ag.Register(ctx); err != nil {
		return err
	}
	lease := f.lease
	if f.cfg.Liveness == LivenessShared {
		if err := h.ag.PutAlive(ctx, lease); err != nil {
			return err
		}
	} else {
		var err error
		asked := time.Now()
		if lease, err = h.ag.GrantAlive(ctx); err != nil {
			return err
		}
		now := time.Now()
		f.trace.grant.add(now.Sub(asked))
		h.lastAnswer.Store(now.UnixNano())
	}
	h.lease.Store(int64(lease))
	return f.syncInstances(ctx, h)
}

// syncInstances runs h's instance sync, counting the ones that wrote.
func (f *Fleet) syncInstances(ctx context.Context, h *fleetHost) error {
	wrote, err := h.ag.SyncInstances(ctx)
	if wrote {
		f.syncWrites.Add(1)
	}
	return err
}

// Run works every cast to its hosts
// until ctx ends, then waits for the casts being worked, and feeds each
// host's agent the changes of its service record, instance info and
// host mapping that a real agent's own watches follow (agent.Follow; the
// mappings on a second watch, as they sort apart). Watching starts
// at fromRev (the revision before the fleet registered), so no cast and
// no change is missed. A broken watch (compaction) is an error: the run is invalid.
// (That is why this is a raw watch and not internal/informer, which would
// re-list and hide the gap the run must fail on.)
func (f *Fleet) Run(ctx context.Context, fromRev int64) error {
	defer f.wg.Wait()
	defer f.workers.close()
	from, end := f.watchedRange()
	// Deletes too: an instance info's delete is a change the agents'
	// follow must see (a cast's delete is dropped below).
	wch := f.cli.Watch(clientv3.WithRequireLeader(ctx), from, clientv3.WithRange(end),
		clientv3.WithRev(fromRev))
	// The hosts' mappings, which each real agent follows on a watcher of
	// its own (agent.hostFollow): what existed before fromRev, then every
	// change from it on.
	mfrom, mend := f.mappingRange()
	if err := f.followMappingsBefore(ctx, mfrom, mend, fromRev); err != nil {
		return err
	}
	mch := f.cli.Watch(clientv3.WithRequireLeader(ctx), mfrom, clientv3.WithRange(mend),
		clientv3.WithRev(fromRev))
	for _, ag := range f.agents {
		ag.FollowWatched()
	}
	for {
		select {
		case resp, ok := <-mch:
			if !ok {
				return f.watchClosed(ctx, mfrom, mend)
			}
			if err := resp.Err(); err != nil {
				return fmt.Errorf("fleet: watch [%s, %s): %w", mfrom, mend, err)
			}
			for _, ev := range resp.Events {
				key := string(ev.Kv.Key)
				if ag := f.agents[strings.TrimPrefix(key, f.keys.HostMappings())]; ag != nil {
					ag.Follow(key, ev.Kv.Value, ev.Type == clientv3.EventTypeDelete)
				}
			}
		case resp, ok := <-wch:
			if !ok {
				return f.watchClosed(ctx, from, end)
			}
			if err := resp.Err(); err != nil {
				return fmt.Errorf("fleet: watch [%s, %s): %w", from, end, err)
			}
			f.hostEvents(ctx, resp.Events)
		}
	}
}

// watchClosed is Run's answer when a watch's channel closes: nil once
// ctx has ended, otherwise an error.
func (f *Fleet) watchClosed(ctx context.Context, from, end string) error {
	if ctx.Err() != nil {
		return nil
	}
	return fmt.Errorf("fleet: watch [%s, %s) closed", from, end)
}

// hostEvents hands each change of the fleet's hosts' keys to its agent:
// casts to work, and the service record and instance info to its follow.
func (f *Fleet) hostEvents(ctx context.Context, evs []*clientv3.Event) {
	for _, ev := range evs {
		key := string(ev.Kv.Key)
		host, rest, err := f.keys.ParseHostKey(key)
		if err != nil {
			continue
		}
		followed := rest == "service" || strings.HasPrefix(rest, "instances/")
		if !followed && !strings.HasPrefix(rest, "builds/") {
			continue
		}
		ag := f.agents[host]
		if ag == nil {
			continue // not one of ours (an existing Berth's real hosts)
		}
		deleted := ev.Type == clientv3.EventTypeDelete
		if followed {
			// What the agent's own watch of its service record and
			// instance info would deliver (agent.Follow).
			ag.Follow(key, ev.Kv.Value, deleted)
		}
		switch {
		case rest == "service" && !deleted:
			f.serviceChanged(ctx, host, ag, key, ev.Kv.Value)
		case !followed && !deleted:
			f.offer(ctx, ag, informer.Event{Key: key, Value: ev.Kv.Value, Revision: ev.Kv.ModRevision})
		}
	}
}

// followMappingsBefore hands the agents the mappings in [from, end) as
// they were just before fromRev (the hosts of an earlier run, already
// mapped, whose registration writes no mapping), keys only, a page at a
// time. In a fresh etcd there are none.
func (f *Fleet) followMappingsBefore(ctx context.Context, from, end string, fromRev int64) error {
	rev := fromRev - 1
	if rev < 1 {
		return nil // nothing was written before
	}
	const page = 10_000
	for key := from; ; {
		resp, err := f.cli.Get(ctx, key, clientv3.WithRange(end), clientv3.WithRev(rev), clientv3.WithKeysOnly(),
			clientv3.WithLimit(page))
		if err != nil {
			return fmt.Errorf("fleet: list host mappings [%s, %s) at revision %d: %w", from, end, rev, err)
		}
		for _, kv := range resp.Kvs {
			k := string(kv.Key)
			if ag := f.agents[strings.TrimPrefix(k, f.keys.HostMappings())]; ag != nil {
				ag.Follow(k, nil, false)
			}
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return nil
		}
		key = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

// mappingRange is the key range of the fleet's hosts' mappings, as
// watchedRange is of their keys.
func (f *Fleet) mappingRange() (from, end string) {
	first := hostName(f.cfg.HostPrefix, f.cfg.FirstHost)
	last := hostName(f.cfg.HostPrefix, f.cfg.FirstHost+f.cfg.Hosts-1)
	if len(first) != len(last) {
		return f.keys.HostMappings(), clientv3.GetPrefixRangeEnd(f.keys.HostMappings())
	}
	return f.keys.HostMapping(first), f.keys.HostMapping(last) + "\x00"
}

// watchedRange is the key range Run watches: the keys of the fleet's own
// hosts, from its first host's prefix to the end of its last's, as a
// real agent watches its own host's keys and not every host's. With
// -fleet-procs each child had watched the whole hosts prefix, so every
// cast, instance info and background write of the other children's
// hosts was sent to it by etcd and decoded there only to be dropped.
// The range holds exactly the fleet's hosts when their names sort as
// their numbers (all the same width, hostName); otherwise (numbers past
// the padding) it is the whole hosts prefix. A key in the range of a
// host that is not the fleet's is dropped as before.
func (f *Fleet) watchedRange() (from, end string) {
	first := hostName(f.cfg.HostPrefix, f.cfg.FirstHost)
	last := hostName(f.cfg.HostPrefix, f.cfg.FirstHost+f.cfg.Hosts-1)
	if len(first) != len(last) {
		return f.keys.HostsPrefix(), clientv3.GetPrefixRangeEnd(f.keys.HostsPrefix())
	}
	return f.keys.HostPrefix(first), clientv3.GetPrefixRangeEnd(f.keys.HostPrefix(last))
}

// serviceChanged syncs host's provider when its service's disabled flag
// flips, as a real agent's service watch does (agent/service_watch.go):
// that sets or clears COMPUTE_STATUS_DISABLED, which a disable (and a
// drain) waits for.
func (f *Fleet) serviceChanged(ctx context.Context, host string, ag *agent.Agent, key string, val []byte) {
	var svc etcdschema.Service
	if err := etcdschema.Decode(key, val, &svc); err != nil {
		return
	}
	f.mu.Lock()
	was, known := f.disabled[host]
	f.disabled[host] = svc.Disabled
	f.mu.Unlock()
	if (known && was == svc.Disabled) || (!known && !svc.Disabled) {
		return // the agent's own writes, or its registration
	}
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		if err := ag.SyncProvider(ctx); err != nil && ctx.Err() == nil {
			f.log.Warn("provider sync after a service change failed", "host", host, "error", err)
		}
	}()
}

// offer works a cast now with its host's agent, or queues it behind the
// one running under the same key (a delete cast overwriting a build cast
// of the instance on that host), keeping only the newest, as the agent's
// dispatcher does.
func (f *Fleet) offer(ctx context.Context, ag *agent.Agent, ev informer.Event) {
	id := ev.Key
	f.mu.Lock()
	if q, ok := f.casts[id]; ok {
		if q.next == nil || q.next.Revision < ev.Revision {
			q.next = &ev
		}
		f.mu.Unlock()
		return
	}
	f.casts[id] = &castQueue{}
	f.mu.Unlock()
	f.workers.submit(ctx, func() {
		for {
			ag.Work(ctx, ev)
			f.worked.Add(1)
			f.mu.Lock()
			q := f.casts[id]
			if q.next == nil {
				delete(f.casts, id)
				f.mu.Unlock()
				return
			}
			ev, q.next = *q.next, nil
			f.mu.Unlock()
		}
	})
}

// Worked is how many casts the fleet has worked.
func (f *Fleet) Worked() int64 { return f.worked.Load() }

// Close stops the hosts' periodic work and revokes their leases: the
// hosts read down at once. etcd has no call that revokes several leases,
// so the per-host leases are revoked by a pool of workers.
func (f *Fleet) Close() {
	if f.bgCancel != nil {
		f.bgCancel()
		done := make(chan struct{})
		go func() { f.bgWG.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			f.workCancel()
			if f.renewer != nil {
				// Beats still waiting for an answer end now
				// (ErrRenewerClosed), not at their timeout.
				f.renewer.Close()
			}
			<-done
		}
		f.workCancel()
	}
	if f.renewer != nil {
		f.renewer.Close() // no beat runs any more
	}
	if f.cfg.LeaveLeases {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second+time.Duration(len(f.hosts))*2*time.Millisecond)
	defer cancel()
	if f.cfg.Liveness == LivenessShared {
		if f.lease != 0 {
			_, _ = f.cli.Revoke(ctx, f.lease)
		}
		return
	}
	next := make(chan clientv3.LeaseID)
	var wg sync.WaitGroup
	for w := 0; w < 64; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range next {
				if _, err := f.cli.Revoke(ctx, id); err != nil && ctx.Err() == nil {
					f.log.Debug("revoke liveness lease", "lease", int64(id), "error", err)
				}
			}
		}()
	}
	for _, h := range f.hosts {
		if id := clientv3.LeaseID(h.lease.Swap(0)); id != 0 {
			select {
			case next <- id:
			case <-ctx.Done():
			}
		}
	}
	close(next)
	wg.Wait()
}

// feed hands item(1..n) to a pool of workers until they are all handed
// out, a worker reports an error, or ctx ends; then it closes work, waits
// for the workers (wg) and returns the first error.
func feed[T any](ctx context.Context, n int, item func(i int) T, work chan<- T, errc <-chan error, wg *sync.WaitGroup) error {
	var ferr error
loop:
	for i := 1; i <= n; i++ {
		select {
		case work <- item(i):
		case ferr = <-errc:
			break loop
		case <-ctx.Done():
			ferr = ctx.Err()
			break loop
		}
	}
	close(work)
	wg.Wait()
	if ferr == nil {
		select {
		case ferr = <-errc:
		default:
		}
	}
	return ferr
}
