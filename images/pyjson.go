package images

import (
	"encoding/json"
	"strconv"
	"strings"
)

// obj is a JSON object whose members keep their order: Glance builds its
// answers as Python dicts and writes them with json.dumps, so members
// come in insertion order.
type obj []member

type member struct {
	k string
	v any // obj, []any, []string, string, *string, int, bool or nil
}

// dumps is json.dumps(v, ensure_ascii=False) as oslo's jsonutils (and so
// Glance) calls it: ", " and ": " separators, non-ASCII written as it
// is, <, > and & plainly.
func dumps(v any) []byte {
	var b strings.Builder
	writeValue(&b, v)
	return []byte(b.String())
}

func writeValue(b *strings.Builder, v any) {
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case obj:
		b.WriteByte('{')
		for i, m := range x {
			if i > 0 {
				b.WriteString(", ")
			}
			writeString(b, m.k)
			b.WriteString(": ")
			writeValue(b, m.v)
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteString(", ")
			}
			writeValue(b, e)
		}
		b.WriteByte(']')
	case []string:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteString(", ")
			}
			writeString(b, e)
		}
		b.WriteByte(']')
	case string:
		writeString(b, x)
	case *string:
		if x == nil {
			b.WriteString("null")
		} else {
			writeString(b, *x)
		}
	case int:
		b.WriteString(strconv.Itoa(x))
	case bool:
		b.WriteString(strconv.FormatBool(x))
	case json.Number:
		b.WriteString(string(x))
	default:
		// Not a value Glance's views hold (a client's value quoted in
		// an error): encoding/json's spelling will do.
		j, err := json.Marshal(x)
		if err != nil {
			j = []byte("null")
		}
		b.Write(j)
	}
}

// writeString is json.dumps's py_encode_basestring: ", \ and the control
// characters escaped, everything else as it is.
func writeString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			if r < 0x20 {
				b.WriteString(`\u00`)
				b.WriteString(strconv.FormatInt(int64(r)>>4, 16))
				b.WriteString(strconv.FormatInt(int64(r)&15, 16))
				continue
			}
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
}
