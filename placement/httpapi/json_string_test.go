package httpapi

import (
	"bytes"
	"encoding/json"
	"testing"
)

// TestAppendJSONStringMatchesEncodingJSON puts every byte value at every
// place of strings of every length up to three words (so in a word the
// word-at-a-time check reads and in the tail it reads a byte at a time),
// also next to a second odd byte, and compares the bytes written with
// encoding/json's.
func TestAppendJSONStringMatchesEncodingJSON(t *testing.T) {
	base := "0123456789abcdef-ABCDEF_xyz:" // plain bytes
	for n := 0; n <= 24; n++ {
		plain := base[:n]
		for pos := 0; pos < n; pos++ {
			for c := 0; c < 256; c++ {
				for _, also := range []int{-1, 0x7f, 0x1f} {
					b := []byte(plain)
					b[pos] = byte(c)
					if also >= 0 && pos+1 < n {
						b[pos+1] = byte(also)
					}
					s := string(b)
					want, _ := json.Marshal(s)
					if got := appendJSONString([]byte("x"), s); !bytes.Equal(got[1:], want) || got[0] != 'x' {
						t.Fatalf("%q: wrote %s, encoding/json %s", s, got[1:], want)
					}
				}
			}
		}
	}
	for _, s := range []string{"", "VCPU", "00000000-0000-0000-0000-000000000001", "CUSTOM_A<&>", "a\u2028b", "\xff"} {
		want, _ := json.Marshal(s)
		if got := appendJSONString(nil, s); !bytes.Equal(got, want) {
			t.Errorf("%q: wrote %s, encoding/json %s", s, got, want)
		}
	}
}
