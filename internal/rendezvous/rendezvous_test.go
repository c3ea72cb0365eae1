package rendezvous

import "testing"

// The weights are the queue's protocol between processes (and the tie
// order of an instance's equal hosts): these are the values Berth has
// computed since the queue's ranking was built, and must stay so.
func TestWeightsStay(t *testing.T) {
	for _, tc := range []struct {
		item, holder string
		want         uint64
	}{
		{"6a0c9b1e-0000-4000-8000-000000000001", "1a2b3c", 15248119156405281084},
		{"", "", 5705415379283624141},
		{"ab", "c", 743874810762885073},
	} {
		if got := Weight(tc.item, tc.holder); got != tc.want {
			t.Errorf("Weight(%q, %q) = %d, want %d", tc.item, tc.holder, got, tc.want)
		}
	}
	if Weight("ab", "c") == Weight("a", "bc") {
		t.Error(`("ab", "c") and ("a", "bc") weigh the same: the separator is lost`)
	}
}
