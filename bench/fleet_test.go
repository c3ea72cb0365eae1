package bench

import (
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/agent"
	"github.com/berth-project/berth/api"
	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/internal/testwait"
	"github.com/berth-project/berth/placement"
)

// TestFleetWorksEachCastWithItsOwnHost: an instance's cast moves to
// another host (taken back from the first and cast anew, as a reschedule
// does) while the first host is still building it. The new cast must be
// built by the new host, at once. The fleet once queued casts by
// instance alone: the new cast waited behind the old one and was then
// worked by the first host's agent, which ended it unbuilt as stale and
// left the server in BUILD forever.
func TestFleetWorksEachCastWithItsOwnHost(t *testing.T) {
	_, cli := etcdtest.NetClient(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	keys := etcdschema.New(etcdschema.DefaultPrefix)
	log := hclog.NewNullLogger()
	f, err := NewFleet(cli, keys, placement.New(cli, keys, log),
		FleetConfig{Hosts: 2, Cells: 1, BuildTime: 2 * time.Second}, log)
	if err != nil {
		t.Fatal(err)
	}
	hostA, hostB, cell, uuid := f.HostName(1), f.HostName(2), CellName(1), "6f1c2a44-0000-4000-8000-000000000001"
	resp, err := cli.Get(ctx, "/")
	if err != nil {
		t.Fatal(err)
	}
	runErr := make(chan error, 1)
	go func() { runErr <- f.Run(ctx, resp.Header.Revision+1) }()

	now := time.Now().UTC()
	inst := &etcdschema.Instance{UUID: uuid, Name: "s", Status: etcdschema.StatusBuild, TaskState: etcdschema.TaskSpawning,
		Host: hostA, Node: hostA, Cell: cell, Flavor: etcdschema.Flavor{ID: "1", Name: "m1.tiny", VCPUs: 1, RAMMB: 512},
		Attempts: 1, CreatedAt: now, UpdatedAt: now}
	cast := &etcdschema.Build{Op: etcdschema.OpBuild, InstanceUUID: uuid, Name: "s", Cell: cell, Flavor: inst.Flavor,
		Attempt: 1, CastAt: now}
	instKey, castA, castB := keys.CellInstance(cell, uuid), keys.Build(hostA, uuid), keys.Build(hostB, uuid)
	if _, err := cli.Txn(ctx).Then(clientv3.OpPut(instKey, etcdschema.MustEncode(inst)),
		clientv3.OpPut(castA, etcdschema.MustEncode(cast))).Commit(); err != nil {
		t.Fatal(err)
	}
	// Wait until host A works its cast (its build takes 2 s).
	testwait.Poll(t, 20*time.Second, "host A to start on its cast", func() (bool, string) {
		f.mu.Lock()
		n := len(f.casts)
		f.mu.Unlock()
		return n == 1, fmt.Sprintf("%d casts being worked", n)
	})
	// The cast moves to host B in one transaction while A builds.
	inst.Host, inst.Node, inst.Attempts = hostB, hostB, 2
	cast.Attempt = 2
	if _, err := cli.Txn(ctx).Then(clientv3.OpPut(instKey, etcdschema.MustEncode(inst)),
		clientv3.OpDelete(castA), clientv3.OpPut(castB, etcdschema.MustEncode(cast))).Commit(); err != nil {
		t.Fatal(err)
	}
	testwait.Poll(t, 30*time.Second, "the instance ACTIVE on "+hostB, func() (bool, string) {
		got, err := cli.Txn(ctx).Then(clientv3.OpGet(instKey), clientv3.OpGet(castB, clientv3.WithCountOnly())).Commit()
		if err != nil {
			t.Fatal(err)
		}
		var cur etcdschema.Instance
		if err := etcdschema.Decode(instKey, got.Responses[0].GetResponseRange().Kvs[0].Value, &cur); err != nil {
			t.Fatal(err)
		}
		castLeft := got.Responses[1].GetResponseRange().Count
		if cur.Status == etcdschema.StatusActive {
			if cur.Host != hostB || castLeft != 0 {
				t.Fatalf("instance ACTIVE on %q with %d cast left on %s; want ACTIVE on %s, cast ended", cur.Host, castLeft, hostB, hostB)
			}
			return true, ""
		}
		if castLeft == 0 {
			t.Fatalf("the cast on %s ended with the instance %s on %q: worked by the wrong host's agent and dropped",
				hostB, cur.Status, cur.Host)
		}
		return false, fmt.Sprintf("instance %s on %q", cur.Status, cur.Host)
	})
	cancel()
	if err := <-runErr; err != nil {
		t.Fatal(err)
	}
}

// fleetEnv is a fleet against real etcd (over the network, as the tool's
// client is), real placement and the compute API's services endpoint.
type fleetEnv struct {
	cli  *clientv3.Client
	keys etcdschema.Keys
	api  *api.Client
}

func newFleetEnv(t *testing.T) *fleetEnv {
	t.Helper()
	_, cli := etcdtest.NetClient(t)
	keys := etcdschema.New("/t")
	// The cell exists, so registration and provider syncs map the hosts.
	if _, err := cli.Put(context.Background(), keys.Cell(CellName(1)),
		etcdschema.MustEncode(&etcdschema.Cell{Name: CellName(1), UUID: "c1"})); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api.New(cli, keys, placement.New(cli, keys, hclog.NewNullLogger()), hclog.NewNullLogger()))
	t.Cleanup(srv.Close)
	return &fleetEnv{cli: cli, keys: keys, api: api.NewClient(srv.URL)}
}

