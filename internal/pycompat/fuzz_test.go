package pycompat

import (
	"bytes"
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// jsonErrorForm is the shape of every JSONDecodeError text.
var jsonErrorForm = regexp.MustCompile(`^[A-Z][^\n]*: line [1-9][0-9]* column [1-9][0-9]* \(char [0-9]+\)$`)

// FuzzJSONError checks the CPython json emulation against encoding/json:
// it never panics; text encoding/json accepts, Python accepts too; text
// Python accepts that encoding/json refuses uses Python's extensions
// (NaN, Infinity); and every refusal is in Python's form.
func FuzzJSONError(f *testing.F) {
	for _, s := range []string{``, ` `, `{`, `{"a"`, `{"a":1,}`, `[1 2]`, `01`, `1.`, `-`, `"a\qb"`,
		`"a\u12G4"`, "\"a\tb\"", `{"a":1} {}`, "\ufeff{}", `NaN`, `[Infinity, -Infinity]`, `1e+`,
		`"\ud83d\ude00"`, `{"a": [1, 2, {"b": null}], "c": "\u00e9"}`, `[[[[[]]]]]`, "\xff", "\"\xc3(\""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		msg := JSONError(b)
		if !utf8.Valid(b) {
			if !strings.HasPrefix(msg, "'utf-8' codec can't decode ") {
				t.Fatalf("JSONError(%q) = %q, want a UTF-8 decode error", b, msg)
			}
			return
		}
		valid := json.Valid(b)
		switch {
		case valid && msg != "":
			t.Fatalf("encoding/json accepts %q, JSONError says %q", b, msg)
		case !valid && msg == "" && !bytes.Contains(b, []byte("NaN")) && !bytes.Contains(b, []byte("Infinity")):
			t.Fatalf("encoding/json refuses %q, JSONError accepts it without NaN or Infinity", b)
		case msg != "" && !jsonErrorForm.MatchString(msg):
			t.Fatalf("JSONError(%q) = %q, not in JSONDecodeError's form", b, msg)
		}
	})
}

// FuzzJSONKeyOrder checks the key order the validator walks objects in:
// for any text encoding/json decodes, JSONKeyOrder records, for every
// object of the decoded value, exactly that object's keys, so the
// validator walks the same value the handler decoded.
func FuzzJSONKeyOrder(f *testing.F) {
	for _, s := range []string{`{}`, `{"b": 1, "a": 2}`, `{"a": 1, "a": 2}`, `[{"x": {"y": [1, {"z": 0}]}}]`,
		`{"allocations": {"rp": {"resources": {"VCPU": 1}}}, "project_id": "p"}`, `"s"`, `1`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			return
		}
		if _, err := dec.Token(); err == nil {
			return // extra data: the API refuses it before validation
		}
		order := JSONKeyOrder(b)
		var walk func(v any, path []any)
		walk = func(v any, path []any) {
			switch x := v.(type) {
			case map[string]any:
				got := slices.Sorted(slices.Values(order[pathKey(path)]))
				if want := sortedKeys(x); !slices.Equal(got, want) {
					t.Fatalf("%q: keys at %v recorded as %q, decoded %q", b, path, got, want)
				}
				for k, e := range x {
					walk(e, append(slices.Clone(path), k))
				}
			case []any:
				for i, e := range x {
					walk(e, append(slices.Clone(path), i))
				}
			}
		}
		walk(v, nil)
	})
}
