package scheduler

import "testing"

func TestTypeAffinityFilter(t *testing.T) {
	checkFilter(t, TypeAffinityFilter{}, []filterCase{
		{"empty host passes", withFlavorInstances(), flavorSpec("1", "m1.tiny"), true},
		{"only the same flavor passes", withFlavorInstances("1", "1"), flavorSpec("1", "m1.tiny"), true},
		{"another flavor on the host fails", withFlavorInstances("1", "2"), flavorSpec("1", "m1.tiny"), false},
		{"matches on flavor id, not name", withFlavorInstances("2"), flavorSpec("1", "m1.tiny"), false},
	})
}