func (e *fleetEnv) fleet(t *testing.T, cfg FleetConfig, progress func(int)) *Fleet {
	t.Helper()
	cfg.Cells = 1
	f, err := NewFleet(e.cli, e.keys, placement.New(e.cli, e.keys, hclog.NewNullLogger()), cfg, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	if err := f.Register(context.Background(), progress); err != nil {
		t.Fatal(err)
	}
	return f
}

// states is each host's state in GET /v1/services.
func (e *fleetEnv) states(t *testing.T) map[string]string {
	t.Helper()
	svcs, err := e.api.ListServices(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, s := range svcs {
		out[s.Host] = s.State
	}
	return out
}

// fleetWait bounds the waits for a fleet's periodic work: a minute, for
// thousands of hosts' beats and syncs on a loaded machine.
const fleetWait = time.Minute

// TestFleetPerHostLiveness: every host has a lease of its own, renewed
// every report_interval, so a TTL far shorter than the run never lets a
// host go down; a lease killed under one host takes only that host down,
// and the host's next beat grants a new lease as the agent does; Close
// takes every host down at once.
func TestFleetPerHostLiveness(t *testing.T) {
	const hosts = 12
	e := newFleetEnv(t)
	f := e.fleet(t, FleetConfig{Hosts: hosts, ReportInterval: 250 * time.Millisecond, ServiceDownTime: 3 * time.Second,
		SkipSyncs: true}, nil)
	ctx := context.Background()
	seen := map[clientv3.LeaseID]bool{}
	for i := 1; i <= hosts; i++ {
		id := f.Lease(i)
		if id == 0 || seen[id] {
			t.Fatalf("host %d: lease %x (zero or shared)", i, id)
		}
		seen[id] = true
		resp, err := e.cli.Get(ctx, e.keys.Alive(f.HostName(i)))
		if err != nil || len(resp.Kvs) != 1 || clientv3.LeaseID(resp.Kvs[0].Lease) != id {
			t.Fatalf("host %d: alive key not bound to its lease %x: %v %v", i, id, resp, err)
		}
	}
	// No alive key may go away while the leases are renewed.
	resp, err := e.cli.Get(ctx, e.keys.Cell("-"), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	wch := e.cli.Watch(wctx, e.keys.HostsPrefix(), clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1),
		clientv3.WithFilterPut())
	start := time.Now()
	// Three TTLs' worth of beats for every host (12 per TTL).
	testwait.Poll(t, fleetWait, "36 renewals per host", func() (bool, string) {
		n := f.Background().Renewals
		return n >= 36*hosts, fmt.Sprintf("%d renewals", n)
	})
	if d := time.Since(start); d < 6*time.Second {
		t.Fatalf("36 beats per host at 250ms took only %s", d)
	}
	for i := 1; i <= hosts; i++ {
		ttl, err := e.cli.TimeToLive(ctx, f.Lease(i))
		if err != nil || ttl.TTL <= 0 {
			t.Fatalf("host %d's lease after %s (TTL 3s): %+v %v", i, time.Since(start), ttl, err)
		}
	}
	st := e.states(t)
	for i := 1; i <= hosts; i++ {
		if st[f.HostName(i)] != "up" {
			t.Fatalf("host %d is %q after %s of renewals: %v", i, st[f.HostName(i)], time.Since(start), st)
		}
	}
	if bg := f.Background(); bg.Regrants != 0 || bg.Failures != 0 {
		t.Fatalf("renewals lost leases: %+v", bg)
	}
	// Every host's beats went on the fleet's keepalive streams, one per
	// thousand hosts, none reopened.
	if n, want := f.renewer.Opened(), int64(renewStreams(hosts)); n != want {
		t.Fatalf("%d keepalive streams opened for %d hosts' beats, want %d", n, hosts, want)
	}

	// Kill host 7's lease: it alone goes down.
	victim, old := f.HostName(7), f.Lease(7)
	if _, err := e.cli.Revoke(ctx, old); err != nil {
		t.Fatal(err)
	}
	st = e.states(t)
	for h, s := range st {
		if (h == victim) != (s == "down") {
			t.Fatalf("after revoking %s's lease: %s is %s (%v)", victim, h, s, st)
		}
	}
	// Only its alive key was deleted.
	select {
	case wr := <-wch:
		for _, ev := range wr.Events {
			if string(ev.Kv.Key) != e.keys.Alive(victim) {
				t.Fatalf("%s deleted", ev.Kv.Key)
			}
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no delete of the victim's alive key seen")
	}
	// Its next beat finds the lease gone and registers again. The alive
	// key is written again before the beat returns and the fleet records
	// the new lease, so wait for both rather than read the lease the
	// moment the host reads up (that raced on a loaded machine).
	testwait.Poll(t, fleetWait, victim+" up again on a new lease", func() (bool, string) {
		s := e.states(t)[victim]
		return s == "up" && f.Lease(7) != old && f.Background().Regrants > 0,
			fmt.Sprintf("%s, lease %x, %d re-granted", s, f.Lease(7), f.Background().Regrants)
	})
	if f.Lease(7) == old || f.Background().Regrants != 1 {
		t.Fatalf("lease %x -> %x, %d re-granted", old, f.Lease(7), f.Background().Regrants)
	}

	f.Close()
	st = e.states(t)
	for h, s := range st {
		if s != "down" {
			t.Fatalf("%s is %s right after Close", h, s)
		}
	}
}

// TestFleetLeaveLeases: a fleet told to leave its leases stops its
// beats on Close but downs no host: every alive key is still bound to its
// host's lease, which is left to expire.
func TestFleetLeaveLeases(t *testing.T) {
	const hosts = 4
	e := newFleetEnv(t)
	f := e.fleet(t, FleetConfig{Hosts: hosts, ServiceDownTime: time.Minute, SkipSyncs: true, LeaveLeases: true}, nil)
	leases := make([]clientv3.LeaseID, hosts+1)
	for i := 1; i <= hosts; i++ {
		leases[i] = f.Lease(i)
	}
	f.Close()
	ctx := context.Background()
	for i := 1; i <= hosts; i++ {
		resp, err := e.cli.Get(ctx, e.keys.Alive(f.HostName(i)))
		if err != nil || len(resp.Kvs) != 1 || clientv3.LeaseID(resp.Kvs[0].Lease) != leases[i] {
			t.Fatalf("host %d after Close: alive key %v (%v), want it bound to lease %x", i, resp.Kvs, err, leases[i])
		}
	}
	for h, s := range e.states(t) {
		if s != "up" {
			t.Fatalf("%s is %s after a Close that leaves the leases", h, s)
		}
	}
}

// TestFleetPeriodicSyncs: provider and instance syncs run per host at
// their intervals through the agent's code (a service disabled in etcd
// reaches the provider's traits only by a provider sync: the fleet runs
// no service watch), and never more often.
func TestFleetPeriodicSyncs(t *testing.T) {
	const hosts = 8
	const provEvery, instEvery = 200 * time.Millisecond, 300 * time.Millisecond
	e := newFleetEnv(t)
	start := time.Now()
	f := e.fleet(t, FleetConfig{Hosts: hosts, ProviderSyncInterval: provEvery, InstanceSyncInterval: instEvery}, nil)
	ctx := context.Background()
	// The registration's sync, then four periodic ones per host (an
	// unchanged list is not written again each time, so they are counted,
	// not read from the records' versions).
	testwait.Poll(t, fleetWait, "5 instance syncs per host", func() (bool, string) {
		n := f.Background().InstanceSyncs
		return n >= 5*hosts, fmt.Sprintf("%d instance syncs", n)
	})
	for i := 1; i <= hosts; i++ {
		resp, err := e.cli.Get(ctx, e.keys.HostSync(f.HostName(i)))
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("%s's HostSync: %v %v", f.HostName(i), resp, err)
		}
	}
	bg := f.Background()
	elapsed := time.Since(start)
	if most := int64(hosts) * (int64(elapsed/instEvery) + 1); bg.InstanceSyncs > most || bg.InstanceSyncs < 4*hosts {
		t.Fatalf("%d instance syncs in %s at %s for %d hosts (at most %d)", bg.InstanceSyncs, elapsed, instEvery, hosts, most)
	}
	if most := int64(hosts) * (int64(elapsed/provEvery) + 1); bg.ProviderSyncs > most || bg.ProviderSyncs < hosts {
		t.Fatalf("%d provider syncs in %s at %s for %d hosts (at most %d)", bg.ProviderSyncs, elapsed, provEvery, hosts, most)
	}
	if bg.Failures != 0 {
		t.Fatalf("periodic work failed: %+v", bg)
	}
	// The syncs counted as writes are the HostSync puts etcd has (each
	// key's version), not every sync: an unchanged list is not rewritten.
	testwait.Poll(t, fleetWait, "HostSync writes counted as etcd has them", func() (bool, string) {
		before := f.Background().InstanceSyncWrites
		var versions int64
		for i := 1; i <= hosts; i++ {
			resp, err := e.cli.Get(ctx, e.keys.HostSync(f.HostName(i)))
			if err != nil || len(resp.Kvs) != 1 {
				return false, fmt.Sprintf("%s's HostSync: %v", f.HostName(i), err)
			}
			versions += resp.Kvs[0].Version
		}
		after := f.Background()
		return before == after.InstanceSyncWrites && versions == before && before < after.InstanceSyncs,
			fmt.Sprintf("%d writes counted (%d after), %d puts in etcd, %d syncs", before, after.InstanceSyncWrites, versions, after.InstanceSyncs)
	})

	// Disable host 3 in its service record as the API does.
	host := f.HostName(3)
	key := e.keys.Service(host)
	resp, err := e.cli.Get(ctx, key)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("read %s: %v", key, err)
	}
	var svc etcdschema.Service
	if err := etcdschema.Decode(key, resp.Kvs[0].Value, &svc); err != nil {
		t.Fatal(err)
	}
	svc.Disabled = true
	if _, err := e.cli.Put(ctx, key, etcdschema.MustEncode(&svc)); err != nil {
		t.Fatal(err)
	}
	provKey := e.keys.Provider(agent.ProviderUUIDForHost(host))
	testwait.Poll(t, fleetWait, "the disabled trait on "+host, func() (bool, string) {
		resp, err := e.cli.Get(ctx, provKey)
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("read %s: %v", provKey, err)
		}
		var p etcdschema.Provider
		if err := etcdschema.Decode(provKey, resp.Kvs[0].Value, &p); err != nil {
			t.Fatal(err)
		}
		return slices.Contains(p.Traits, placement.TraitComputeStatusDisabled), fmt.Sprintf("traits %v", p.Traits)
	})
}

