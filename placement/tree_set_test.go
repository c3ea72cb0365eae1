package placement

import (
	"slices"
	"testing"
)

// TestTreeSet: a tree grows from one inline slot to a map and back, and
// every step holds exactly the slots added and not removed.
func TestTreeSet(t *testing.T) {
	slotsOf := func(ts treeSet) []int32 {
		out := slices.Collect(ts.all())
		slices.Sort(out)
		return out
	}
	check := func(step string, ts treeSet, want ...int32) {
		t.Helper()
		if got := slotsOf(ts); !slices.Equal(got, want) || ts.len() != len(want) {
			t.Errorf("%s: slots %v (len %d), want %v", step, got, ts.len(), want)
		}
		if (ts.many == nil) != (len(want) == 1) {
			t.Errorf("%s: %d slots with map %v", step, len(want), ts.many != nil)
		}
	}
	ts := singleTree(7)
	check("single", ts, 7)
	check("re-add", ts.with(7), 7)
	if _, empty := ts.without(3); empty {
		t.Error("removing a slot the tree lacks emptied it")
	}
	ts = ts.with(0)
	check("two", ts, 0, 7)
	ts = ts.with(9)
	check("three", ts, 0, 7, 9)
	ts, empty := ts.without(7)
	check("minus 7", ts, 0, 9)
	if empty {
		t.Error("two slots left, reported empty")
	}
	ts, _ = ts.without(9)
	check("back to one", ts, 0)
	if _, empty := ts.without(0); !empty {
		t.Error("removing the last slot did not empty the tree")
	}
	n := 0
	for range singleTree(1).with(2).with(3).all() {
		n++
		break
	}
	if n != 1 {
		t.Errorf("all yielded %d slots after the range stopped", n)
	}
}
