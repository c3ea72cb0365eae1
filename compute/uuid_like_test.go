package compute

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// uuidLikeTheLongWay is isUUIDLike as it was before its allocation-free
// path: the reference that path must agree with.
func uuidLikeTheLongWay(s string) bool {
	v := strings.ToLower(strings.Trim(strings.NewReplacer("urn:", "", "uuid:", "").Replace(s), "{}"))
	v = strings.ReplaceAll(v, "-", "")
	if len(v) != 32 {
		return false
	}
	for _, c := range v {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// The allocation-free isUUIDLike and canonical answer as the long way
// does, for the spellings clients send and for strings built at random
// from the characters that matter.
func TestUUIDLikeFastPathAgrees(t *testing.T) {
	const id = "7b2e9d40-1f6a-4c1b-9a57-0b3c2d4e5f60"
	inputs := []string{id, strings.ToUpper(id), strings.ReplaceAll(id, "-", ""), "{" + id + "}",
		"urn:uuid:" + id, "uuurn:id:" + id, id[:35], id + "0", id[:35] + "g", "", "-", "7b2e9d40-1f6a-4c1b-9a57-0b3c2d4e5f6\u212a",
		"7b2e9d40-1f6a-4c1b-9a57-0b3c2d4e5f6" + "\u0130", "7b2e9d401f6a4c1b9a570b3c2d4e5f60----", "--7B2E9D401F6A4C1B9A570B3C2D4E5F60"}
	r := rand.New(rand.NewPCG(1, 2))
	const alphabet = "0123456789abcdefABCDEFgG-{}:urnid \u212a"
	runes := []rune(alphabet)
	for range 20000 {
		var b strings.Builder
		for range 28 + r.IntN(14) {
			b.WriteRune(runes[r.IntN(len(runes))])
		}
		inputs = append(inputs, b.String())
	}
	for _, s := range inputs {
		if got, want := isUUIDLike(s), uuidLikeTheLongWay(s); got != want {
			t.Errorf("isUUIDLike(%q) = %v, the long way %v", s, got, want)
		}
		if isCanonicalUUID(s) && (!uuidLikeTheLongWay(s) || strings.ToLower(s) != s || len(s) != 36 || s[8] != '-') {
			t.Errorf("isCanonicalUUID(%q) is true", s)
		}
	}
	if got := canonical(strings.ToUpper("{" + id + "}")); got != id {
		t.Errorf("canonical of a braced upper-case uuid: %q", got)
	}
	if got := canonical(id); got != id {
		t.Errorf("canonical(%q) = %q", id, got)
	}
}
