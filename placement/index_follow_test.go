package placement

import (
	"reflect"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
)

// TestIndexFollowsClaimWrites: a provider record that changed only in
// usages (a claim's write) moves the used column in place and keeps the
// slot's links; a record that changed anything else is relinked. Either
// way the index ends as a fresh index loaded with the final records.
func TestIndexFollowsClaimWrites(t *testing.T) {
	keys := etcdschema.New("/berth")
	log := hclog.NewNullLogger()
	at := time.Date(2026, 11, 22, 5, 0, 0, 0, time.UTC)
	ix := newIndex()
	var rev int64
	put := func(ix *index, p *etcdschema.Provider) {
		rev++
		ix.applyEvents([]*clientv3.Event{putEvent(keys.Provider(p.UUID), etcdschema.MustEncode(p), rev)}, rev, keys, log)
	}
	p0 := bootProvider(0, 0, 1, at)
	p1 := bootProvider(1, 0, 1, at)
	put(ix, p0)
	put(ix, p1)
	slot := ix.st.providers[p0.UUID].slot
	before := ix.st.providers[p0.UUID].p

	claimed := bootProvider(0, 3, 2, at) // usages of three servers
	put(ix, claimed)
	vcpu := ix.st.cols[ix.st.classIDs[VCPU]]
	if got := vcpu.used[slot]; got != 3 {
		t.Errorf("VCPU used after a claim: %d, want 3", got)
	}
	if tree, ok := ix.st.trees[p0.UUID]; !ok || tree.many != nil || tree.one != slot {
		t.Errorf("a claim's write moved the provider's tree: %+v", tree)
	}
	e := ix.st.providers[p0.UUID]
	if e.p.Usages[VCPU] != 3 || e.p.Generation != 2 || e.modRev != rev {
		t.Errorf("indexed record after a claim: %+v (modRev %d, want %d)", e.p, e.modRev, rev)
	}
	if reflect.ValueOf(e.p.Inventories).Pointer() != reflect.ValueOf(before.Inventories).Pointer() {
		t.Errorf("a claim's record did not share the replaced record's inventories")
	}

	// Anything else changed: relinked.
	traited := bootProvider(0, 3, 3, at)
	traited.Traits = []string{"HW_CPU_X86_AVX2"}
	traited.Inventories[VCPU] = etcdschema.Inventory{Total: 8, MinUnit: 1, MaxUnit: 8, StepSize: 1, AllocationRatio: 1}
	put(ix, traited)
	if !ix.st.hasTrait(slot, "HW_CPU_X86_AVX2") || ix.st.hasTrait(slot, "COMPUTE_NET_ATTACH_INTERFACE") {
		t.Errorf("traits not relinked after a trait change")
	}
	if got := vcpu.capacity[slot]; got != 8 {
		t.Errorf("VCPU capacity after an inventory change: %d, want 8", got)
	}
	put(ix, bootProvider(1, 5, 2, at))

	// The same records loaded afresh give the same state.
	fresh := newIndex()
	put(fresh, traited)
	put(fresh, bootProvider(1, 5, 2, at))
	for _, uuid := range []string{p0.UUID, p1.UUID} {
		a, b := ix.st.providers[uuid], fresh.st.providers[uuid]
		if !reflect.DeepEqual(a.p, b.p) {
			t.Errorf("%s: followed %+v, loaded %+v", uuid, a.p, b.p)
		}
		for rc := range a.p.Inventories {
			ca, cb := ix.st.cols[ix.st.classIDs[rc]], fresh.st.cols[fresh.st.classIDs[rc]]
			if ca.capacity[a.slot] != cb.capacity[b.slot] || ca.used[a.slot] != cb.used[b.slot] ||
				ca.minUnit[a.slot] != cb.minUnit[b.slot] || ca.maxUnit[a.slot] != cb.maxUnit[b.slot] {
				t.Errorf("%s %s: followed and loaded columns differ", uuid, rc)
			}
		}
	}
	if len(ix.st.trees) != len(fresh.st.trees) {
		t.Errorf("%d trees followed, %d loaded", len(ix.st.trees), len(fresh.st.trees))
	}
}
