package stack

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/api"
	"github.com/berth-project/berth/configs"
	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/internal/testwait"
)

// BenchmarkBootPipeline boots b.N servers through the whole pipeline in
// one process: embedded etcd, the real API over HTTP, placement, one or
// three scheduler+superconductor stacks (each with its own placement index
// and host manager, as separate `berth server` processes would have), a
// cell conductor per cell, and real agents with the fake driver at zero
// build time. It reports servers/s from the first request to the last
// ACTIVE, and etcd writes per server: write transactions (the revision
// delta) and keys written, both measured from a watch of the whole prefix.
//
// Run it with an explicit count, so the stack is built once:
//
//	go test -run XXX -bench BootPipeline -benchtime 3000x ./internal/stack/
//
// BERTH_BENCH_HOSTS (default 1000), BERTH_BENCH_CLIENTS (default 32) and
// BERTH_BENCH_COUNT (servers per API request, default 1) change the load;
// BERTH_BENCH_TALLY=1 prints every write transaction's shape and count,
// and the bytes each kind of key put carries per server.
//
// put-B/server is the key and value bytes of every put, per server: each
// of them is proposed through raft, written to the WAL, applied to the
// backend and sent to every watcher of its prefix, and etcd allocates
// about ten bytes for each on the way (the protobuf encodings of the
// request, the WAL entry and the stored KeyValue, the watchers' copies).
// It does not depend on the machine's load, so a change to a record's
// size shows here when CPU figures are too noisy to.
func BenchmarkBootPipeline(b *testing.B) {
	for _, scheds := range []int{1, 3} {
		b.Run(fmt.Sprintf("schedulers=%d", scheds), func(b *testing.B) {
			benchBoot(b, scheds, envInt(b, "BERTH_BENCH_HOSTS", 1000), envInt(b, "BERTH_BENCH_CLIENTS", 32),
				envInt(b, "BERTH_BENCH_COUNT", 1))
		})
	}
}

