package placement

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/berth-project/berth/etcdschema"
)

// BenchmarkLinkConsumers links a cold start's consumers to their
// providers as the deferred list does (a host's servers on its one
// provider), in uuid order as etcd lists them, with the providers in
// random order of the uuids (a real cloud's consumer uuids are random):
// each op is one consumer linked. BERTH_BENCH_HOSTS-free: 10,000 hosts ×
// 10 servers, the per-provider shape of BenchmarkColdStart100k.
func BenchmarkLinkConsumers(b *testing.B) {
	const hosts, perHost = 10000, 10
	rps := make([]string, hosts)
	for i := range rps {
		rps[i] = fmt.Sprintf("00000000-0000-0000-0000-%012d", i)
	}
	cs := make([]*etcdschema.Consumer, 0, hosts*perHost)
	res := map[string]int64{VCPU: 1, MemoryMB: 2048}
	for j := 0; j < perHost; j++ {
		for i := 0; i < hosts; i++ {
			// Scatter a host's servers over the uuid order.
			rp := rps[(i*7919+j*104729)%hosts]
			cs = append(cs, &etcdschema.Consumer{UUID: fmt.Sprintf("%08d-0000-4000-8000-%012d", j, i),
				Allocations: map[string]etcdschema.ConsumerAllocation{rp: {Resources: res}}})
		}
	}
	// The heap the links of one cold start keep, per consumer.
	before := liveHeap()
	st := newIndexState()
	for _, c := range cs {
		st.linkConsumer(c)
	}
	kept := float64(liveHeap()-before) / float64(len(cs))
	runtime.KeepAlive(st)
	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; {
		st := newIndexState()
		for _, c := range cs {
			st.linkConsumer(c)
			done++
			if done == b.N {
				break
			}
		}
	}
	b.ReportMetric(kept, "B-kept/consumer")
}

// liveHeap is the heap in use after a collection.
func liveHeap() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}
