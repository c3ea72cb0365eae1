package bench

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/agent"
	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/placement"
	"github.com/berth-project/berth/scheduler"
)

// txnOps is how many puts go in one populate transaction: etcd's default
// --max-txn-ops.
const txnOps = 128

// PopulateDirect writes hosts (each with perHost ACTIVE m1.small
// instances) straight into etcd, in big transactions from several
// writers, with the values agents and claims leave: the provider (with
// its inventory and the instances' usages) and its name, the service
// record, the alive key (bound to lease), the host mapping, and the
// HostSync; per instance its InstanceInfo and its placement consumer. The
// instances' cell records and mappings are not written: a scheduler's
// cold start does not read them. Keys and values come from etcdschema,
// provider uuids from the agent's own derivation.
func PopulateDirect(ctx context.Context, cli *clientv3.Client, keys etcdschema.Keys, hosts, cells, perHost int,
	lease clientv3.LeaseID, progress func(done int)) error {
	now := time.Now().UTC()
	inv := func(total int64, ratio float64) etcdschema.Inventory {
		return etcdschema.Inventory{Total: total, MinUnit: 1, MaxUnit: total, StepSize: 1, AllocationRatio: ratio}
	}
	flavor := etcdschema.Flavor{ID: "2", Name: "m1.small", VCPUs: 1, RAMMB: 2048, DiskGB: 20}
	work := make(chan int, 256)
	errc := make(chan error, 8)
	var done atomic.Int64
	var wg sync.WaitGroup
	writers := 4 * runtime.GOMAXPROCS(0)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ops := make([]clientv3.Op, 0, txnOps+16)
			flush := func() error {
				if len(ops) == 0 {
					return nil
				}
				_, err := cli.Txn(ctx).Then(ops...).Commit()
				ops = ops[:0]
				if err != nil {
					return fmt.Errorf("populate: %w", err)
				}
				return nil
			}
			// add keeps every transaction within etcd's limit.
			add := func(more ...clientv3.Op) error {
				if len(ops)+len(more) > txnOps {
					if err := flush(); err != nil {
						return err
					}
				}
				ops = append(ops, more...)
				return nil
			}
			for i := range work {
				host := fmt.Sprintf("bench-%06d", i)
				cell := CellName((i-1)%cells + 1)
				rp := agent.ProviderUUIDForHost(host)
				p := &etcdschema.Provider{UUID: rp, Name: host, Generation: int64(1 + perHost), RootProviderUUID: rp,
					Inventories: map[string]etcdschema.Inventory{placement.VCPU: inv(16, 4), placement.MemoryMB: inv(65536, 1),
						placement.DiskGB: inv(1000, 1)},
					Traits: []string{}, Aggregates: []string{}, Usages: map[string]int64{},
					CreatedAt: now, UpdatedAt: now}
				if perHost > 0 {
					p.Usages = map[string]int64{placement.VCPU: int64(perHost * flavor.VCPUs),
						placement.MemoryMB: int64(perHost * flavor.RAMMB), placement.DiskGB: int64(perHost * flavor.DiskGB)}
				}
				sync := &etcdschema.HostSync{Host: host, At: now, UUIDs: make([]string, 0, perHost)}
				err := add(
					clientv3.OpPut(keys.Provider(rp), etcdschema.MustEncode(p)),
					clientv3.OpPut(keys.ProviderName(host), etcdschema.MustEncode(&etcdschema.ProviderName{UUID: rp})),
					clientv3.OpPut(keys.Service(host), etcdschema.MustEncode(&etcdschema.Service{Host: host, Cell: cell,
						ProviderUUID: rp, AgentVersion: agent.Version, CreatedAt: now, UpdatedAt: now})),
					clientv3.OpPut(keys.Alive(host), etcdschema.MustEncode(&etcdschema.Alive{Host: host, LeaseID: int64(lease),
						Since: now}), clientv3.WithLease(lease)),
					clientv3.OpPut(keys.HostMapping(host), etcdschema.MustEncode(&etcdschema.HostMapping{Host: host, Cell: cell,
						CreatedAt: now})))
				for j := 0; j < perHost; j++ {
					u := uuid.NewString()
					sync.UUIDs = append(sync.UUIDs, u)
					if err == nil {
						err = add(
							clientv3.OpPut(keys.HostInstance(host, u), etcdschema.MustEncode(&etcdschema.InstanceInfo{UUID: u,
								Host: host, FlavorID: flavor.ID, Flavor: flavor.Name, State: "active", UpdatedAt: now})),
							clientv3.OpPut(keys.Consumer(u), etcdschema.MustEncode(&etcdschema.Consumer{UUID: u, Generation: 1,
								ProjectID: "bench", UserID: "bench",
								Allocations: map[string]etcdschema.ConsumerAllocation{rp: {Resources: map[string]int64{
									placement.VCPU: int64(flavor.VCPUs), placement.MemoryMB: int64(flavor.RAMMB), placement.DiskGB: int64(flavor.DiskGB)}}},
								CreatedAt: now, UpdatedAt: now})))
					}
				}
				if err == nil {
					err = add(clientv3.OpPut(keys.HostSync(host), etcdschema.MustEncode(sync)))
				}
				if err != nil {
					errc <- err
					return
				}
				n := done.Add(1)
				if progress != nil && n%1000 == 0 {
					progress(int(n))
				}
			}
			if err := flush(); err != nil {
				errc <- err
			}
		}()
	}
	return feed(ctx, hosts, func(i int) int { return i }, work, errc, &wg)
}

