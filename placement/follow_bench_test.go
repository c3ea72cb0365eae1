package placement

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
)

// bootProvider is a compute node's provider record as an agent registers
// it and claims leave it: three inventories, a trait, usages of the
// servers on it so far.
func bootProvider(i, servers int, gen int64, at time.Time) *etcdschema.Provider {
	uuid := fmt.Sprintf("2f9c0d1e-0000-4000-8000-%012d", i)
	mk := func(total int64, ratio float64) etcdschema.Inventory {
		return etcdschema.Inventory{Total: total, MinUnit: 1, MaxUnit: total, StepSize: 1, AllocationRatio: ratio}
	}
	p := &etcdschema.Provider{UUID: uuid, Name: fmt.Sprintf("bench-%06d", i), Generation: gen, RootProviderUUID: uuid,
		Inventories: map[string]etcdschema.Inventory{VCPU: mk(64, 4), MemoryMB: mk(262144, 1), DiskGB: mk(2000, 1)},
		Traits:      []string{"COMPUTE_NET_ATTACH_INTERFACE"}, Aggregates: []string{},
		Usages: map[string]int64{}, CreatedAt: at, UpdatedAt: at}
	if servers > 0 {
		p.Usages = map[string]int64{VCPU: int64(servers), MemoryMB: 2048 * int64(servers), DiskGB: 20 * int64(servers)}
	}
	return p
}

func putEvent(key, value string, rev int64) *clientv3.Event {
	return &clientv3.Event{Type: mvccpb.PUT, Kv: &mvccpb.KeyValue{Key: []byte(key), Value: []byte(value), ModRevision: rev}}
}

// bootPlacementStream generates what a scheduler's placement index
// follows while servers boot on registered hosts: per claim, one
// transaction writing the consumer (its allocation) and the provider
// (usages and generation moved on), as commitClaim writes them.
func bootPlacementStream(keys etcdschema.Keys, hosts, servers int) [][]*clientv3.Event {
	at := time.Date(2026, 11, 22, 6, 0, 0, 123456789, time.UTC)
	var out [][]*clientv3.Event
	for i := 0; i < servers; i++ {
		h := i % hosts
		n := i/hosts + 1
		p := bootProvider(h, n, int64(n+1), at)
		uuid := fmt.Sprintf("6a0c9b1e-0000-4000-8000-%012d", i)
		c := &etcdschema.Consumer{UUID: uuid, Generation: 1, ProjectID: "bench", UserID: "bench",
			Allocations: map[string]etcdschema.ConsumerAllocation{p.UUID: {Resources: map[string]int64{VCPU: 1, MemoryMB: 2048, DiskGB: 20}}},
			CreatedAt:   at, UpdatedAt: at}
		out = append(out, []*clientv3.Event{
			putEvent(keys.Consumer(uuid), etcdschema.MustEncode(c), 0),
			putEvent(keys.Provider(p.UUID), etcdschema.MustEncode(p), 0),
		})
	}
	return out
}

// BenchmarkIndexFollowBoot: what one scheduler's placement index spends
// following the placement prefix per server booted (decode and apply of
// a claim's consumer and provider puts), on 10,000 registered providers.
// Every scheduler pays it for every claim, whoever made it.
func BenchmarkIndexFollowBoot(b *testing.B) {
	keys := etcdschema.New("/berth")
	ix := newIndex()
	at := time.Date(2026, 11, 22, 5, 0, 0, 0, time.UTC)
	const hosts = 10000
	var rev int64
	for i := 0; i < hosts; i++ {
		rev++
		ix.applyEvents([]*clientv3.Event{putEvent(keys.Provider(bootProvider(i, 0, 1, at).UUID),
			etcdschema.MustEncode(bootProvider(i, 0, 1, at)), rev)}, rev, keys, hclog.NewNullLogger())
	}
	stream := bootPlacementStream(keys, hosts, 2*hosts)
	log := hclog.NewNullLogger()
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU()
	for i := 0; i < b.N; i++ {
		txn := stream[i%len(stream)]
		rev++
		for _, ev := range txn {
			ev.Kv.ModRevision = rev
		}
		ix.applyEvents(txn, rev, keys, log)
	}
	b.StopTimer()
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
	if n := len(ix.st.providers); n != hosts {
		b.Fatalf("%d providers indexed, want %d", n, hosts)
	}
}

// BenchmarkIndexLoad100k: a placement service's cold start on 100,000
// registered providers (Start: the index's list at one revision, then its
// watch started), one op a start.
func BenchmarkIndexLoad100k(b *testing.B) {
	s0, cli := newStarted(b)
	const n = 100_000
	populate(b, cli, s0.keys, n)
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU()
	for i := 0; i < b.N; i++ {
		ctx, cancel := context.WithCancel(context.Background())
		s := New(cli, s0.keys, nil)
		if err := s.Start(ctx); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		s.idx.mu.RLock()
		got := len(s.idx.st.providers)
		s.idx.mu.RUnlock()
		if got != n {
			b.Fatalf("%d providers loaded, want %d", got, n)
		}
		cancel()
		b.StartTimer()
	}
	b.StopTimer()
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
}

// BenchmarkIndexHeld: what one placement index holds per registered
// provider once the watch has delivered it, then once a claim has moved
// its usages: heap objects and bytes per provider, measured after a
// collection. At 100,000 hosts a collection's mark costs by live object,
// so each object held here is one every cycle pays for, per index.
//
//	go test -run '^$' -bench IndexHeld -count 5 ./placement
func BenchmarkIndexHeld(b *testing.B) {
	const n = 20000
	keys := etcdschema.New("/berth")
	at := time.Date(2026, 11, 22, 5, 0, 0, 0, time.UTC)
	registered := make([]*clientv3.Event, n)
	claimed := make([]*clientv3.Event, n)
	for i := range n {
		p := bootProvider(i, 0, 1, at)
		registered[i] = putEvent(keys.Provider(p.UUID), etcdschema.MustEncode(p), 0)
		p = bootProvider(i, 1, 2, at)
		claimed[i] = putEvent(keys.Provider(p.UUID), etcdschema.MustEncode(p), 0)
	}
	log := hclog.NewNullLogger()
	var objects, bytes, claimedObjects float64
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		ix := newIndex()
		var rev int64
		apply := func(evs []*clientv3.Event) {
			for i := 0; i < len(evs); i += 300 { // watch responses of 300 keys
				rev++
				batch := evs[i:min(i+300, len(evs))]
				for _, ev := range batch {
					ev.Kv.ModRevision = rev
				}
				ix.applyEvents(batch, rev, keys, log)
			}
		}
		apply(registered)
		runtime.GC()
		runtime.ReadMemStats(&after)
		objects = float64(after.HeapObjects-before.HeapObjects) / n
		bytes = float64(after.HeapAlloc-before.HeapAlloc) / n
		apply(claimed)
		runtime.GC()
		runtime.ReadMemStats(&after)
		claimedObjects = float64(after.HeapObjects-before.HeapObjects) / n
		if got := len(ix.st.providers); got != n {
			b.Fatalf("%d providers indexed, want %d", got, n)
		}
		runtime.KeepAlive(ix)
	}
	b.ReportMetric(objects, "held-objects/host")
	b.ReportMetric(bytes, "held-B/host")
	b.ReportMetric(claimedObjects, "claimed-objects/host")
}
