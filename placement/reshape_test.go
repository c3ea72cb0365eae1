package placement

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
)

// rshSetup makes the usual starting point: a root with VCPU and DISK_GB,
// a child without inventory, consumer c1 holding VCPU 2 + DISK_GB 10 and
// c2 holding VCPU 4 on the root.
func rshSetup(t *testing.T, s *Service) {
	t.Helper()
	ctx := testCtx(t)
	mkProvider(t, s, "root", "", map[string]etcdschema.Inventory{
		VCPU:   {Total: 8, MinUnit: 1, MaxUnit: 8, StepSize: 1, AllocationRatio: 1},
		DiskGB: {Total: 100, MinUnit: 1, MaxUnit: 100, StepSize: 1, AllocationRatio: 1},
	})
	mkProvider(t, s, "child", "root", nil)
	if err := s.PutAllocations(ctx, "c1", AllocationWrite{Allocations: alloc("root", map[string]int64{VCPU: 2, DiskGB: 10}), ProjectID: "p", UserID: "u"}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutAllocations(ctx, "c2", AllocationWrite{Allocations: alloc("root", map[string]int64{VCPU: 4}), ProjectID: "p", UserID: "u"}); err != nil {
		t.Fatal(err)
	}
}

// moveVCPU is the reshape a virt driver makes: VCPU inventory and every
// VCPU allocation from root to child, at the generations of rshSetup.
func moveVCPU() Reshape {
	return Reshape{
		Inventories: map[string]ProviderInventories{
			"root":  {Generation: 3, Inventories: map[string]etcdschema.Inventory{DiskGB: {Total: 100, MinUnit: 1, MaxUnit: 100, StepSize: 1, AllocationRatio: 1}}},
			"child": {Generation: 0, Inventories: map[string]etcdschema.Inventory{VCPU: inv(8)}},
		},
		Allocations: map[string]AllocationWrite{
			"c1": {Allocations: map[string]ProviderAllocation{"root": {Resources: map[string]int64{DiskGB: 10}}, "child": {Resources: map[string]int64{VCPU: 2}}}, ProjectID: "p", UserID: "u", ConsumerGeneration: gen(1)},
			"c2": {Allocations: alloc("child", map[string]int64{VCPU: 4}), ProjectID: "p", UserID: "u", ConsumerGeneration: gen(1)},
		},
	}
}

// TestReshapeRules checks each of Placement's reshape rules in process,
// each case on a fresh etcd.
func TestReshapeRules(t *testing.T) {
	cases := []struct {
		desc   string
		change func(r *Reshape)
		want   error
	}{
		{"moves inventory and allocations", func(r *Reshape) {}, nil},
		{"unknown provider", func(r *Reshape) { r.Inventories["gone"] = ProviderInventories{} }, ErrInventoryProviderNotFound},
		{"stale provider generation", func(r *Reshape) { r.Inventories["child"] = ProviderInventories{Generation: 5} }, ErrGenerationConflict},
		{"stale consumer generation", func(r *Reshape) {
			w := r.Allocations["c2"]
			w.ConsumerGeneration = gen(9)
			r.Allocations["c2"] = w
		}, ErrConsumerGenerationConflict},
		{"existing consumer named as new", func(r *Reshape) {
			w := r.Allocations["c2"]
			w.ConsumerGeneration = nil
			r.Allocations["c2"] = w
		}, ErrConsumerGenerationConflict},
		{"allocation on a missing provider", func(r *Reshape) {
			r.Allocations["c3"] = AllocationWrite{Allocations: alloc("gone", map[string]int64{VCPU: 1}), ProjectID: "p", UserID: "u"}
		}, ErrProviderNotFound},
		{"unknown inventory class", func(r *Reshape) {
			r.Inventories["child"].Inventories["CUSTOM_NOPE"] = inv(1)
		}, ErrResourceClassNotFound},
		{"unknown allocation class wins over the capacity error it causes", func(r *Reshape) {
			r.Allocations["c3"] = AllocationWrite{Allocations: alloc("child", map[string]int64{"CUSTOM_NOPE": 1}), ProjectID: "p", UserID: "u"}
		}, ErrResourceClassNotFound},
		{"allocation over the new capacity", func(r *Reshape) {
			r.Inventories["child"].Inventories[VCPU] = inv(5)
		}, ErrInsufficientCapacity},
		{"allocation over the new max_unit", func(r *Reshape) {
			r.Inventories["child"].Inventories[VCPU] = etcdschema.Inventory{Total: 8, MinUnit: 1, MaxUnit: 3, StepSize: 1, AllocationRatio: 1}
		}, ErrInsufficientCapacity},
		{"allocation off the new step", func(r *Reshape) {
			r.Inventories["child"].Inventories[VCPU] = etcdschema.Inventory{Total: 8, MinUnit: 1, MaxUnit: 8, StepSize: 4, AllocationRatio: 1}
		}, ErrInsufficientCapacity},
		{"allocation ratio makes room", func(r *Reshape) {
			r.Inventories["child"].Inventories[VCPU] = etcdschema.Inventory{Total: 4, MinUnit: 1, MaxUnit: 8, StepSize: 1, AllocationRatio: 1.5}
		}, nil},
		{"reserved takes the room", func(r *Reshape) {
			r.Inventories["child"].Inventories[VCPU] = etcdschema.Inventory{Total: 8, Reserved: 3, MinUnit: 1, MaxUnit: 8, StepSize: 1, AllocationRatio: 1}
		}, ErrInsufficientCapacity},
		{"class removed while an untouched consumer uses it", func(r *Reshape) { delete(r.Allocations, "c2") }, ErrInventoryInUse},
		{"class removed without its allocations", func(r *Reshape) { r.Allocations = nil }, ErrInventoryInUse},
		{"allocation left on a class that goes", func(r *Reshape) {
			w := r.Allocations["c2"]
			w.Allocations = alloc("root", map[string]int64{VCPU: 4})
			r.Allocations["c2"] = w
		}, ErrInventoryInUse},
		{"a shrinking usage must still fit the shrunk inventory", func(r *Reshape) {
			// Root keeps VCPU but at 4; c1 2 + c2 3 = 5 is less than the 6
			// before, and still too much, as Placement sees it.
			*r = Reshape{
				Inventories: map[string]ProviderInventories{"root": {Generation: 3, Inventories: map[string]etcdschema.Inventory{VCPU: inv(4), DiskGB: inv(100)}}},
				Allocations: map[string]AllocationWrite{
					"c2": {Allocations: alloc("root", map[string]int64{VCPU: 3}), ProjectID: "p", UserID: "u", ConsumerGeneration: gen(1)},
				},
			}
		}, ErrInsufficientCapacity},
		{"a shrunk inventory under allocations the reshape leaves alone", func(r *Reshape) {
			*r = Reshape{Inventories: map[string]ProviderInventories{"root": {Generation: 3, Inventories: map[string]etcdschema.Inventory{VCPU: inv(4), DiskGB: inv(100)}}}}
		}, nil},
		{"allocations emptied instead of moved", func(r *Reshape) {
			w := r.Allocations["c2"]
			w.Allocations = nil
			r.Allocations["c2"] = w
		}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			s, _ := newStarted(t)
			rshSetup(t, s)
			r := moveVCPU()
			tc.change(&r)
			_, err := s.Reshape(testCtx(t), r)
			if (tc.want == nil) != (err == nil) || (tc.want != nil && !errors.Is(err, tc.want)) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			assertConsistent(t, s)
		})
	}
}

