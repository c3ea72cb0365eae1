package pycompat

import (
	"encoding/json"
	"math"
	"testing"
)

func TestPyRepr(t *testing.T) {
	for _, tc := range []struct {
		in   any
		want string
	}{
		{json.Number("1"), "1"},
		{json.Number("-0"), "0"},
		{json.Number("1.0"), "1.0"},
		{json.Number("1e3"), "1000.0"},
		{json.Number("3.40282e+39"), "3.40282e+39"},
		{json.Number("1e16"), "1e+16"},
		{json.Number("0.00001"), "1e-05"},
		{"it's", `"it's"`},
		{"a\tb", `'a\tb'`},
		{nil, "None"},
		{true, "True"},
		{map[string]any{"b": []any{"x"}, "a": json.Number("2")}, "{'a': 2, 'b': ['x']}"},
	} {
		if got := Repr(tc.in); got != tc.want {
			t.Errorf("Repr(%#v) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

// TestLeaves holds the shared leaves to CPython 3's answers (each "want"
// was printed by python3: repr(json.loads(in)) and json.dumps(json.loads(in))
// for numbers, repr(s) for strings).
func TestLeaves(t *testing.T) {
	for _, tc := range []struct{ in, repr, json string }{
		{"123456789012345678901234567890", "123456789012345678901234567890", "123456789012345678901234567890"},
		{"-0", "0", "0"},
		{"1e400", "inf", "Infinity"},
		{"-1e400", "-inf", "-Infinity"},
		{"1e-400", "0.0", "0.0"},
		{"-1e-400", "-0.0", "-0.0"},
		{"1.50", "1.5", "1.5"},
		{"1e16", "1e+16", "1e+16"},
		{"0.0001", "0.0001", "0.0001"},
	} {
		if got := NumberRepr(json.Number(tc.in)); got != tc.repr {
			t.Errorf("NumberRepr(%s) = %s, want %s", tc.in, got, tc.repr)
		}
		if got := NumberJSON(json.Number(tc.in)); got != tc.json {
			t.Errorf("NumberJSON(%s) = %s, want %s", tc.in, got, tc.json)
		}
	}
	if got := FloatRepr(math.NaN()) + " " + FloatJSON(math.NaN()); got != "nan NaN" {
		t.Errorf("NaN: repr and json.dumps = %s, want nan NaN", got)
	}
	for _, tc := range []struct{ in, want string }{
		{"\ufffd", "'\ufffd'"}, // printable: repr leaves U+FFFD as it is
		{"\x00\x1f\x7f", `'\x00\x1f\x7f'`},
		{"\u0085\u00a0", `'\x85\xa0'`},
		{"\u200b\u2028", `'\u200b\u2028'`},
		{"\U000e0001", `'\U000e0001'`},
		{"\U0001F600", "'\U0001F600'"},
		{`a\b'`, `"a\\b'"`},
	} {
		if got := StrRepr(tc.in); got != tc.want {
			t.Errorf("StrRepr(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}
