// Package bench is Berth's load tool (`berth bench`): a fleet of simulated
// hosts that run the agent's own code, a recorder that timestamps the
// boot pipeline from etcd's events, the scenarios (populate, boot, churn,
// failover, coldstart), an etcd compare-and-swap baseline, and the
// report (a table and JSON lines).
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
)

// FleetConfig shapes the simulated hosts.
type FleetConfig struct {
	Hosts int
	Cells int
	// HostPrefix names hosts <prefix><n> (n from 1, zero-padded).
	HostPrefix string
	// BuildTime and FailureRate go to each host's fake driver; failures
	// are reschedulable, as `berth dev`'s failing hosts.
	BuildTime   time.Duration
	FailureRate float64
	// Inventory of every host; zero sizes mean berth dev's 16 vCPU,
	// 64 GiB, 1,000 GB.
	Inventory agent.Inventory
	// ServiceDownTime is the TTL of the fleet's one liveness lease.
	ServiceDownTime time.Duration
	// RegisterWorkers is how many hosts register at once.
	RegisterWorkers int
}

// CellName is the name of cell c (1-based), as `berth dev` names them.
func CellName(c int) string { return fmt.Sprintf("cell%d", c) }

// Fleet is H simulated hosts. Each host is an agent.Agent that is never
// Run: the fleet calls its Register, PutAlive, SyncInstances and Work, so
// every key, value and transaction is the agent's own. What the fleet
// shares instead of running per host: one etcd watch on the hosts prefix
// that hands each cast to its host, and one liveness lease (TTL
// ServiceDownTime) that every host's alive key is bound to, kept alive by
// one keepalive stream. All hosts use the same etcd client.
type Fleet struct {
	cli    *clientv3.Client
	keys   etcdschema.Keys
	place  agent.Placement
	cfg    FleetConfig
	log    hclog.Logger
	agents map[string]*agent.Agent
	lease  clientv3.LeaseID

	mu sync.Mutex
	// casts are the casts being worked, by cast key (host and instance),
	// like each agent's pending/inFlight: one at a time per instance on
	// one host. Not by instance alone: a reschedule's cast on another host
	// could arrive while the failed host was still finishing, wait behind
	// it, and then be worked by the failed host's agent, which ended it
	// unbuilt as stale (the instance names the other host) and lost the
	// server (a smoke run under load: 199 of 200 finished).
	casts map[string]*castQueue
	wg    sync.WaitGroup

	worked atomic.Int64
}

type castQueue struct {
	next *informer.Event // newest cast waiting behind the running one
}

