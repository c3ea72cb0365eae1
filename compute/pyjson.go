package compute

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/berth-project/berth/internal/pycompat"
)

// Nova answers with json.dumps(body) (oslo's jsonutils.dumps): members
// in the order the Python dict was built, ", " and ": " between them,
// every non-ASCII character as \uXXXX, and <, > and & as they are. Go's
// encoding/json sorts map keys, writes UTF-8 and escapes <, > and &
// (issue 16 names that last difference: clients matching text see it).
// So the views here are built as obj values and written by dumps.

// obj is a JSON object whose members keep the order they were added in,
// as a Python dict does.
type obj []member

type member struct {
	k string
	v any
}

// get returns the value of member k.
func (o obj) get(k string) (any, bool) {
	for _, m := range o {
		if m.k == k {
			return m.v, true
		}
	}
	return nil, false
}

// dumps is Python's json.dumps(v) for the values the views build: obj,
// []obj, []any, []string, map[string]string (keys sorted), string, bool,
// nil, int, int64, float64, json.Number.
func dumps(v any) []byte {
	var b bytes.Buffer
	writeValue(&b, v)
	return b.Bytes()
}

func writeValue(b *bytes.Buffer, v any) {
	switch t := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(t))
	case int:
		b.WriteString(strconv.Itoa(t))
	case int64:
		b.WriteString(strconv.FormatInt(t, 10))
	case float64:
		b.WriteString(pycompat.FloatJSON(t))
	case json.Number:
		b.WriteString(pycompat.NumberJSON(t))
	case string:
		writeString(b, t)
	case obj:
		b.WriteByte('{')
		for i, m := range t {
			if i > 0 {
				b.WriteString(", ")
			}
			writeString(b, m.k)
			b.WriteString(": ")
			writeValue(b, m.v)
		}
		b.WriteByte('}')
	case map[string]string:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		o := make(obj, len(keys))
		for i, k := range keys {
			o[i] = member{k, t[k]}
		}
		writeValue(b, o)
	case []obj:
		b.WriteByte('[')
		for i, x := range t {
			if i > 0 {
				b.WriteString(", ")
			}
			writeValue(b, x)
		}
		b.WriteByte(']')
	case []any:
		b.WriteByte('[')
		for i, x := range t {
			if i > 0 {
				b.WriteString(", ")
			}
			writeValue(b, x)
		}
		b.WriteByte(']')
	case []string:
		b.WriteByte('[')
		for i, x := range t {
			if i > 0 {
				b.WriteString(", ")
			}
			writeString(b, x)
		}
		b.WriteByte(']')
	default:
		panic(fmt.Sprintf("compute: dumps of %T", v))
	}
}

// writeString is json's ensure_ascii encoding: printable ASCII as it is
// (so <, > and & too), the rest escaped.
func writeString(b *bytes.Buffer, s string) {
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\b':
			b.WriteString(`\b`)
		case r == '\f':
			b.WriteString(`\f`)
		case r >= ' ' && r <= '~':
			b.WriteRune(r)
		case r > 0xFFFF:
			r1, r2 := utf16Pair(r)
			fmt.Fprintf(b, `\u%04x\u%04x`, r1, r2)
		default:
			fmt.Fprintf(b, `\u%04x`, r)
		}
	}
	b.WriteByte('"')
}

func utf16Pair(r rune) (rune, rune) {
	r -= 0x10000
	return 0xD800 + (r>>10)&0x3FF, 0xDC00 + r&0x3FF
}

// isIntLiteral: json.loads makes an int of a number with no fraction and
// no exponent, a float of any other.
func isIntLiteral(n json.Number) bool { return !strings.ContainsAny(string(n), ".eE") }

// decodeOrdered reads one JSON document as Python's json.loads does
// where it matters to Nova's messages: objects as obj, keeping their
// order (a repeated key keeps its first place and its last value),
// numbers as json.Number.
func decodeOrdered(body []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	v, err := decodeValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err == nil {
		return nil, fmt.Errorf("extra data after the document")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return tok, nil
	}
	switch d {
	case '{':
		o := obj{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, err
			}
			k := kt.(string)
			v, err := decodeValue(dec)
			if err != nil {
				return nil, err
			}
			replaced := false
			for i := range o {
				if o[i].k == k {
					o[i].v, replaced = v, true
				}
			}
			if !replaced {
				o = append(o, member{k, v})
			}
		}
		_, err := dec.Token()
		return o, err
	case '[':
		out := []any{}
		for dec.More() {
			v, err := decodeValue(dec)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		_, err := dec.Token()
		return out, err
	}
	return nil, fmt.Errorf("unexpected %v", d)
}

// pyRepr is Python's repr() of a decoded JSON value. It walks obj in
// its members' order (pycompat.Repr sorts a map's keys, as pprint does
// for Placement's messages); the leaves are pycompat's.
func pyRepr(v any) string {
	switch t := v.(type) {
	case nil:
		return "None"
	case bool:
		if t {
			return "True"
		}
		return "False"
	case json.Number:
		return pycompat.NumberRepr(t)
	case int:
		return strconv.Itoa(t)
	case float64:
		return pycompat.FloatRepr(t)
	case string:
		return pycompat.StrRepr(t)
	case obj:
		parts := make([]string, len(t))
		for i, m := range t {
			parts[i] = pycompat.StrRepr(m.k) + ": " + pyRepr(m.v)
		}
		return "{" + strings.Join(parts, ", ") + "}"
	case []any:
		parts := make([]string, len(t))
		for i, x := range t {
			parts[i] = pyRepr(x)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	return fmt.Sprint(v)
}

// pyStr is Python's str(): a string as it is, anything else as repr.
func pyStr(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return pyRepr(v)
}
