package placement

import (
	"errors"
	"testing"

	"github.com/berth-project/berth/etcdschema"
)

// TestMoveAllocations: an allocation handed from one consumer to
// another keeps the provider's usage, a repeat is a no-op, and a move
// onto a consumer that holds something overwrites it (Nova's
// move_allocations on a revert: the destination's claim goes).
func TestMoveAllocations(t *testing.T) {
	s, _ := newStarted(t)
	ctx := testCtx(t)
	mkProvider(t, s, "src", "", map[string]etcdschema.Inventory{VCPU: inv(8)})
	mkProvider(t, s, "dst", "", map[string]etcdschema.Inventory{VCPU: inv(8)})
	usage := func(rp string) int64 {
		t.Helper()
		p, err := s.Provider(ctx, rp)
		if err != nil {
			t.Fatal(err)
		}
		return p.Usages[VCPU]
	}
	if err := s.PutAllocations(ctx, "instance", AllocationWrite{Allocations: alloc("src", map[string]int64{VCPU: 2}),
		ProjectID: "p", UserID: "u"}); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		desc      string
		from, to  string
		claimDest bool // the instance claims dst first (a resize's destination)
		moved     bool
		instance  map[string]int64
		migration map[string]int64
		src, dst  int64
	}{
		{desc: "instance to migration", from: "instance", to: "migration", moved: true,
			migration: map[string]int64{"src": 2}, src: 2},
		{desc: "again: nothing left to move", from: "instance", to: "migration",
			migration: map[string]int64{"src": 2}, src: 2},
		{desc: "back over the destination's claim", from: "migration", to: "instance", claimDest: true, moved: true,
			instance: map[string]int64{"src": 2}, src: 2, dst: 0},
	}
	for _, st := range steps {
		if st.claimDest {
			if err := s.PutAllocations(ctx, "instance", AllocationWrite{Allocations: alloc("dst", map[string]int64{VCPU: 3}),
				ProjectID: "p", UserID: "u"}); err != nil {
				t.Fatalf("%s: claim dst: %v", st.desc, err)
			}
			if usage("dst") != 3 {
				t.Fatalf("%s: dst claim not counted", st.desc)
			}
		}
		moved, err := s.MoveAllocations(ctx, st.from, st.to)
		if err != nil || moved != st.moved {
			t.Fatalf("%s: moved %v, %v; want %v", st.desc, moved, err, st.moved)
		}
		for consumer, want := range map[string]map[string]int64{"instance": st.instance, "migration": st.migration} {
			c, err := s.GetAllocations(ctx, consumer)
			if len(want) == 0 {
				if !errors.Is(err, ErrNotFound) {
					t.Errorf("%s: %s holds %v (%v), want nothing", st.desc, consumer, c, err)
				}
				continue
			}
			if err != nil {
				t.Fatalf("%s: %s: %v", st.desc, consumer, err)
			}
			for rp, n := range want {
				if got := c.Allocations[rp].Resources[VCPU]; got != n || len(c.Allocations) != len(want) {
					t.Errorf("%s: %s holds %v, want %v", st.desc, consumer, c.Allocations, want)
				}
			}
			if c.ProjectID != "p" || c.UserID != "u" {
				t.Errorf("%s: %s belongs to %s/%s", st.desc, consumer, c.ProjectID, c.UserID)
			}
		}
		if usage("src") != st.src || usage("dst") != st.dst {
			t.Errorf("%s: usages src %d dst %d, want %d %d", st.desc, usage("src"), usage("dst"), st.src, st.dst)
		}
	}
}