// TestFleetGoroutinesBounded: 2,000 hosts with their liveness and syncs
// run on a pool, not a goroutine per host.
func TestFleetGoroutinesBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("registers 2,000 hosts")
	}
	const hosts, workers, regWorkers = 2000, 32, 32
	e := newFleetEnv(t)
	base := runtime.NumGoroutine()
	most := 0
	// Sampled while the hosts register (their periodic work starts with
	// the first) and then until every host has renewed its lease.
	f := e.fleet(t, FleetConfig{Hosts: hosts, ReportInterval: 5 * time.Second, ServiceDownTime: 30 * time.Second,
		ProviderSyncInterval: 10 * time.Second, InstanceSyncInterval: 10 * time.Second, RegisterWorkers: regWorkers,
		BackgroundWorkers: workers}, func(int) { most = max(most, runtime.NumGoroutine()) })
	// Sampled every 20 ms, not at the wait's polls, which back off to
	// a quarter second and could miss a burst.
	stop, sampled := make(chan struct{}), make(chan struct{})
	stopSampling := sync.OnceFunc(func() { close(stop); <-sampled })
	defer stopSampling() // a failed wait leaves no sampler behind
	go func() {
		defer close(sampled)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			most = max(most, runtime.NumGoroutine()-1) // not counting this one
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	testwait.Poll(t, fleetWait, "every host renewed", func() (bool, string) {
		n := f.Background().Renewals
		return n >= hosts, fmt.Sprintf("%d renewals", n)
	})
	stopSampling()
	// The syncs' pools (one per task; the beats have none, their answers
	// call back), the dispatchers and the calls in flight (a few gRPC
	// goroutines each); a goroutine per host would be 2,000 more.
	pools := (numTasks - 1) * workers
	if limit := base + 4*(pools+regWorkers) + 50; most > limit {
		t.Fatalf("%d goroutines with %d hosts (%d before the fleet; limit %d)", most, hosts, base, limit)
	}
	// Whether the periodic work kept up is this machine's business (under
	// -race on a busy machine it may not); the pool stays the same size.
	t.Logf("%d goroutines at most for %d hosts (%d before); %+v", most, hosts, base, f.Background())
}

