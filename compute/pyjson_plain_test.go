package compute

import (
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// randomJSONish is a document of JSON's pieces put together at random:
// mostly valid, often not (a piece dropped, doubled or swapped), with
// escapes, non-ASCII, control bytes and odd numbers among them.
func randomJSONish(r *rand.Rand, depth int) string {
	atoms := []string{`"a"`, `"server"`, `"x y"`, `""`, `"\u00e9"`, `"é"`, `"a\"b"`, "\"\t\"", `"\ud800"`, "\"\xff\"",
		`0`, `-0`, `1`, `12`, `-3.5`, `1e3`, `1E+2`, `2.5e-1`, `01`, `1.`, `.5`, `-`, `1e`, `+1`,
		`true`, `false`, `null`, `tru`, `nul`, `NaN`, `Infinity`}
	if depth > 3 || r.IntN(3) == 0 {
		return atoms[r.IntN(len(atoms))]
	}
	ws := []string{"", "", " ", "\n", "\t ", "\r\n"}
	w := func() string { return ws[r.IntN(len(ws))] }
	var b strings.Builder
	n := r.IntN(4)
	if r.IntN(2) == 0 {
		b.WriteString("{" + w())
		for i := range n {
			if i > 0 {
				b.WriteString(w() + "," + w())
			}
			keys := []string{`"a"`, `"b"`, `"a"`, `"min_count"`, `1`, `"k\u0041"`}
			b.WriteString(keys[r.IntN(len(keys))] + w() + ":" + w() + randomJSONish(r, depth+1))
		}
		b.WriteString(w() + "}")
	} else {
		b.WriteString("[" + w())
		for i := range n {
			if i > 0 {
				b.WriteString(w() + "," + w())
			}
			b.WriteString(randomJSONish(r, depth+1))
		}
		b.WriteString(w() + "]")
	}
	s := b.String()
	switch r.IntN(12) { // spoil a few
	case 0:
		if len(s) > 1 {
			i := r.IntN(len(s))
			s = s[:i] + s[i+1:]
		}
	case 1:
		i := r.IntN(len(s))
		s = s[:i] + s[i:i+1] + s[i:]
	case 2:
		s += []string{" ", " x", " {}", "]", ",", "\n"}[r.IntN(6)]
	}
	return s
}

// decodePlain answers only for documents encoding/json's tokens accept,
// and then with what they decode to: on the bodies clients send, on
// random documents valid and not, and on the tricky ones by hand.
func TestDecodePlainAgrees(t *testing.T) {
	inputs := []string{
		`{"server": {"name": "bench-1", "flavorRef": "1", "imageRef": "7b2e9d40-1f6a-4c1b-9a57-0b3c2d4e5f60", "networks": "none"}}`,
		`{"server": {"name": "a", "min_count": 2, "max_count": "3", "metadata": {}, "security_groups": [{"name": "default"}]},
		  "os:scheduler_hints": {"same_host": ["x", "y"]}}`,
		`{"a": 1, "b": 2, "a": 3}`, `[]`, `{}`, ` {} `, `{} x`, `{} {}`, `{}]`, `"s"`, `1`, `-0.0e+0`, `01`, `[1,]`, `{"a":1,}`,
		`{"a" 1}`, `{,}`, `[,1]`, `nulll`, `[true false]`, "{\"a\":\"\x7f\"}", strings.Repeat("[", 100) + strings.Repeat("]", 100),
		"", " ", `{"a":`, `[`, `"abc`,
	}
	seen := map[string]bool{}
	r := rand.New(rand.NewPCG(20, 26))
	for range 50000 {
		inputs = append(inputs, randomJSONish(r, 0))
	}
	plain := 0
	for _, in := range inputs {
		if seen[in] {
			continue
		}
		seen[in] = true
		got, ok := decodePlain([]byte(in))
		want, err := decodeTokens([]byte(in))
		if !ok {
			continue
		}
		plain++
		if err != nil {
			t.Errorf("decodePlain(%q) = %#v, but encoding/json refuses it: %v", in, got, err)
			continue
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("decodePlain(%q) = %#v, want %#v", in, got, want)
		}
	}
	if _, ok := decodePlain([]byte(inputs[0])); !ok {
		t.Errorf("the bench's create body is not read by decodePlain")
	}
	if plain < 1000 {
		t.Errorf("only %d of %d documents went through decodePlain: the comparison says little", plain, len(seen))
	}
}

// FuzzDecodePlain is TestDecodePlainAgrees for `go test -fuzz`.
func FuzzDecodePlain(f *testing.F) {
	r := rand.New(rand.NewPCG(1, 1))
	for range 200 {
		f.Add([]byte(randomJSONish(r, 0)))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		got, ok := decodePlain(in)
		if !ok {
			return
		}
		want, err := decodeTokens(in)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("decodePlain(%q) = %#v; encoding/json: %#v, %v", in, got, want, err)
		}
	})
}

// BenchmarkDecodePlain is the create bodies' decode: the bench's, and one
// with arrays and nested objects.
func BenchmarkDecodePlain(b *testing.B) {
	for _, bc := range []struct{ name, body string }{
		{"bench-create", `{"server": {"name": "bench-1", "flavorRef": "1", "imageRef": "7b2e9d40-1f6a-4c1b-9a57-0b3c2d4e5f60", "networks": "none"}}`},
		{"nested", `{"server": {"name": "a", "min_count": 2, "max_count": "3", "metadata": {"k1": "v1", "k2": "v2"},
		  "security_groups": [{"name": "default"}, {"name": "web"}], "networks": [{"uuid": "x"}, {"port": "y"}]},
		  "os:scheduler_hints": {"same_host": ["x", "y", "z"], "group": "g"}}`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			in := []byte(bc.body)
			b.ReportAllocs()
			for b.Loop() {
				if _, ok := decodePlain(in); !ok {
					b.Fatal("not plain")
				}
			}
		})
	}
}

// BenchmarkCheckCreateBody is the create schema's check (2.74) of the
// bodies BenchmarkDecodePlain decodes, both valid.
func BenchmarkCheckCreateBody(b *testing.B) {
	s := serverCreate(version{minor: 74})
	for _, bc := range []struct{ name, body string }{
		{"bench-create", `{"server": {"name": "bench-1", "flavorRef": "1", "imageRef": "7b2e9d40-1f6a-4c1b-9a57-0b3c2d4e5f60", "networks": "none"}}`},
		{"nested", `{"server": {"name": "a", "flavorRef": "1", "min_count": 2, "max_count": "3", "metadata": {"k1": "v1", "k2": "v2"},
		  "security_groups": [{"name": "default"}, {"name": "web"}], "networks": [{"uuid": "7b2e9d40-1f6a-4c1b-9a57-0b3c2d4e5f60"}]},
		  "os:scheduler_hints": {"same_host": ["7b2e9d40-1f6a-4c1b-9a57-0b3c2d4e5f60"], "group": "7b2e9d40-1f6a-4c1b-9a57-0b3c2d4e5f61"}}`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			body, ok := decodePlain([]byte(bc.body))
			if !ok {
				b.Fatal("not plain")
			}
			if e := s.check(body, nil); e != nil {
				b.Fatal(e.bodyError())
			}
			b.ReportAllocs()
			for b.Loop() {
				if e := s.check(body, nil); e != nil {
					b.Fatal(e.bodyError())
				}
			}
		})
	}
}
