package placement

import (
	"fmt"
	"reflect"
	"testing"
	"time"
	"unsafe"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
)

// TestColdLoadEqualsFollowedIndex: an index loaded from etcd (consumers
// decoded in parallel chunks, sharing strings and resources maps) holds
// the same providers, consumers and provider-consumer links as an index
// that followed the same writes through its watch; and it does share: a
// consumer's provider uuid is the indexed provider's string, and
// consumers of one flavor hold one resources map, and providers of one
// shape one inventories map.
func TestColdLoadEqualsFollowedIndex(t *testing.T) {
	s, cli := newStarted(t)
	ctx := testCtx(t)
	at := time.Date(2026, 11, 26, 21, 0, 0, 0, time.UTC)
	const hosts, perHost = 60, 25 // 1,500 consumers: parallel chunks
	flavors := []map[string]int64{
		{VCPU: 1, MemoryMB: 2048, DiskGB: 20},
		{VCPU: 2, MemoryMB: 4096},
		{VCPU: 4, MemoryMB: 8192, DiskGB: 80},
	}
	for h := 0; h < hosts; h++ {
		p := bootProvider(h, perHost, 1, at)
		ops := []clientv3.Op{opPut(s.keys.Provider(p.UUID), etcdschema.MustEncode(p))}
		for j := 0; j < perHost; j++ {
			// Uuids not in host order, as real ones: neighbours in a
			// page are on other hosts, of other flavors and projects.
			u := fmt.Sprintf("%08x-0000-4000-8000-%012d", (j*7919+h*104729)%1000003, h*perHost+j)
			c := &etcdschema.Consumer{UUID: u, Generation: int64(1 + j%3), ProjectID: fmt.Sprintf("project-%d", j%4),
				UserID: fmt.Sprintf("user-%d", h%3), ConsumerType: []string{"", "INSTANCE", "MIGRATION"}[j%3],
				Allocations: map[string]etcdschema.ConsumerAllocation{p.UUID: {Resources: flavors[(h+j)%len(flavors)]}},
				CreatedAt:   at, UpdatedAt: at}
			if j%5 == 0 {
				// A move's consumer: on this host and the next one.
				next := bootProvider((h+1)%hosts, 0, 1, at).UUID
				c.Allocations[next] = etcdschema.ConsumerAllocation{Resources: map[string]int64{VCPU: 1}}
			}
			ops = append(ops, opPut(s.keys.Consumer(u), etcdschema.MustEncode(c)))
		}
		if _, err := cli.Txn(ctx).Then(ops...).Commit(); err != nil {
			t.Fatal(err)
		}
	}
	syncIdx(t, s)
	loaded := startOn(t, cli)

	s.idx.mu.RLock()
	defer s.idx.mu.RUnlock()
	loaded.idx.mu.RLock()
	defer loaded.idx.mu.RUnlock()
	followed, fresh := s.idx.st, loaded.idx.st
	if len(fresh.consumers) != hosts*perHost || len(fresh.providers) != hosts {
		t.Fatalf("loaded %d consumers, %d providers; want %d, %d", len(fresh.consumers), len(fresh.providers), hosts*perHost, hosts)
	}
	for u, fe := range fresh.consumers {
		we, ok := followed.consumers[u]
		if !ok {
			t.Fatalf("consumer %s loaded, not followed", u)
		}
		if !reflect.DeepEqual(fe.c, we.c) || fe.modRev != we.modRev {
			t.Errorf("consumer %s: loaded %+v (rev %d), followed %+v (rev %d)", u, fe.c, fe.modRev, we.c, we.modRev)
		}
		for rp := range fe.c.Allocations {
			if e, ok := fresh.providers[rp]; !ok || unsafe.StringData(e.p.UUID) != unsafe.StringData(rp) {
				t.Errorf("consumer %s: provider uuid %s is not the indexed provider's string", u, rp)
			}
		}
	}
	if !reflect.DeepEqual(consumerLinks(fresh), consumerLinks(followed)) {
		t.Errorf("provider-consumer links differ: loaded %d providers, followed %d", len(fresh.rpConsumers), len(followed.rpConsumers))
	}
	for uuid, fe := range fresh.providers {
		if we := followed.providers[uuid]; we == nil || !reflect.DeepEqual(fe.p, we.p) {
			t.Errorf("provider %s differs", uuid)
		}
	}
	// The hosts are of one shape: their inventories are one map.
	invs := map[uintptr]bool{}
	for _, fe := range fresh.providers {
		invs[reflect.ValueOf(fe.p.Inventories).Pointer()] = true
	}
	if len(invs) != 1 {
		t.Errorf("%d distinct inventories maps among %d providers of one shape", len(invs), len(fresh.providers))
	}
	// Sharing: at most a few maps per flavor (one per decoding goroutine
	// that met it), not one per consumer.
	maps := map[uintptr]bool{}
	for _, fe := range fresh.consumers {
		for _, a := range fe.c.Allocations {
			maps[reflect.ValueOf(a.Resources).Pointer()] = true
		}
	}
	if len(maps) > 4*(len(flavors)+1) {
		t.Errorf("%d distinct resources maps among %d consumers of %d shapes", len(maps), len(fresh.consumers), len(flavors)+1)
	}
}
