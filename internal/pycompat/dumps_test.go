package pycompat

import (
	"encoding/json"
	"testing"
)

type ordered [][2]any

func (o ordered) EachMember(f func(k string, v any)) {
	for _, m := range o {
		f(m[0].(string), m[1])
	}
}

// indexed is an ordered that Dumps walks by index (Members).
type indexed [][2]any

func (o indexed) EachMember(f func(k string, v any)) { ordered(o).EachMember(f) }
func (o indexed) Len() int                           { return len(o) }
func (o indexed) Member(i int) (string, any)         { return o[i][0].(string), o[i][1] }

// TestDumps: each answer is what python3's json.dumps wrote for the same
// value (ensure_ascii on for Dumps, off for DumpsUnicode).
func TestDumps(t *testing.T) {
	none := (*string)(nil)
	s := "x"
	cases := []struct {
		desc          string
		v             any
		ascii, unicod string
	}{
		{"plain <, > and &", "a<b>&c", `"a<b>&c"`, `"a<b>&c"`},
		{"non-ASCII, a line separator, past U+FFFF", "é\u2028😀", `"\u00e9\u2028\ud83d\ude00"`, "\"é\u2028😀\""},
		{"control characters and DEL", "\x00\x1f\x7f", `"\u0000\u001f\u007f"`, "\"\\u0000\\u001f\x7f\""},
		{"members in insertion order", ordered{{"b", 1}, {"a", []any{}}}, `{"b": 1, "a": []}`, `{"b": 1, "a": []}`},
		{"a map sorted as sort_keys", map[string]string{"b": "1", "a": "2"}, `{"a": "2", "b": "1"}`, `{"a": "2", "b": "1"}`},
		{"numbers, null, true", []any{1.0, 1e100, 10, nil, true, json.Number("1E2")}, `[1.0, 1e+100, 10, null, true, 100.0]`, `[1.0, 1e+100, 10, null, true, 100.0]`},
		{"a slice of objects and string pointers", []any{[]ordered{{{"k", none}}}, &s}, `[[{"k": null}], "x"]`, `[[{"k": null}], "x"]`},
		{"a nil object is {}", ordered(nil), `{}`, `{}`},
		{"members by index, a slice of them, a nil one", indexed{{"b", indexed{{"c", "d"}}}, {"a", []indexed{{{"x", 1}}, nil}}},
			`{"b": {"c": "d"}, "a": [{"x": 1}, {}]}`, `{"b": {"c": "d"}, "a": [{"x": 1}, {}]}`},
		{"escapes between plain runs", "ab\"c\\d\ne\u00e9f\x01g", `"ab\"c\\d\ne\u00e9f\u0001g"`, "\"ab\\\"c\\\\d\\ne\u00e9f\\u0001g\""},
		{"invalid UTF-8 as U+FFFD, as it always was", "a\xffb", `"a\ufffdb"`, "\"a\ufffdb\""},
		{"a []string", []string{"a", "é"}, `["a", "\u00e9"]`, `["a", "é"]`},
	}
	for _, c := range cases {
		if got := string(Dumps(c.v)); got != c.ascii {
			t.Errorf("%s: Dumps = %s, want %s", c.desc, got, c.ascii)
		}
		if got := string(DumpsUnicode(c.v)); got != c.unicod {
			t.Errorf("%s: DumpsUnicode = %s, want %s", c.desc, got, c.unicod)
		}
	}
}