// TestReshapeResult checks what a successful reshape leaves: inventories,
// usages, allocations, generations counted as Placement counts them, and
// an index that has followed all of it.
func TestReshapeResult(t *testing.T) {
	s, _ := newStarted(t)
	ctx := testCtx(t)
	rshSetup(t, s)
	rev, err := s.Reshape(ctx, moveVCPU())
	if err != nil {
		t.Fatal(err)
	}
	root, _ := s.Provider(ctx, "root")
	child, _ := s.Provider(ctx, "child")
	// Interim inventory, allocations, final inventory: +3 each.
	if root.Generation != 6 || child.Generation != 3 {
		t.Errorf("generations root %d child %d, want 6 and 3", root.Generation, child.Generation)
	}
	if _, ok := root.Inventories[VCPU]; ok || len(root.Inventories) != 1 {
		t.Errorf("root inventories %v", root.Inventories)
	}
	if !reflect.DeepEqual(root.Usages, map[string]int64{DiskGB: 10}) || !reflect.DeepEqual(child.Usages, map[string]int64{VCPU: 6}) {
		t.Errorf("usages root %v child %v", root.Usages, child.Usages)
	}
	c2, err := s.GetAllocations(ctx, "c2")
	if err != nil || c2.Generation != 2 || !reflect.DeepEqual(c2.Allocations, map[string]etcdschema.ConsumerAllocation{"child": {Resources: map[string]int64{VCPU: 4}}}) {
		t.Errorf("c2 %+v %v", c2, err)
	}
	if err := s.WaitForRevision(ctx, rev); err != nil {
		t.Fatal(err)
	}
	// The index saw the move: VCPU comes from the child now, and only 2
	// are left there.
	cands, err := s.AllocationCandidates(ctx, CandidateQuery{Groups: []RequestGroup{{Resources: map[string]int64{VCPU: 2}}}})
	if err != nil || len(cands.AllocationRequests) != 1 {
		t.Fatalf("candidates %+v %v", cands, err)
	}
	if _, ok := cands.AllocationRequests[0].Allocations["child"]; !ok {
		t.Errorf("VCPU 2 not placed on the child: %+v", cands.AllocationRequests[0])
	}
	if cands, _ := s.AllocationCandidates(ctx, CandidateQuery{Groups: []RequestGroup{{Resources: map[string]int64{VCPU: 3}}}}); len(cands.AllocationRequests) != 0 {
		t.Errorf("VCPU 3 fits after the move: %+v", cands.AllocationRequests)
	}
	s.idx.mu.RLock()
	onRoot := linked(s.idx.st, "root", "c2")
	onChild := linked(s.idx.st, "child", "c2")
	s.idx.mu.RUnlock()
	if onRoot || !onChild {
		t.Errorf("index consumers of c2: on root %v, on child %v", onRoot, onChild)
	}
	// A provider whose new inventory is empty and whose allocations do not
	// change moves by one; one whose allocations change by two.
	rev, err = s.Reshape(ctx, Reshape{
		Inventories: map[string]ProviderInventories{"child": {Generation: 3}},
		Allocations: map[string]AllocationWrite{
			"c1": {Allocations: alloc("root", map[string]int64{DiskGB: 10}), ProjectID: "p", UserID: "u", ConsumerGeneration: gen(2)},
			"c2": {ProjectID: "p", UserID: "u", ConsumerGeneration: gen(2)},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	child, _ = s.Provider(ctx, "child")
	if child.Generation != 5 || len(child.Inventories) != 0 || len(child.Usages) != 0 {
		t.Errorf("child after emptying: %+v", child)
	}
	if _, err := s.GetAllocations(ctx, "c2"); !errors.Is(err, ErrNotFound) {
		t.Errorf("c2 with no allocations still stored: %v", err)
	}
	if err := s.WaitForRevision(ctx, rev); err != nil {
		t.Fatal(err)
	}
	if cands, _ := s.AllocationCandidates(ctx, CandidateQuery{Groups: []RequestGroup{{Resources: map[string]int64{VCPU: 1}}}}); len(cands.AllocationRequests) != 0 {
		t.Errorf("VCPU still offered after its inventory went: %+v", cands.AllocationRequests)
	}
	assertConsistent(t, s)
}

// etcdSnapshot is every key under the test prefix with its value and mod
// revision, and the store revision.
func etcdSnapshot(t *testing.T, cli *clientv3.Client) (map[string]string, int64) {
	t.Helper()
	resp, err := cli.Get(testCtx(t), "/test/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, kv := range resp.Kvs {
		out[string(kv.Key)] = fmt.Sprintf("%d %s", kv.ModRevision, kv.Value)
	}
	return out, resp.Header.Revision
}

// TestReshapeIsAtomic: a reshape whose last consumer fails changes
// nothing at all in etcd, and a successful one is a single transaction.
func TestReshapeIsAtomic(t *testing.T) {
	s, cli := newStarted(t)
	ctx := testCtx(t)
	rshSetup(t, s)
	// "zz" sorts after every other consumer, so everything else has been
	// planned when it fails.
	lastFails := map[string]AllocationWrite{
		"stale generation": {Allocations: alloc("root", map[string]int64{DiskGB: 1}), ProjectID: "p", UserID: "u", ConsumerGeneration: gen(4)},
		"over capacity":    {Allocations: alloc("root", map[string]int64{DiskGB: 91}), ProjectID: "p", UserID: "u"},
		"missing provider": {Allocations: alloc("gone", map[string]int64{DiskGB: 1}), ProjectID: "p", UserID: "u"},
		"no inventory":     {Allocations: alloc("child", map[string]int64{DiskGB: 1}), ProjectID: "p", UserID: "u"},
	}
	for desc, w := range lastFails {
		before, rev := etcdSnapshot(t, cli)
		r := moveVCPU()
		r.Allocations["zz"] = w
		if _, err := s.Reshape(ctx, r); err == nil {
			t.Fatalf("%s: reshape succeeded", desc)
		}
		after, rev2 := etcdSnapshot(t, cli)
		if rev2 != rev || !reflect.DeepEqual(before, after) {
			t.Fatalf("%s: a failed reshape changed etcd (revision %d → %d)", desc, rev, rev2)
		}
	}
	before, rev := etcdSnapshot(t, cli)
	r := moveVCPU()
	r.Allocations["zz"] = AllocationWrite{Allocations: alloc("root", map[string]int64{DiskGB: 5}), ProjectID: "p", UserID: "u"}
	got, err := s.Reshape(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	after, rev2 := etcdSnapshot(t, cli)
	if got != rev+1 || rev2 != rev+1 {
		t.Fatalf("reshape wrote at revision %d, store at %d, before %d: not one transaction", got, rev2, rev)
	}
	changed := 0
	for k, v := range after {
		if before[k] != v {
			changed++
			if !strings.HasPrefix(v, fmt.Sprint(got)+" ") {
				t.Errorf("%s changed outside the reshape's revision: %s", k, v[:20])
			}
		}
	}
	// root, child, c1, c2 and the new zz.
	if changed != 5 {
		t.Errorf("%d keys changed, want 5", changed)
	}
	assertConsistent(t, s)
}

// TestReshapeRacesAllocation runs a reshape that shrinks a provider
// against an allocation that needs the old size, both at once: exactly one
// wins, and the provider is never over its capacity.
func TestReshapeRacesAllocation(t *testing.T) {
	s, _ := newStarted(t)
	ctx := testCtx(t)
	wins := map[string]int{}
	for i := 0; i < 20; i++ {
		rp, a, b := fmt.Sprintf("rp%d", i), fmt.Sprintf("a%d", i), fmt.Sprintf("b%d", i)
		mkProvider(t, s, rp, "", map[string]etcdschema.Inventory{VCPU: inv(8)})
		if err := s.PutAllocations(ctx, a, AllocationWrite{Allocations: alloc(rp, map[string]int64{VCPU: 4}), ProjectID: "p", UserID: "u"}); err != nil {
			t.Fatal(err)
		}
		r := Reshape{
			Inventories: map[string]ProviderInventories{rp: {Generation: 2, Inventories: map[string]etcdschema.Inventory{VCPU: inv(4)}}},
			Allocations: map[string]AllocationWrite{a: {Allocations: alloc(rp, map[string]int64{VCPU: 4}), ProjectID: "p", UserID: "u", ConsumerGeneration: gen(1)}},
		}
		start := make(chan struct{})
		var wg sync.WaitGroup
		var reshapeErr, putErr error
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-start
			_, reshapeErr = s.Reshape(ctx, r)
		}()
		go func() {
			defer wg.Done()
			<-start
			putErr = s.PutAllocations(ctx, b, AllocationWrite{Allocations: alloc(rp, map[string]int64{VCPU: 4}), ProjectID: "p", UserID: "u"})
		}()
		close(start)
		wg.Wait()
		switch {
		case reshapeErr == nil && errors.Is(putErr, ErrInsufficientCapacity):
			wins["reshape"]++
		case putErr == nil && errors.Is(reshapeErr, ErrGenerationConflict):
			wins["allocation"]++
		default:
			t.Fatalf("round %d: reshape %v, allocation %v: not exactly one winner", i, reshapeErr, putErr)
		}
		p, _ := s.Provider(ctx, rp)
		if p.Usages[VCPU] > p.Inventories[VCPU].Capacity() {
			t.Fatalf("round %d: usage %d over capacity %d", i, p.Usages[VCPU], p.Inventories[VCPU].Capacity())
		}
	}
	t.Logf("winners over 20 rounds: %v", wins)
	assertConsistent(t, s)
}

// TestReshapeRetriesAnUnguardedProvider: a provider the reshape touches
// only through a consumer's old allocation has no caller generation, so a
// concurrent claim there makes the reshape re-read and retry, and both
// writes land without losing either's usage.
func TestReshapeRetriesAnUnguardedProvider(t *testing.T) {
	s, _ := newStarted(t)
	ctx := testCtx(t)
	for i := 0; i < 10; i++ {
		from, to, a := fmt.Sprintf("from%d", i), fmt.Sprintf("to%d", i), fmt.Sprintf("a%d", i)
		mkProvider(t, s, from, "", map[string]etcdschema.Inventory{VCPU: inv(64)})
		mkProvider(t, s, to, "", nil)
		if err := s.PutAllocations(ctx, a, AllocationWrite{Allocations: alloc(from, map[string]int64{VCPU: 4}), ProjectID: "p", UserID: "u"}); err != nil {
			t.Fatal(err)
		}
		r := Reshape{
			Inventories: map[string]ProviderInventories{to: {Generation: 0, Inventories: map[string]etcdschema.Inventory{VCPU: inv(8)}}},
			Allocations: map[string]AllocationWrite{a: {Allocations: alloc(to, map[string]int64{VCPU: 4}), ProjectID: "p", UserID: "u", ConsumerGeneration: gen(1)}},
		}
		start := make(chan struct{})
		var wg sync.WaitGroup
		errs := make([]error, 5)
		for j := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				if j == 0 {
					_, errs[j] = s.Reshape(ctx, r)
					return
				}
				errs[j] = s.PutAllocations(ctx, fmt.Sprintf("b%d-%d", i, j), AllocationWrite{Allocations: alloc(from, map[string]int64{VCPU: 1}), ProjectID: "p", UserID: "u"})
			}()
		}
		close(start)
		wg.Wait()
		for j, err := range errs {
			if err != nil {
				t.Fatalf("round %d writer %d: %v", i, j, err)
			}
		}
		p, _ := s.Provider(ctx, from)
		if p.Usages[VCPU] != 4 {
			t.Fatalf("round %d: %s usage %d, want the 4 claims of 1", i, from, p.Usages[VCPU])
		}
	}
	assertConsistent(t, s)
}

// assertConsistent checks that every provider's recorded usages are the
// sum of the consumers' allocations on it, reading etcd at one revision.
func assertConsistent(t *testing.T, s *Service) {
	t.Helper()
	ctx := testCtx(t)
	resp, err := s.cli.Txn(ctx).Then(
		clientv3.OpGet(s.keys.Providers(), clientv3.WithPrefix()),
		clientv3.OpGet(s.keys.Consumers(), clientv3.WithPrefix()),
	).Commit()
	if err != nil {
		t.Fatal(err)
	}
	sums := map[string]map[string]int64{}
	for _, kv := range resp.Responses[1].GetResponseRange().Kvs {
		c := &etcdschema.Consumer{}
		if err := etcdschema.Decode(string(kv.Key), kv.Value, c); err != nil {
			t.Fatal(err)
		}
		if len(c.Allocations) == 0 {
			t.Errorf("consumer %s stored without allocations", c.UUID)
		}
		for rp, a := range c.Allocations {
			if sums[rp] == nil {
				sums[rp] = map[string]int64{}
			}
			for rc, n := range a.Resources {
				sums[rp][rc] += n
			}
		}
	}
	for _, kv := range resp.Responses[0].GetResponseRange().Kvs {
		p := &etcdschema.Provider{}
		if err := etcdschema.Decode(string(kv.Key), kv.Value, p); err != nil {
			t.Fatal(err)
		}
		want := sums[p.UUID]
		if want == nil {
			want = map[string]int64{}
		}
		got := p.Usages
		if got == nil {
			got = map[string]int64{}
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("provider %s usages %v, allocations sum to %v", p.UUID, got, want)
		}
	}
}
