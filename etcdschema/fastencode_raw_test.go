package etcdschema

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// FuzzAppendRawJSON: for any bytes, appendRawJSON (a cast's carried
// instance and alternates) writes exactly what json.Marshal writes for
// them as a json.RawMessage, or declines; it never writes bytes where
// json.Marshal fails.
func FuzzAppendRawJSON(f *testing.F) {
	for _, s := range []string{instanceJSON, instanceMappingJSON, buildJSON, `{ "a" : [1, 2] }`, `{"a":"<b>"}`,
		`{"a":"é"}`, `{"a":`, `"x"`, `"x" `, ` "x"`, `1`, `-0.5e+3`, `01`, `[1,]`, `{"a":1}{}`, `"a\"b"`, `"a\\"`,
		`"\u00zz"`, "\"\x01\"", `tru`, `null`, `[[[[]]]]`, strings.Repeat("[", 70) + strings.Repeat("]", 70),
		`{"a":"x y"}`, `{"a" :1}`, ``} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if len(raw) == 0 {
			return // a cast writes no member for empty bytes
		}
		want, wantErr := json.Marshal(json.RawMessage(raw))
		got, ok := appendRawJSON([]byte("prefix"), raw)
		switch {
		case ok && wantErr != nil:
			t.Errorf("%q: appendRawJSON wrote %q where json.Marshal fails: %v", raw, got, wantErr)
		case ok && !bytes.Equal(got, append([]byte("prefix"), want...)):
			t.Errorf("%q: appendRawJSON wrote %q, json.Marshal %q", raw, got, want)
		}
	})
}

// TestAppendRawJSONCopiesCompactRecords: a record Encode wrote (what a
// cast carries) is copied as it is; bytes with whitespace or not one
// valid value are json.Compact's to write or refuse.
func TestAppendRawJSONCopiesCompactRecords(t *testing.T) {
	for _, s := range []string{instanceJSON, instanceMappingJSON, buildJSON, `{ "a":1}`, `{"a":1} `, "[1,\n2]"} {
		got, ok := appendRawJSON(nil, []byte(s))
		var want bytes.Buffer
		if err := json.Compact(&want, []byte(s)); !ok || err != nil || !bytes.Equal(got, want.Bytes()) {
			t.Errorf("appendRawJSON(%q) = %q, %v; json.Compact %q, %v", s, got, ok, want.Bytes(), err)
		}
	}
	for _, s := range []string{`{"a":`, `{"a":1}{}`, `01`, `"a\"`, `[1,]`} {
		if got, ok := appendRawJSON(nil, []byte(s)); ok {
			t.Errorf("appendRawJSON took invalid JSON %q: %q", s, got)
		}
	}
}

// BenchmarkAppendRawJSON: a cast's carried instance appended by
// appendRawJSON against json.Compact (what it did for every record).
func BenchmarkAppendRawJSON(b *testing.B) {
	raw, out := []byte(instanceJSON), make([]byte, 0, 4096)
	b.Run("appendRawJSON", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if _, ok := appendRawJSON(out[:0], raw); !ok {
				b.Fatal("declined")
			}
		}
	})
	b.Run("json.Compact", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if err := json.Compact(bytes.NewBuffer(out[:0]), raw); err != nil {
				b.Fatal(err)
			}
		}
	})
}
