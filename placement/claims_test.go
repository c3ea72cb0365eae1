package placement

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/etcdtest"
)

func TestPutAllocationsRules(t *testing.T) {
	s, _ := newStarted(t)
	ctx := testCtx(t)
	stepped := etcdschema.Inventory{Total: 16, MinUnit: 2, MaxUnit: 8, StepSize: 2, AllocationRatio: 1}
	mkProvider(t, s, "rp", "", map[string]etcdschema.Inventory{
		VCPU:     {Total: 4, Reserved: 1, MinUnit: 1, MaxUnit: 4, StepSize: 1, AllocationRatio: 2}, // capacity 6
		MemoryMB: stepped,
	})
	cases := []struct {
		desc     string
		consumer string
		w        AllocationWrite
		want     error
	}{
		{"fits", "c1", AllocationWrite{Allocations: alloc("rp", map[string]int64{VCPU: 4})}, nil},
		{"over capacity", "c2", AllocationWrite{Allocations: alloc("rp", map[string]int64{VCPU: 3})}, ErrInsufficientCapacity},
		{"exactly the rest", "c2", AllocationWrite{Allocations: alloc("rp", map[string]int64{VCPU: 2})}, nil},
		{"below min_unit", "c3", AllocationWrite{Allocations: alloc("rp", map[string]int64{MemoryMB: 1})}, ErrInsufficientCapacity},
		{"above max_unit", "c3", AllocationWrite{Allocations: alloc("rp", map[string]int64{MemoryMB: 10})}, ErrInsufficientCapacity},
		{"off step", "c3", AllocationWrite{Allocations: alloc("rp", map[string]int64{MemoryMB: 3})}, ErrInsufficientCapacity},
		{"on step", "c3", AllocationWrite{Allocations: alloc("rp", map[string]int64{MemoryMB: 4})}, nil},
		{"no such class", "c4", AllocationWrite{Allocations: alloc("rp", map[string]int64{DiskGB: 1})}, ErrInsufficientCapacity},
		{"no such provider", "c4", AllocationWrite{Allocations: alloc("nope", map[string]int64{VCPU: 1})}, ErrProviderNotFound},
		{"existing consumer without generation", "c1", AllocationWrite{Allocations: alloc("rp", map[string]int64{VCPU: 1})}, ErrConsumerGenerationConflict},
		{"stale generation", "c1", AllocationWrite{Allocations: alloc("rp", map[string]int64{VCPU: 1}), ConsumerGeneration: gen(7)}, ErrConsumerGenerationConflict},
		{"generation for a new consumer", "c9", AllocationWrite{Allocations: alloc("rp", map[string]int64{VCPU: 1}), ConsumerGeneration: gen(1)}, ErrConsumerGenerationConflict},
		{"replace own allocation", "c1", AllocationWrite{Allocations: alloc("rp", map[string]int64{VCPU: 3}), ConsumerGeneration: gen(1)}, nil},
		{"zero amount", "c5", AllocationWrite{Allocations: alloc("rp", map[string]int64{VCPU: 0})}, ErrInvalid},
	}
	for _, tc := range cases {
		err := s.PutAllocations(ctx, tc.consumer, tc.w)
		if (tc.want == nil) != (err == nil) || (tc.want != nil && !errors.Is(err, tc.want)) {
			t.Errorf("%s: got %v, want %v", tc.desc, err, tc.want)
		}
	}
	p, _ := s.Provider(ctx, "rp")
	if p.Usages[VCPU] != 5 || p.Usages[MemoryMB] != 4 {
		t.Fatalf("usages %v, want VCPU 5 MEMORY_MB 4", p.Usages)
	}
	c, err := s.GetAllocations(ctx, "c1")
	if err != nil || c.Generation != 2 || c.Allocations["rp"].Resources[VCPU] != 3 {
		t.Fatalf("c1: %+v %v", c, err)
	}
	// An empty write removes the consumer and frees its usage.
	if err := s.PutAllocations(ctx, "c1", AllocationWrite{ConsumerGeneration: gen(2)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetAllocations(ctx, "c1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("c1 after wipe: %v", err)
	}
	if err := s.DeleteAllocations(ctx, "c2"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteAllocations(ctx, "c2"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
	p, _ = s.Provider(ctx, "rp")
	if p.Usages[VCPU] != 0 || p.Usages[MemoryMB] != 4 {
		t.Fatalf("usages after frees %v", p.Usages)
	}
}

func TestOverCapacityAllowedWhenNotWorse(t *testing.T) {
	s, _ := newStarted(t)
	ctx := testCtx(t)
	mkProvider(t, s, "rp", "", map[string]etcdschema.Inventory{VCPU: inv(8)})
	if err := s.PutAllocations(ctx, "c", AllocationWrite{Allocations: alloc("rp", map[string]int64{VCPU: 8})}); err != nil {
		t.Fatal(err)
	}
	if err := s.UpdateProvider(ctx, "rp", func(p *etcdschema.Provider) error {
		i := p.Inventories[VCPU]
		i.Total = 4
		p.Inventories[VCPU] = i
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// Shrinking an allocation on an over-committed provider is allowed.
	if err := s.PutAllocations(ctx, "c", AllocationWrite{Allocations: alloc("rp", map[string]int64{VCPU: 6}), ConsumerGeneration: gen(1)}); err != nil {
		t.Fatalf("shrink: %v", err)
	}
	if err := s.PutAllocations(ctx, "d", AllocationWrite{Allocations: alloc("rp", map[string]int64{VCPU: 1})}); !errors.Is(err, ErrInsufficientCapacity) {
		t.Fatalf("grow: %v", err)
	}
}

func TestPutAllocationsMultiIsAtomic(t *testing.T) {
	s, _ := newStarted(t)
	ctx := testCtx(t)
	mkProvider(t, s, "rp", "", map[string]etcdschema.Inventory{VCPU: inv(4)})
	err := s.PutAllocationsMulti(ctx, map[string]AllocationWrite{
		"a": {Allocations: alloc("rp", map[string]int64{VCPU: 2})},
		"b": {Allocations: alloc("rp", map[string]int64{VCPU: 3})},
	})
	if !errors.Is(err, ErrInsufficientCapacity) {
		t.Fatalf("together over capacity: %v", err)
	}
	if err := s.PutAllocationsMulti(ctx, map[string]AllocationWrite{
		"a": {Allocations: alloc("rp", map[string]int64{VCPU: 2})},
		"b": {Allocations: alloc("rp", map[string]int64{VCPU: 2})},
	}); err != nil {
		t.Fatal(err)
	}
	p, _ := s.Provider(ctx, "rp")
	if p.Usages[VCPU] != 4 || p.Generation != 2 {
		t.Fatalf("usage %v gen %d", p.Usages, p.Generation)
	}
	many := map[string]AllocationWrite{}
	for i := 0; i <= maxTxnOps; i++ {
		many[fmt.Sprintf("m%03d", i)] = AllocationWrite{}
	}
	if err := s.PutAllocationsMulti(ctx, many); !errors.Is(err, ErrTooManyOps) {
		t.Fatalf("too many: %v", err)
	}
}

// A claim is planned first from the index; when the index is behind etcd
// the compare fails and the claim is decided on a fresh read, so a stale
// index never over-commits, never hides a consumer, and never refuses a
// claim etcd would take.
func TestClaimFromAStaleIndexFallsBackToEtcd(t *testing.T) {
	cli := etcdtest.Client(t)
	log := hclog.NewNullLogger()
	keys := etcdschema.New("/test")
	stale := New(cli, keys, log)
	watchCtx, stopWatch := context.WithCancel(context.Background())
	defer stopWatch()
	if err := stale.Start(watchCtx); err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	mkProvider(t, stale, "rp", "", map[string]etcdschema.Inventory{VCPU: inv(4)})
	mkProvider(t, stale, "rp2", "", map[string]etcdschema.Inventory{VCPU: inv(4)})
	syncIdx(t, stale)
	stopWatch()                  // from here on the index sees nothing
	fresh := New(cli, keys, log) // store only, no index
	if err := fresh.PutAllocations(ctx, "c1", AllocationWrite{Allocations: alloc("rp", map[string]int64{VCPU: 4})}); err != nil {
		t.Fatal(err)
	}
	if err := fresh.PutAllocations(ctx, "c3", AllocationWrite{Allocations: alloc("rp2", map[string]int64{VCPU: 3})}); err != nil {
		t.Fatal(err)
	}
	// The index thinks rp is empty: the claim must still be refused.
	err := stale.PutAllocations(ctx, "c2", AllocationWrite{Allocations: alloc("rp", map[string]int64{VCPU: 1})})
	if !errors.Is(err, ErrInsufficientCapacity) {
		t.Fatalf("claim on a provider full in etcd but empty in the index: %v, want ErrInsufficientCapacity", err)
	}
	// The index does not know c3: a new claim for it must not replace it.
	err = stale.PutAllocations(ctx, "c3", AllocationWrite{Allocations: alloc("rp2", map[string]int64{VCPU: 1})})
	if !errors.Is(err, ErrConsumerGenerationConflict) {
		t.Fatalf("claim for a consumer only etcd knows: %v, want ErrConsumerGenerationConflict", err)
	}
	// Nor does it know c1: deleting it must work from etcd's record.
	if err := stale.DeleteAllocations(ctx, "c1"); err != nil {
		t.Fatalf("delete a consumer the index never saw: %v", err)
	}
	// rp is empty again in etcd, as the (stale) index says: a claim
	// planned from the index goes through.
	if err := stale.PutAllocations(ctx, "c2", AllocationWrite{Allocations: alloc("rp", map[string]int64{VCPU: 4})}); err != nil {
		t.Fatalf("claim after the free: %v", err)
	}
	for rp, want := range map[string]int64{"rp": 4, "rp2": 3} {
		p, err := fresh.Provider(ctx, rp)
		if err != nil {
			t.Fatal(err)
		}
		if p.Usages[VCPU] != want {
			t.Errorf("%s: VCPU used %d, want %d", rp, p.Usages[VCPU], want)
		}
	}
}

// TestPlannedProviderRecordIsTheClonedOne: a claim's next provider record
// shares the unchanged parts of the one it replaces instead of cloning
// them, and is planned from the indexed record without normalizing a
// copy of it; the record it puts is byte for byte the one a clone of the
// normalized copy gave (nil and empty traits, aggregates and maps
// included), and the record it planned from is left as it was.
func TestPlannedProviderRecordIsTheClonedOne(t *testing.T) {
	s := New(nil, etcdschema.New("/test"), hclog.NewNullLogger())
	at := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	s.now = func() time.Time { return at }
	invs := map[string]etcdschema.Inventory{VCPU: inv(8), MemoryMB: inv(1024)}
	for i, p := range []etcdschema.Provider{
		// As the index holds them: a root always, nil or empty parts as
		// decoded (claims write traits and aggregates null when empty).
		{UUID: "rp", RootProviderUUID: "rp", Inventories: invs},
		{UUID: "rp", RootProviderUUID: "rp", Inventories: invs, Traits: []string{}, Aggregates: []string{}, Usages: map[string]int64{}},
		{UUID: "rp", RootProviderUUID: "root", ParentProviderUUID: "root", Inventories: invs, Traits: []string{"T1", "T2"},
			Aggregates: []string{"a"}, Usages: map[string]int64{VCPU: 3, MemoryMB: 5}},
		{UUID: "rp", RootProviderUUID: "rp", Inventories: invs, Usages: map[string]int64{VCPU: 1}},
	} {
		before := etcdschema.MustEncode(&p)
		rd := &claimRead{consumers: map[string]*etcdschema.Consumer{"c": nil}, consumerRevs: map[string]int64{},
			providers: map[string]*storedProvider{"rp": {p: &p, modRev: 7}}}
		writes := map[string]AllocationWrite{"c": {Allocations: alloc("rp", map[string]int64{VCPU: 1}), ProjectID: "p", UserID: "u"}}
		plan, err := s.planClaim(rd, []string{"c"}, writes, ClaimOptions{}, false)
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		// What the plan wrote when it cloned a normalized copy.
		norm := p
		normalizeProvider(&norm)
		want := norm.Clone()
		want.Usages[VCPU]++
		want.Generation++
		want.UpdatedAt = at
		if got, wantJSON := string(plan.ops[1].GetRequestPut().GetValue()), etcdschema.MustEncode(want); got != wantJSON {
			t.Errorf("case %d: put\n%s\nwant (cloned)\n%s", i, got, wantJSON)
		}
		if after := etcdschema.MustEncode(&p); after != before {
			t.Errorf("case %d: the record planned from changed:\n%s\nwas\n%s", i, after, before)
		}
	}
}
