package placement

import (
	"fmt"
	"maps"
	"testing"
)

// A consumer set answers as a map of its uuids would through adds and
// removes, across the switch from its list to its map and at the list's
// edges (removing the last, the first, an absent uuid).
func TestConsumerSetActsAsASet(t *testing.T) {
	var cs consumerSet
	want := map[string]struct{}{}
	check := func(step string) {
		t.Helper()
		got := map[string]struct{}{}
		for u := range cs.all {
			if _, dup := got[u]; dup {
				t.Fatalf("%s: %s yielded twice", step, u)
			}
			got[u] = struct{}{}
		}
		if !maps.Equal(got, want) || cs.len() != len(want) {
			t.Fatalf("%s: set holds %d %v, want %d %v", step, cs.len(), got, len(want), want)
		}
		for u := range want {
			if !cs.has(u) {
				t.Fatalf("%s: has(%s) false", step, u)
			}
		}
		if cs.has("absent") {
			t.Fatalf("%s: has an absent uuid", step)
		}
	}
	add := func(u string) { cs.add(u); want[u] = struct{}{} }
	remove := func(u string) { cs.remove(u); delete(want, u) }
	for i := 0; i < consumerSetListMax; i++ {
		add(fmt.Sprintf("c%d", i))
	}
	check("list full")
	if cs.set != nil {
		t.Fatalf("a set of %d uuids is a map", consumerSetListMax)
	}
	remove(fmt.Sprintf("c%d", consumerSetListMax-1))
	remove("c0")
	remove("absent")
	check("list after removes")
	add("c0")
	add(fmt.Sprintf("c%d", consumerSetListMax-1))
	add("one more")
	check("past the list")
	if cs.set == nil || cs.list != nil {
		t.Fatalf("a set of %d uuids is not a map alone", cs.len())
	}
	for u := range maps.Clone(want) {
		remove(u)
	}
	check("emptied")
}
