package compute

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/berth-project/berth/internal/pycompat"
)

// Nova answers with json.dumps(body) (oslo's jsonutils.dumps): members
// in the order the Python dict was built, every non-ASCII character as
// \uXXXX, and <, > and & as they are. So the views here are built as obj
// values and written by pycompat.Dumps.

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

// EachMember makes an obj a pycompat.Object.
func (o obj) EachMember(f func(k string, v any)) {
	for _, m := range o {
		f(m.k, m.v)
	}
}

// Len and Member make an obj a pycompat.Members, which Dumps walks
// without a closure.
func (o obj) Len() int                   { return len(o) }
func (o obj) Member(i int) (string, any) { return o[i].k, o[i].v }

// dumps is Python's json.dumps(v) as Nova writes its answers
// (pycompat.Dumps: ensure_ascii, <, > and & plain).
func dumps(v any) []byte { return pycompat.Dumps(v) }

// isIntLiteral: json.loads makes an int of a number with no fraction and
// no exponent, a float of any other.
func isIntLiteral(n json.Number) bool { return !strings.ContainsAny(string(n), ".eE") }

// decodeOrdered reads one JSON document as Python's json.loads does
// where it matters to Nova's messages: objects as obj, keeping their
// order (a repeated key keeps its first place and its last value),
// numbers as json.Number.
func decodeOrdered(body []byte) (any, error) {
	if v, ok := decodePlain(body); ok {
		return v, nil
	}
	return decodeTokens(body)
}

// decodeTokens is decodeOrdered through encoding/json's tokens: it
// decides every document decodePlain does not.
func decodeTokens(body []byte) (any, error) {
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
