package pycompat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strconv"
)

// Object is a JSON object whose members keep the order they were added
// in, as a Python dict does: OpenStack services build their answers as
// dicts and write them with json.dumps, so members come in insertion
// order (Go's encoding/json would sort a map's keys). Each API keeps its
// own small ordered type (its views build it literally) and implements
// this to have it written.
type Object interface {
	// EachMember calls f with each member, in order.
	EachMember(f func(k string, v any))
}

// Dumps is Python's json.dumps(v) as oslo's jsonutils.dumps calls it for
// Nova: ", " and ": " between members, every non-ASCII character as
// \uXXXX (ensure_ascii), and <, > and & as they are (Go's encoding/json
// escapes those, which clients matching text see). It writes an
// Object, map[string]string (keys sorted, as sort_keys), any slice (as
// a list), string, *string, bool, nil, int, int64, float64 and
// json.Number; anything else as encoding/json spells it.
func Dumps(v any) []byte { return dumps(v, true) }

// DumpsUnicode is json.dumps(v, ensure_ascii=False), as Glance writes
// its answers: non-ASCII characters as they are.
func DumpsUnicode(v any) []byte { return dumps(v, false) }

func dumps(v any, ascii bool) []byte {
	var b bytes.Buffer
	writeValue(&b, v, ascii)
	return b.Bytes()
}

func writeValue(b *bytes.Buffer, v any, ascii bool) {
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
		b.WriteString(FloatJSON(t))
	case json.Number:
		b.WriteString(NumberJSON(t))
	case string:
		writeString(b, t, ascii)
	case *string:
		if t == nil {
			b.WriteString("null")
		} else {
			writeString(b, *t, ascii)
		}
	case Object:
		b.WriteByte('{')
		first := true
		t.EachMember(func(k string, v any) {
			if !first {
				b.WriteString(", ")
			}
			first = false
			writeString(b, k, ascii)
			b.WriteString(": ")
			writeValue(b, v, ascii)
		})
		b.WriteByte('}')
	case map[string]string:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteString(", ")
			}
			writeString(b, k, ascii)
			b.WriteString(": ")
			writeString(b, t[k], ascii)
		}
		b.WriteByte('}')
	case []any:
		writeList(b, len(t), func(i int) any { return t[i] }, ascii)
	case []string:
		writeList(b, len(t), func(i int) any { return t[i] }, ascii)
	default:
		if rv := reflect.ValueOf(t); rv.Kind() == reflect.Slice {
			// []obj and the like: a list of whatever they hold.
			writeList(b, rv.Len(), func(i int) any { return rv.Index(i).Interface() }, ascii)
			return
		}
		// Not a value the views build (a client's value quoted in an
		// error, say): encoding/json's spelling.
		j, err := json.Marshal(t)
		if err != nil {
			j = []byte("null")
		}
		b.Write(j)
	}
}

func writeList(b *bytes.Buffer, n int, at func(int) any, ascii bool) {
	b.WriteByte('[')
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteString(", ")
		}
		writeValue(b, at(i), ascii)
	}
	b.WriteByte(']')
}

// writeString is json's encoder for a str: ", \ and the control
// characters escaped; with ascii (ensure_ascii) every character past
// '~' as \uXXXX too (a surrogate pair past U+FFFF), else as it is.
func writeString(b *bytes.Buffer, s string, ascii bool) {
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
		case r < ' ':
			fmt.Fprintf(b, `\u%04x`, r)
		case r <= '~' || !ascii:
			b.WriteRune(r)
		case r > 0xFFFF:
			r -= 0x10000
			fmt.Fprintf(b, `\u%04x\u%04x`, 0xD800+(r>>10)&0x3FF, 0xDC00+r&0x3FF)
		default:
			fmt.Fprintf(b, `\u%04x`, r)
		}
	}
	b.WriteByte('"')
}
