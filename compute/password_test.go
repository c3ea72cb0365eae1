package compute

import (
	"strings"
	"testing"
)

// A generated password is Nova's: 12 characters of its symbols, at
// least one of each group; and the draws behind it are uniform, so every
// symbol turns up about as often as any other.
func TestGeneratePassword(t *testing.T) {
	const n = 20000
	seen := map[rune]int{}
	for range n {
		p := generatePassword()
		if len(p) != 12 {
			t.Fatalf("%q: %d characters, want 12", p, len(p))
		}
		for _, g := range passwordSymbols {
			if !strings.ContainsAny(p, g) {
				t.Fatalf("%q has none of %q", p, g)
			}
		}
		for _, c := range p {
			if !strings.ContainsRune(allPasswordSymbols, c) {
				t.Fatalf("%q: %q is not a password symbol", p, c)
			}
			seen[c]++
		}
	}
	// Nine of twelve characters come from all 57 symbols, and one from
	// each group: a digit is likeliest (1/8 of a draw), a lowercase
	// letter least (1/25). Bounds at 3/4 and 4/3 of the expected counts
	// leave chance far outside them (each count is in the thousands).
	for _, g := range passwordSymbols {
		want := float64(n) * (9.0/float64(len(allPasswordSymbols)) + 1.0/float64(len(g)))
		for _, c := range g {
			if got := float64(seen[c]); got < want*3/4 || got > want*4/3 {
				t.Errorf("%q turned up %v times in %d passwords, want about %.0f", c, got, n, want)
			}
		}
	}
}

// below draws each value of [0, n) as often as any other, for n that do
// and do not divide 256.
func TestRandomBytesBelowIsUniform(t *testing.T) {
	var r randomBytes
	for _, n := range []int{1, 2, 3, 8, 12, 25, 57, 200, 256} {
		counts := make([]int, n)
		const per = 2000
		for range n * per {
			v := r.below(n)
			if v < 0 || v >= n {
				t.Fatalf("below(%d) = %d", n, v)
			}
			counts[v]++
		}
		for v, c := range counts {
			if c < per*3/4 || c > per*5/4 {
				t.Errorf("below(%d): %d drawn %d times, want about %d", n, v, c, per)
			}
		}
	}
}
