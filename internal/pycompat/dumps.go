package pycompat

import (
	"encoding/json"
	"reflect"
	"sort"
	"strconv"
	"unicode/utf8"
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

// AppendDumps appends Dumps(v) to dst: a caller writing many answers
// can keep one buffer (or a pool of them) instead of one per answer.
func AppendDumps(dst []byte, v any) []byte { return appendValue(dst, v, true) }

func dumps(v any, ascii bool) []byte {
	// Most answers are a few hundred bytes: one allocation of this size
	// instead of a buffer doubling from 64.
	return appendValue(make([]byte, 0, 512), v, ascii)
}

// Members is an Object that can also be read member by member: Dumps
// walks it without the closure EachMember takes (one allocation an
// object, every object of every answer).
type Members interface {
	Object
	// Len is the number of members; Member(i) the i-th, in order.
	Len() int
	Member(i int) (k string, v any)
}

func appendValue(b []byte, v any, ascii bool) []byte {
	switch t := v.(type) {
	case nil:
		return append(b, "null"...)
	case bool:
		return strconv.AppendBool(b, t)
	case int:
		return strconv.AppendInt(b, int64(t), 10)
	case int64:
		return strconv.AppendInt(b, t, 10)
	case float64:
		return append(b, FloatJSON(t)...)
	case json.Number:
		return append(b, NumberJSON(t)...)
	case string:
		return appendString(b, t, ascii)
	case *string:
		if t == nil {
			return append(b, "null"...)
		}
		return appendString(b, *t, ascii)
	case Members:
		b = append(b, '{')
		for i, n := 0, t.Len(); i < n; i++ {
			if i > 0 {
				b = append(b, ", "...)
			}
			k, v := t.Member(i)
			b = appendString(b, k, ascii)
			b = append(b, ": "...)
			b = appendValue(b, v, ascii)
		}
		return append(b, '}')
	case Object:
		return appendObject(b, t, ascii)
	case map[string]string:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b = append(b, '{')
		for i, k := range keys {
			if i > 0 {
				b = append(b, ", "...)
			}
			b = appendString(b, k, ascii)
			b = append(b, ": "...)
			b = appendString(b, t[k], ascii)
		}
		return append(b, '}')
	case []any:
		b = append(b, '[')
		for i, e := range t {
			if i > 0 {
				b = append(b, ", "...)
			}
			b = appendValue(b, e, ascii)
		}
		return append(b, ']')
	case []string:
		b = append(b, '[')
		for i, e := range t {
			if i > 0 {
				b = append(b, ", "...)
			}
			b = appendString(b, e, ascii)
		}
		return append(b, ']')
	}
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.Slice {
		// []obj and the like: a list of whatever they hold. An element
		// that is an Object goes by its address (an Object too, its
		// methods being the element's), which an interface holds
		// without allocating: the element itself, a slice or a struct,
		// would be copied to the heap.
		byAddr := rv.Type().Elem().Implements(objectType)
		b = append(b, '[')
		for i, n := 0, rv.Len(); i < n; i++ {
			if i > 0 {
				b = append(b, ", "...)
			}
			e := rv.Index(i)
			if byAddr {
				e = e.Addr()
			}
			b = appendValue(b, e.Interface(), ascii)
		}
		return append(b, ']')
	}
	// Not a value the views build (a client's value quoted in an error,
	// say): encoding/json's spelling.
	j, err := json.Marshal(v)
	if err != nil {
		j = []byte("null")
	}
	return append(b, j...)
}

var objectType = reflect.TypeFor[Object]()

// appendObject writes an Object through its EachMember. (A function of
// its own: the closure captures b, which would move every appendValue's
// b to the heap.)
func appendObject(b []byte, o Object, ascii bool) []byte {
	b = append(b, '{')
	first := true
	o.EachMember(func(k string, v any) {
		if !first {
			b = append(b, ", "...)
		}
		first = false
		b = appendString(b, k, ascii)
		b = append(b, ": "...)
		b = appendValue(b, v, ascii)
	})
	return append(b, '}')
}

// appendString is json's encoder for a str: ", \ and the control
// characters escaped; with ascii (ensure_ascii) every character past
// '~' as \uXXXX too (a surrogate pair past U+FFFF), else as it is.
// Printable ASCII without quotes or backslashes, most of every answer,
// is copied as it is, a run at a time.
func appendString(b []byte, s string, ascii bool) []byte {
	b = append(b, '"')
	for len(s) > 0 {
		i := 0
		for i < len(s) && plainByte(s[i]) {
			i++
		}
		b = append(b, s[:i]...)
		if i == len(s) {
			break
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		s = s[i+size:]
		switch {
		case r == '"':
			b = append(b, `\"`...)
		case r == '\\':
			b = append(b, `\\`...)
		case r == '\n':
			b = append(b, `\n`...)
		case r == '\r':
			b = append(b, `\r`...)
		case r == '\t':
			b = append(b, `\t`...)
		case r == '\b':
			b = append(b, `\b`...)
		case r == '\f':
			b = append(b, `\f`...)
		case r < ' ':
			b = appendU(b, r)
		case r <= '~' || !ascii:
			b = utf8.AppendRune(b, r)
		case r > 0xFFFF:
			r -= 0x10000
			b = appendU(appendU(b, 0xD800+(r>>10)&0x3FF), 0xDC00+r&0x3FF)
		default:
			b = appendU(b, r)
		}
	}
	return append(b, '"')
}

// plainByte: c is written as it is in every mode.
func plainByte(c byte) bool { return c >= ' ' && c <= '~' && c != '"' && c != '\\' }

// appendU appends \u and r's four lowercase hex digits (r <= 0xFFFF).
func appendU(b []byte, r rune) []byte {
	const hex = "0123456789abcdef"
	return append(b, '\\', 'u', hex[r>>12&0xF], hex[r>>8&0xF], hex[r>>4&0xF], hex[r&0xF])
}