// coldstart populates etcd directly, then starts what a fresh scheduler
// loads before it can answer (placement index and host manager, at once
// as `berth server` starts them) and reports the time of both and of
// each, the CPU and the heap.
func (r *runner) coldstart(ctx context.Context) error {
	cfg, t := r.cfg, r.t
	lease, err := t.Client.Grant(ctx, 600)
	if err != nil {
		return fmt.Errorf("coldstart: grant lease for alive keys: %w", err)
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_, _ = t.Client.Revoke(rctx, lease.ID)
	}()
	ka, err := t.Client.KeepAlive(ctx, lease.ID)
	if err != nil {
		return fmt.Errorf("coldstart: keep lease alive: %w", err)
	}
	go func() {
		for range ka {
		}
	}()
	var populated atomic.Int64
	stop := r.progress(ctx, func() string { return fmt.Sprintf("populated %d/%d hosts", populated.Load(), cfg.Hosts) })
	start := time.Now()
	err = PopulateDirect(ctx, t.Client, t.Keys, cfg.Hosts, cfg.Cells, cfg.InstancesPerHost, lease.ID,
		func(n int) { populated.Store(int64(n)) })
	stop()
	if err != nil {
		return err
	}
	r.res.PopulateSeconds = time.Since(start).Seconds()
	r.res.HostsPerSec = float64(cfg.Hosts) / r.res.PopulateSeconds
	r.res.Instances = cfg.Hosts * cfg.InstancesPerHost

	// Both loads at once, as `berth server` starts them; each one's own
	// time is from the common start to its end.
	var hmDone atomic.Bool
	stop = r.progress(ctx, func() string {
		if hmDone.Load() {
			return "loading placement index (host manager loaded)"
		}
		return "loading placement index and host manager"
	})
	defer stop()
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	base := heapMB()
	cpu0 := cpuTime()
	start = time.Now()
	ps := placement.New(t.Client, t.Keys, cfg.Log)
	hm := scheduler.NewHostManager(t.Client, t.Keys, cfg.Log)
	type loaded struct {
		sec float64
		err error
	}
	hmLoaded := make(chan loaded, 1)
	go func() {
		go hm.Run(lctx)
		err := hm.WaitSynced(lctx)
		hmDone.Store(true)
		hmLoaded <- loaded{time.Since(start).Seconds(), err}
	}()
	if err := ps.Start(lctx); err != nil {
		return fmt.Errorf("coldstart: placement index: %w", err)
	}
	r.res.PlacementLoadSec = time.Since(start).Seconds()
	l := <-hmLoaded
	if l.err != nil {
		return fmt.Errorf("coldstart: host manager: %w", l.err)
	}
	r.res.HostManagerLoadSec = l.sec
	r.res.ColdStartSec = time.Since(start).Seconds()
	r.res.ColdStartCPUSec = (cpuTime() - cpu0).Seconds()
	r.res.ColdStartHeapMB = heapMB() - base
	st := hm.Stats()
	runtime.KeepAlive(ps)
	if st.Hosts < cfg.Hosts || st.Instances < cfg.Hosts*cfg.InstancesPerHost {
		return fmt.Errorf("coldstart: host manager loaded %d hosts and %d instances, want at least %d and %d",
			st.Hosts, st.Instances, cfg.Hosts, cfg.Hosts*cfg.InstancesPerHost)
	}
	return nil
}