// TestDispatchStretchesLapsInsteadOfBursting: workers held up for many
// periods make the slots behind them late, in order, and the schedule
// then goes on from the present instead of making up the missed laps in
// a burst, as an agent's ticker drops the ticks of a slow receiver.
func TestDispatchStretchesLapsInsteadOfBursting(t *testing.T) {
	const hosts, every = 4, 40 * time.Millisecond
	f := leasedFleet(hosts)
	start := time.Now()
	var runs atomic.Int64
	var released atomic.Int64 // ns after start
	task := &periodicTask{kind: taskProvider, every: every, run: func(ctx context.Context, h *fleetHost) error {
		if runs.Add(1) == 1 {
			// The first run holds the only worker for ten periods.
			for time.Since(start) < 10*every {
				time.Sleep(every / 4)
			}
			released.Store(int64(time.Since(start)))
		}
		return nil
	}}
	f.tasks = []*periodicTask{task}
	ctx, cancel := context.WithCancel(context.Background())
	f.startPeriodic(ctx, ctx)
	defer func() { cancel(); f.bgWG.Wait() }()
	testwait.Poll(t, fleetWait, "three laps after the hold", func() (bool, string) {
		n := runs.Load()
		return n >= 4*hosts, fmt.Sprintf("%d runs", n)
	})
	// Since the worker was freed at most a lap per period ran (plus the
	// rest of the held lap and a lap of slack), not the ten laps missed.
	n := runs.Load()
	since := time.Since(start) - time.Duration(released.Load())
	if most := int64(hosts) * (int64(since/every) + 3); n > most {
		t.Fatalf("%d runs %s after the workers were held up for 10 periods (at most %d): a catch-up burst", n, since, most)
	}
	// The slots behind the held run started a period late or more.
	if bg := f.Background(); bg.PeriodLate < 2 || bg.Overlapped != 0 {
		t.Fatalf("after a hold of ten periods: %+v", bg)
	}
}

