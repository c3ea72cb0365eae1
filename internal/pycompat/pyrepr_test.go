package pycompat

import (
	"encoding/json"
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
