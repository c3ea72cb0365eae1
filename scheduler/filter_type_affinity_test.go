package scheduler

import "testing"

func TestTypeAffinityFilter(t *testing.T) {
	checkFilter(t, TypeAffinityFilter{}, []filterCase{
		{"empty host passes", withFlavorInstances(), flavorCycle("1", "m1.tiny"), passes},
		{"only the same flavor passes", withFlavorInstances("1", "1"), flavorCycle("1", "m1.tiny"), passes},
		{"another flavor on the host fails", withFlavorInstances("1", "2"), flavorCycle("1", "m1.tiny"), "runs flavor 2 (instance ib), not flavor 1"},
		{"matches on flavor id, not name", withFlavorInstances("2"), flavorCycle("1", "m1.tiny"), "runs flavor 2 (instance ia), not flavor 1"},
	})
}