// TestRenewalsNotHeldBySlowSyncs: a sync that holds its worker does not
// hold up the hosts' liveness beats, as an agent's beat has a goroutine
// of its own. (With one pool for every task, the held worker was the
// renewals' too: a 20,000-host fleet lost 7,450 leases registering.)
func TestRenewalsNotHeldBySlowSyncs(t *testing.T) {
	const hosts, every = 4, 20 * time.Millisecond
	f := leasedFleet(hosts)
	release := make(chan struct{})
	var renewals atomic.Int64
	f.tasks = []*periodicTask{
		{kind: taskProvider, every: every, run: func(ctx context.Context, h *fleetHost) error {
			select { // the first sync holds its worker until the end
			case <-release:
			case <-ctx.Done():
			}
			return nil
		}},
		{kind: taskRenew, every: every, run: func(ctx context.Context, h *fleetHost) error {
			renewals.Add(1)
			return nil
		}},
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.startPeriodic(ctx, ctx)
	defer func() { close(release); cancel(); f.bgWG.Wait() }()
	testwait.Poll(t, fleetWait, "three laps of renewals while a sync holds its worker", func() (bool, string) {
		n := renewals.Load()
		return n >= 3*hosts, fmt.Sprintf("%d renewals", n)
	})
}

// TestFleetProcsSizeWorkersForTheWholeFleet: the children's worker pools
// are the whole fleet's default, shared among them (they were sized for
// a fleet of one host: 32 workers a child at 100,000 hosts).
func TestFleetProcsSizeWorkersForTheWholeFleet(t *testing.T) {
	for _, c := range []struct{ hosts, given, want int }{
		{100000, 0, 1024}, {20000, 0, 1000}, {1000, 0, 64}, {100000, 10, 10},
	} {
		p, err := newFleetProcs(2, FleetConfig{Hosts: c.hosts, Cells: 1, BackgroundWorkers: c.given}, nil, "", "warn",
			io.Discard, hclog.NewNullLogger())
		if err != nil {
			t.Fatal(err)
		}
		if p.cfg.BackgroundWorkers != c.want || p.cfg.Hosts != c.hosts {
			t.Errorf("%d hosts, -background-workers %d: %d workers for %d hosts, want %d", c.hosts, c.given,
				p.cfg.BackgroundWorkers, p.cfg.Hosts, c.want)
		}
	}
}

func TestHistCountsQuantile(t *testing.T) {
	var h latencyHist
	for _, d := range []time.Duration{0, 500 * time.Microsecond, 3 * time.Millisecond, 3 * time.Millisecond, 90 * time.Second} {
		h.add(d)
	}
	c := h.snapshot()
	for _, q := range []struct {
		q    float64
		want time.Duration
	}{{0, time.Millisecond}, {0.5, 4 * time.Millisecond}, {1, 131072 * time.Millisecond}} {
		if got := c.Quantile(q.q); got != q.want {
			t.Errorf("quantile %g = %s, want %s", q.q, got, q.want)
		}
	}
	if got := (HistCounts{}).String(); got != "-" {
		t.Errorf("empty: %q", got)
	}
}

func TestRenewStreamsPerThousandHosts(t *testing.T) {
	for _, c := range []struct{ hosts, want int }{
		{0, 1}, {1, 1}, {1000, 1}, {1001, 2}, {10000, 10}, {100000, 100}, {1000000, 128},
	} {
		if got := renewStreams(c.hosts); got != c.want {
			t.Errorf("renewStreams(%d) = %d, want %d", c.hosts, got, c.want)
		}
	}
}

// leasedFleet is a fleet of hosts that each hold a lease, with one
// background worker, for tests that drive its periodic dispatch alone.
func leasedFleet(hosts int) *Fleet {
	f := &Fleet{cfg: FleetConfig{BackgroundWorkers: 1}, log: hclog.NewNullLogger()}
	for i := 0; i < hosts; i++ {
		h := &fleetHost{}
		h.lease.Store(1)
		f.hosts = append(f.hosts, h)
	}
	return f
}

func TestFleetChildEnv(t *testing.T) {
	for _, tc := range []struct {
		desc string
		env  []string
		want []string
	}{
		{"no GODEBUG", []string{"HOME=/root"}, []string{"HOME=/root", "GODEBUG=gcshrinkstackoff=1"}},
		{"empty GODEBUG", []string{"GODEBUG=", "HOME=/root"}, []string{"HOME=/root", "GODEBUG=gcshrinkstackoff=1"}},
		// The operator's settings come after ours: theirs win a clash.
		{"the operator's GODEBUG kept", []string{"GODEBUG=madvdontneed=1,gcshrinkstackoff=0"},
			[]string{"GODEBUG=gcshrinkstackoff=1,madvdontneed=1,gcshrinkstackoff=0"}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if got := fleetChildEnv(tc.env); !slices.Equal(got, tc.want) {
				t.Fatalf("fleetChildEnv(%q) = %q, want %q", tc.env, got, tc.want)
			}
		})
	}
}

