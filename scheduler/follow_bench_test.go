package scheduler

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/informer"
)

// followEvent is one key of a generated boot write stream, as a watch
// delivers it (a put's raw value, or a delete).
type followEvent struct {
	key   string
	value []byte
}

// bootHostStream generates what a scheduler's host manager follows while
// servers boot on hosts already registered: per server, the hand-off's
// build cast (one watch response), then the agent's transaction that
// writes the instance info and deletes the cast (another). Values are
// encoded as their writers encode them (superconductor.go, agent/builds.go).
func bootHostStream(keys etcdschema.Keys, hosts, servers int) [][]followEvent {
	now := time.Date(2026, 11, 22, 6, 0, 0, 123456789, time.UTC)
	flavor := etcdschema.Flavor{ID: "2", Name: "m1.small", VCPUs: 1, RAMMB: 2048, DiskGB: 20}
	flavor.Version = etcdschema.FlavorVersion
	var out [][]followEvent
	for i := 0; i < servers; i++ {
		host := fmt.Sprintf("bench-%06d", i%hosts)
		uuid := fmt.Sprintf("6a0c9b1e-0000-4000-8000-%012d", i)
		b := etcdschema.MustEncode(&etcdschema.Build{Op: etcdschema.OpBuild, InstanceUUID: uuid, Name: "server-" + uuid[24:],
			Cell: "cell1", Flavor: flavor, ProjectID: "bench", UserID: "bench", Attempt: 1,
			RequestID: "req-" + uuid, CastAt: now})
		info := etcdschema.MustEncode(&etcdschema.InstanceInfo{UUID: uuid, Host: host, FlavorID: flavor.ID,
			Flavor: flavor.Name, State: "active", UpdatedAt: now})
		out = append(out,
			[]followEvent{{keys.Build(host, uuid), []byte(b)}},
			[]followEvent{{keys.HostInstance(host, uuid), []byte(info)}, {keys.Build(host, uuid), nil}})
	}
	return out
}

// registeredHosts is the hosts prefix of n registered hosts (service,
// alive, an empty sync), listed.
func registeredHosts(keys etcdschema.Keys, n int) []followEvent {
	now := time.Date(2026, 11, 22, 5, 0, 0, 0, time.UTC)
	var out []followEvent
	for i := 0; i < n; i++ {
		host := fmt.Sprintf("bench-%06d", i)
		out = append(out,
			followEvent{keys.Alive(host), []byte(etcdschema.MustEncode(&etcdschema.Alive{Host: host, LeaseID: 7587891349216435205, Since: now}))},
			followEvent{keys.Service(host), []byte(etcdschema.MustEncode(&etcdschema.Service{Host: host, Cell: "cell1",
				ProviderUUID: fmt.Sprintf("2f9c0d1e-0000-4000-8000-%012d", i), AgentVersion: "bench", CreatedAt: now, UpdatedAt: now}))},
			followEvent{keys.HostSync(host), []byte(etcdschema.MustEncode(&etcdschema.HostSync{Host: host, UUIDs: []string{}, At: now}))})
	}
	return out
}

// toInformerEvents decodes a watch response as the informer does
// (Decode per put, outside the lock) into its events.
func toInformerEvents(h hostsHandler, resp []followEvent, rev *int64) []informer.Event {
	evs := make([]informer.Event, 0, len(resp))
	for _, fe := range resp {
		*rev++
		ev := informer.Event{Key: fe.key, Revision: *rev}
		if fe.value == nil {
			ev.Deleted = true
		} else {
			ev.Value = fe.value // as a watch's events carry it
			ev.Decoded, ev.DecodeErr = h.Decode(ev.Key, fe.value)
		}
		evs = append(evs, ev)
	}
	return evs
}

// BenchmarkHostManagerFollowBoot: what one scheduler's host manager
// spends following the hosts prefix per server booted (decode and apply
// of the cast put, the instance info put and the cast delete), on 10,000
// registered hosts. Every scheduler of a deployment pays this for every
// server, whoever scheduled it.
func BenchmarkHostManagerFollowBoot(b *testing.B) {
	keys := etcdschema.New("/berth")
	hm := NewHostManager(nil, keys, hclog.NewNullLogger())
	h := hostsHandler{hm}
	var rev int64
	h.Reset(toInformerEvents(h, registeredHosts(keys, 10000), &rev), rev)
	stream := bootHostStream(keys, 10000, 20000)
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	for i := 0; i < b.N; i++ {
		for _, resp := range stream[(2*i)%len(stream) : (2*i)%len(stream)+2] {
			h.Apply(toInformerEvents(h, resp, &rev))
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
	if st := hm.Stats(); st.Hosts != 10000 || st.Instances == 0 {
		b.Fatalf("host manager after the stream: %+v", st)
	}
}

// BenchmarkHostManagerHeld: what one scheduler's host manager holds per
// registered host (alive key, service record, HostSync, capacity
// report) once the watch
// has delivered them: heap objects and bytes per host, measured after a
// collection. Every object held is one the collector marks in every
// cycle (at 100,000 hosts a cycle's cost is its pointers, not its bytes).
//
//	go test -run '^$' -bench HostManagerHeld -count 5 ./scheduler
func BenchmarkHostManagerHeld(b *testing.B) {
	const n = 20000
	keys := etcdschema.New("/berth")
	registered := registeredHosts(keys, n)
	// And each idle host's capacity report, as an agent writes it.
	inv := map[string]etcdschema.Inventory{"VCPU": {Total: 64, AllocationRatio: 16}, "MEMORY_MB": {Total: 262144, AllocationRatio: 1.5},
		"DISK_GB": {Total: 2048, AllocationRatio: 1}}
	for i := 0; i < n; i++ {
		host := fmt.Sprintf("bench-%06d", i)
		registered = append(registered, followEvent{keys.HostCapacity(host), []byte(etcdschema.MustEncode(&etcdschema.HostCapacity{
			Host: host, Inventories: inv, Used: map[string]int64{}, At: time.Date(2026, 11, 22, 5, 0, 0, 0, time.UTC)}))})
	}
	var objects, bytes float64
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		hm := NewHostManager(nil, keys, hclog.NewNullLogger())
		h := hostsHandler{hm}
		var rev int64
		for i := 0; i < len(registered); i += 300 { // watch responses of 300 keys
			h.Apply(toInformerEvents(h, registered[i:min(i+300, len(registered))], &rev))
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		if st := hm.Stats(); st.Hosts != n {
			b.Fatalf("host manager: %+v", st)
		}
		runtime.KeepAlive(hm)
		objects = float64(after.HeapObjects-before.HeapObjects) / n
		bytes = float64(after.HeapAlloc-before.HeapAlloc) / n
	}
	b.ReportMetric(objects, "held-objects/host")
	b.ReportMetric(bytes, "held-B/host")
}