// NewFleet prepares the hosts; Register writes them.
func NewFleet(cli *clientv3.Client, keys etcdschema.Keys, place agent.Placement, cfg FleetConfig, log hclog.Logger) (*Fleet, error) {
	if cfg.Hosts < 1 || cfg.Cells < 1 {
		return nil, fmt.Errorf("fleet: need at least 1 host and 1 cell, have %d and %d", cfg.Hosts, cfg.Cells)
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
	if cfg.ServiceDownTime <= 0 {
		cfg.ServiceDownTime = 60 * time.Second
	}
	if cfg.RegisterWorkers <= 0 {
		cfg.RegisterWorkers = 32
	}
	f := &Fleet{cli: cli, keys: keys, place: place, cfg: cfg, log: log,
		agents: make(map[string]*agent.Agent, cfg.Hosts), casts: map[string]*castQueue{}}
	for i := 1; i <= cfg.Hosts; i++ {
		host := f.HostName(i)
		drv := agent.NewFakeDriver(host, agent.FakeConfig{BuildTime: cfg.BuildTime, FailureRate: cfg.FailureRate,
			FailReschedulable: true})
		ag, err := agent.New(agent.Config{Host: host, Cell: CellName((i-1)%cfg.Cells + 1),
			ServiceDownTime: cfg.ServiceDownTime, TrackInstanceChanges: true, Inventory: cfg.Inventory},
			cli, keys, place, drv, log)
		if err != nil {
			return nil, err
		}
		f.agents[host] = ag
	}
	return f, nil
}

// HostName is host i's name (1-based).
func (f *Fleet) HostName(i int) string { return fmt.Sprintf("%s%06d", f.cfg.HostPrefix, i) }

// Hosts is the number of hosts.
func (f *Fleet) Hosts() int { return len(f.agents) }

// Register writes every host as its agent does at start (service record,
// provider and inventory, host mapping), then its alive key under the
// fleet's lease (kept alive until ctx ends) and its first instance sync. progress is called with the
// count done so far, from one goroutine at a time.
func (f *Fleet) Register(ctx context.Context, progress func(done int)) error {
	lease, err := f.cli.Grant(ctx, int64(f.cfg.ServiceDownTime/time.Second))
	if err != nil {
		return fmt.Errorf("fleet: grant liveness lease: %w", err)
	}
	f.lease = lease.ID
	// Kept alive from now on: registering 100,000 hosts takes longer than
	// the TTL. The keepalive stream ends with ctx.
	ka, err := f.cli.KeepAlive(ctx, f.lease)
	if err != nil {
		return fmt.Errorf("fleet: keep lease alive: %w", err)
	}
	go func() {
		for range ka { // drain, or the client logs a full channel
		}
	}()
	work := make(chan *agent.Agent)
	errc := make(chan error, f.cfg.RegisterWorkers)
	var done atomic.Int64
	var pmu sync.Mutex
	var wg sync.WaitGroup
	for w := 0; w < f.cfg.RegisterWorkers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ag := range work {
				if err := registerOne(ctx, ag, lease.ID); err != nil {
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
	ferr := feed(ctx, len(f.agents), func(i int) *agent.Agent { return f.agents[f.HostName(i)] }, work, errc, &wg)
	if progress != nil {
		progress(int(done.Load()))
	}
	return ferr
}

func registerOne(ctx context.Context, ag *agent.Agent, lease clientv3.LeaseID) error {
	if err := ag.Register(ctx); err != nil {
		return err
	}
	if err := ag.PutAlive(ctx, lease); err != nil {
		return err
	}
	return ag.SyncInstances(ctx)
}

// Run works every cast to its hosts
// until ctx ends, then waits for the casts being worked. Watching starts
// at fromRev (the revision before the fleet registered), so no cast is
// missed. A broken watch (compaction) is an error: the run is invalid.
func (f *Fleet) Run(ctx context.Context, fromRev int64) error {
	defer f.wg.Wait()
	wch := f.cli.Watch(clientv3.WithRequireLeader(ctx), f.keys.HostsPrefix(), clientv3.WithPrefix(),
		clientv3.WithRev(fromRev), clientv3.WithFilterDelete())
	for resp := range wch {
		if err := resp.Err(); err != nil {
			return fmt.Errorf("fleet: watch %s: %w", f.keys.HostsPrefix(), err)
		}
		for _, ev := range resp.Events {
			key := string(ev.Kv.Key)
			host, rest, err := f.keys.ParseHostKey(key)
			if err != nil || !strings.HasPrefix(rest, "builds/") {
				continue
			}
			ag := f.agents[host]
			if ag == nil {
				continue // not one of ours (an existing Berth's real hosts)
			}
			f.offer(ctx, ag, informer.Event{Key: key, Value: ev.Kv.Value, Revision: ev.Kv.ModRevision})
		}
	}
	if ctx.Err() != nil {
		return nil
	}
	return fmt.Errorf("fleet: watch %s closed", f.keys.HostsPrefix())
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
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
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
	}()
}

// Worked is how many casts the fleet has worked.
func (f *Fleet) Worked() int64 { return f.worked.Load() }

// Close revokes the fleet's lease: its hosts read down at once.
func (f *Fleet) Close() {
	if f.lease == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _ = f.cli.Revoke(ctx, f.lease)
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