// TestFleetWatchesItsOwnHostsKeys: a fleet's cast watch covers every key
// of each of its hosts and no key of the hosts before or after it (the
// next fleet process's), and falls back to the whole hosts prefix when
// its hosts' names are not all one width.
func TestFleetWatchesItsOwnHostsKeys(t *testing.T) {
	keys := etcdschema.New(etcdschema.DefaultPrefix)
	inRange := func(from, end, key string) bool { return key >= from && key < end }
	f := &Fleet{keys: keys, cfg: FleetConfig{FirstHost: 9, Hosts: 3, HostPrefix: "bench-"}}
	from, end := f.watchedRange()
	mfrom, mend := f.mappingRange()
	for i := 8; i <= 12; i++ {
		h := hostName("bench-", i)
		own := i >= 9 && i <= 11
		for _, k := range []string{keys.Service(h), keys.Build(h, "u1"), keys.HostInstance(h, "u1"), keys.HostSync(h), keys.Alive(h)} {
			if got := inRange(from, end, k); got != own {
				t.Errorf("key %s in the watch [%s, %s): %v, want %v", k, from, end, got, own)
			}
		}
		if k := keys.HostMapping(h); inRange(mfrom, mend, k) != own {
			t.Errorf("key %s in the mappings' watch [%s, %s): %v, want %v", k, mfrom, mend, !own, own)
		}
	}
	f.cfg.FirstHost, f.cfg.Hosts = 999_999, 2 // bench-999999 and bench-1000000
	from, end = f.watchedRange()
	if from != keys.HostsPrefix() || end != clientv3.GetPrefixRangeEnd(keys.HostsPrefix()) {
		t.Errorf("names of two widths: watch [%s, %s), want the hosts prefix %s", from, end, keys.HostsPrefix())
	}
	if mfrom, mend = f.mappingRange(); mfrom != keys.HostMappings() || mend != clientv3.GetPrefixRangeEnd(keys.HostMappings()) {
		t.Errorf("names of two widths: mappings' watch [%s, %s), want the mappings prefix %s", mfrom, mend, keys.HostMappings())
	}
}