// processCPU is the user + system CPU time this process has used (the
// embedded etcd, every role and every agent are in it).
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func envInt(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// pipeline is a whole Berth in one process for the boot benchmark.
type pipeline struct {
	cli    *clientv3.Client
	keys   etcdschema.Keys
	stacks []*Stack
	apis   []string
}

// startPipeline starts nScheds server stacks (API, placement index,
// scheduler, superconductor) over one etcd, two cell conductors on the
// first, and hosts agents (fake driver, zero build time) across two cells.
func startPipeline(tb testing.TB, nScheds, hosts int) *pipeline {
	tb.Helper()
	cli := etcdtest.Client(tb)
	p := &pipeline{cli: cli, keys: etcdschema.New(etcdschema.DefaultPrefix)}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	log := hclog.NewNullLogger()
	for i := 0; i < nScheds; i++ {
		cfg := configs.Defaults()
		cfg.EnableAllRoles()
		cfg.Etcd.Embedded = nil
		cfg.Placement = nil // no Placement HTTP API: nothing here calls it
		cfg.API.Bind = "127.0.0.1:0"
		cfg.Scheduler.Bind = "127.0.0.1:0"
		if w := os.Getenv("BERTH_BENCH_SC_WORKERS"); w != "" {
			cfg.Superconductor.Workers, _ = strconv.Atoi(w)
		}
		s := &Stack{cfg: cfg, log: log, keys: p.keys, cli: cli, errs: make(chan error, 16)}
		s.ctx, s.cancel = context.WithCancel(context.Background())
		tb.Cleanup(s.Stop)
		if err := s.StartServerRoles(ctx); err != nil {
			tb.Fatalf("stack %d: %v", i, err)
		}
		for _, ep := range s.Endpoints {
			if ep[0] == "compute API" {
				p.apis = append(p.apis, ep[1])
			}
		}
		p.stacks = append(p.stacks, s)
	}
	first := p.stacks[0]
	for c := 1; c <= 2; c++ {
		cc := *first.cfg.Conductor
		cc.Cell = fmt.Sprintf("cell%d", c)
		if err := first.StartConductor(ctx, &cc); err != nil {
			tb.Fatal(err)
		}
	}
	dir := tb.TempDir()
	for h := 1; h <= hosts; h++ {
		a := *first.cfg.Agent
		a.Host = fmt.Sprintf("compute-%d", h)
		a.Cell = fmt.Sprintf("cell%d", (h-1)%2+1)
		a.Inventory.VCPUs, a.Inventory.MemoryMB, a.Inventory.DiskGB = DevVCPUs, DevMemoryMB, DevDiskGB
		if err := first.StartAgent(ctx, &a, dir); err != nil {
			tb.Fatal(err)
		}
	}
	// Every host up and known to every scheduler before the clock starts.
	// Within what is left of the start-up's 5 minutes.
	err := testwait.Wait(ctx, 5*time.Minute, func() (bool, string) {
		alive := p.aliveHosts(tb, ctx)
		for i, s := range p.stacks {
			if known := s.hosts.Stats().Hosts; known < hosts || alive < hosts {
				return false, fmt.Sprintf("stack %d knows %d, %d alive, of %d", i, known, alive, hosts)
			}
		}
		return true, ""
	})
	if err != nil {
		tb.Fatalf("hosts did not come up: %v", err)
	}
	// Then let the agents' start-up writes (trait sync, instance sync)
	// settle, so they are not counted as the boots' writes.
	var last int64
	for quiet := 0; quiet < 5; {
		resp, err := cli.Get(ctx, "health")
		if err != nil {
			tb.Fatal(err)
		}
		if resp.Header.Revision == last {
			quiet++
		} else {
			quiet, last = 0, resp.Header.Revision
		}
		time.Sleep(100 * time.Millisecond)
	}
	return p
}

func (p *pipeline) aliveHosts(tb testing.TB, ctx context.Context) int {
	resp, err := p.cli.Get(ctx, p.keys.HostsPrefix(), clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		tb.Fatal(err)
	}
	n := 0
	for _, kv := range resp.Kvs {
		if strings.HasSuffix(string(kv.Key), "/alive") {
			n++
		}
	}
	return n
}

// keyKind names a key by its shape: "hosts/*/builds", "cells/*/instances",
// "placement/consumers", "build_requests", ...
func keyKind(prefix, key string) string {
	rest := strings.TrimPrefix(key, prefix+"/")
	seg := strings.Split(rest, "/")
	switch {
	case (seg[0] == "hosts" || seg[0] == "cells") && len(seg) > 2:
		return seg[0] + "/*/" + seg[2]
	case (seg[0] == "placement" || seg[0] == "leases") && len(seg) > 1:
		return seg[0] + "/" + seg[1]
	}
	return seg[0]
}

// writeTally follows every write under the prefix from one revision: keys
// written per kind, and write transactions grouped by the kinds they touch.
type writeTally struct {
	mu     sync.Mutex
	keys   map[string]int // "put hosts/*/builds" → count
	txns   map[int64][]string
	sizes  map[int64][]int // a put's key and value bytes, as txns lists it (0 for a delete)
	active map[string]time.Time
	failed map[string]string
	notify chan struct{}
}

func (p *pipeline) follow(ctx context.Context, tb testing.TB, from int64) *writeTally {
	t := &writeTally{keys: map[string]int{}, txns: map[int64][]string{}, sizes: map[int64][]int{}, active: map[string]time.Time{},
		failed: map[string]string{}, notify: make(chan struct{}, 1)}
	wch := p.cli.Watch(ctx, p.keys.All(), clientv3.WithPrefix(), clientv3.WithRev(from))
	go func() {
		for resp := range wch {
			if err := resp.Err(); err != nil {
				tb.Errorf("watch: %v", err)
				return
			}
			now := time.Now()
			t.mu.Lock()
			for _, ev := range resp.Events {
				key := string(ev.Kv.Key)
				kind := keyKind(p.keys.Prefix(), key)
				op, size := "put ", len(ev.Kv.Key)+len(ev.Kv.Value)
				if ev.Type == clientv3.EventTypeDelete {
					op, size = "del ", 0
				}
				t.keys[op+kind]++
				t.txns[ev.Kv.ModRevision] = append(t.txns[ev.Kv.ModRevision], op+kind)
				t.sizes[ev.Kv.ModRevision] = append(t.sizes[ev.Kv.ModRevision], size)
				if ev.Type == clientv3.EventTypePut && kind == "cells/*/instances" {
					var inst etcdschema.Instance
					if etcdschema.Decode(key, ev.Kv.Value, &inst) == nil {
						switch inst.Status {
						case etcdschema.StatusActive:
							t.active[inst.UUID] = now
						case etcdschema.StatusError:
							t.failed[inst.UUID] = inst.Fault.Message
						}
					}
				}
			}
			t.mu.Unlock()
			select {
			case t.notify <- struct{}{}:
			default:
			}
		}
	}()
	return t
}

func benchBoot(b *testing.B, nScheds, hosts, clients, count int) {
	if b.N == 1 {
		// The testing package's first call, before the -benchtime Nx one:
		// building a thousand agents for one server would only add noise.
		b.Log("b.N = 1: skipped; run with -benchtime Nx, N > 1")
		return
	}
	p := startPipeline(b, nScheds, hosts)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start, err := p.cli.Get(ctx, "health")
	if err != nil {
		b.Fatal(err)
	}
	tally := p.follow(ctx, b, start.Header.Revision+1)

	requests := (b.N + count - 1) / count
	var next atomic.Int64
	var sentMu sync.Mutex
	sent := map[string]time.Time{}
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	b.ResetTimer()
	cpu0 := processCPU()
	t0 := time.Now()
	for w := 0; w < clients; w++ {
		wg.Add(1)
		c := api.NewClient(p.apis[w%len(p.apis)])
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(requests) {
					return
				}
				n := min(count, b.N-int(i)*count)
				at := time.Now()
				resp, err := c.CreateServers(ctx, api.CreateRequest{Name: fmt.Sprintf("bench-%d", i), Flavor: "m1.small", Count: n})
				if err != nil {
					errs <- err
					return
				}
				sentMu.Lock()
				for _, s := range resp.Servers {
					sent[s.ID] = at
				}
				sentMu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatalf("create: %v", err)
	}
	accepted := time.Since(t0)
	deadline := time.After(time.Duration(b.N)*20*time.Millisecond + 60*time.Second)
	for {
		tally.mu.Lock()
		done, failed := len(tally.active), len(tally.failed)
		tally.mu.Unlock()
		if failed > 0 {
			b.Fatalf("%d servers failed: %v", failed, tally.failed)
		}
		if done >= b.N {
			break
		}
		select {
		case <-tally.notify:
		case <-deadline:
			b.Fatalf("only %d of %d servers ACTIVE", done, b.N)
		}
	}
	elapsed := time.Since(t0)
	cpu := processCPU() - cpu0
	b.StopTimer()
	end, err := p.cli.Get(ctx, "health")
	if err != nil {
		b.Fatal(err)
	}

	tally.mu.Lock()
	defer tally.mu.Unlock()
	var lat []time.Duration
	var last time.Time
	for id, at := range sent {
		if done, ok := tally.active[id]; ok {
			lat = append(lat, done.Sub(at))
			if done.After(last) {
				last = done
			}
		}
	}
	if len(lat) != b.N {
		b.Fatalf("%d of %d requested servers seen ACTIVE", len(lat), b.N)
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	// Only the transactions up to the last ACTIVE belong to the boots.
	txns := 0
	shapes := map[string]int{}
	keys, putBytes := 0, 0
	putBytesOf := map[string]int{} // "hosts/*/builds" → bytes
	for rev, ops := range tally.txns {
		if rev > end.Header.Revision {
			continue
		}
		txns++
		keys += len(ops)
		for i, size := range tally.sizes[rev] {
			putBytes += size
			putBytesOf[strings.TrimPrefix(ops[i], "put ")] += size
		}
		sort.Strings(ops)
		shapes[strings.Join(ops, ", ")]++
	}
	n := float64(b.N)
	b.ReportMetric(n/elapsed.Seconds(), "servers/s")
	b.ReportMetric(n/accepted.Seconds(), "accepted/s")
	b.ReportMetric(float64(end.Header.Revision-start.Header.Revision)/n, "revs/server")
	b.ReportMetric(float64(txns)/n, "txns/server")
	b.ReportMetric(float64(keys)/n, "keys/server")
	b.ReportMetric(float64(putBytes)/n, "put-B/server")
	// CPU per server is the figure to compare on a shared machine: it
	// does not count the time spent waiting for a core.
	b.ReportMetric(float64(cpu.Microseconds())/1000/n, "cpu-ms/server")
	b.ReportMetric(float64(lat[len(lat)/2].Milliseconds()), "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Milliseconds()), "p99-ms")
	b.ReportMetric(0, "ns/op")
	if os.Getenv("BERTH_BENCH_TALLY") != "" {
		type shape struct {
			ops string
			n   int
		}
		var all []shape
		for s, c := range shapes {
			all = append(all, shape{s, c})
		}
		sort.Slice(all, func(i, j int) bool { return all[i].n > all[j].n })
		kinds := make([]string, 0, len(putBytesOf))
		for k, v := range putBytesOf {
			if v > 0 {
				kinds = append(kinds, k)
			}
		}
		sort.Slice(kinds, func(i, j int) bool { return putBytesOf[kinds[i]] > putBytesOf[kinds[j]] })
		for _, k := range kinds {
			b.Logf("%8.1f put bytes/server  [%s]", float64(putBytesOf[k])/n, k)
		}
		for _, s := range all {
			b.Logf("%8.3f txns/server  %6d  [%s]", float64(s.n)/n, s.n, s.ops)
		}
	}
}

// TestMultiCreateLeasesAndHandsOffInOneWriteEach boots multi-create
// requests through the whole pipeline and counts, from a watch of every
// write, the transactions that lease build requests and that hand
// instances off: a request of 10 costs two lease writes (the first
// instance's, then its nine siblings' together) and one hand-off write,
// not ten each, and every server still becomes ACTIVE on its own claim.
func TestMultiCreateLeasesAndHandsOffInOneWriteEach(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a whole pipeline with 20 agents")
	}
	p := startPipeline(t, 1, 20)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start, err := p.cli.Get(ctx, "health")
	if err != nil {
		t.Fatal(err)
	}
	tally := p.follow(ctx, t, start.Header.Revision+1)
	const requests, count = 3, 10
	c := api.NewClient(p.apis[0])
	for i := 0; i < requests; i++ {
		if _, err := c.CreateServers(ctx, api.CreateRequest{Name: fmt.Sprintf("multi-%d", i), Flavor: "m1.small", Count: count}); err != nil {
			t.Fatal(err)
		}
	}
	for {
		tally.mu.Lock()
		done, failed := len(tally.active), len(tally.failed)
		tally.mu.Unlock()
		if failed > 0 {
			t.Fatalf("servers failed: %v", tally.failed)
		}
		if done == requests*count {
			break
		}
		select {
		case <-tally.notify:
		case <-ctx.Done():
			t.Fatalf("only %d of %d servers ACTIVE", done, requests*count)
		}
	}
	tally.mu.Lock()
	defer tally.mu.Unlock()
	var leaseTxns, leaseKeys, handOffTxns, handOffKeys, claimTxns int
	for _, ops := range tally.txns {
		n := func(op string) int {
			c := 0
			for _, o := range ops {
				if o == op {
					c++
				}
			}
			return c
		}
		if k := n("put leases/build_requests"); k > 0 {
			leaseTxns++
			leaseKeys += k
		}
		if k := n("put hosts/*/builds"); k > 0 {
			handOffTxns++
			handOffKeys += k
		}
		if n("put placement/consumers") > 0 {
			claimTxns++
		}
	}
	if leaseKeys != requests*count || handOffKeys != requests*count {
		t.Fatalf("%d lease keys and %d casts written, want %d of each", leaseKeys, handOffKeys, requests*count)
	}
	if leaseTxns != 2*requests {
		t.Errorf("%d lease transactions for %d requests of %d, want %d", leaseTxns, requests, count, 2*requests)
	}
	if handOffTxns != requests {
		t.Errorf("%d hand-off transactions for %d requests of %d, want %d", handOffTxns, requests, count, requests)
	}
	if claimTxns != requests*count {
		t.Errorf("%d claim transactions, want one per server (%d)", claimTxns, requests*count)
	}
}
