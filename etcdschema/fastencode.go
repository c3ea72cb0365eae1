package etcdschema

import (
	"math"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"
)

// fastEncoder is a value type that writes its own JSON without
// reflection, byte for byte what json.Marshal writes for it, tried by
// Encode before json.Marshal (every claim encodes a provider and a
// consumer). appendJSON reports false for a value it cannot write
// exactly so (a float json.Marshal refuses, a time outside RFC 3339),
// and Encode then leaves the value to json.Marshal, which also gives
// its error.
type fastEncoder interface {
	appendJSON(b []byte) ([]byte, bool)
	// sizeHint is the capacity to give appendJSON's buffer.
	sizeHint() int
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s quoted as json.Marshal quotes it (HTML
// escaping on: <, > and & as \u003c, \u003e, \u0026; \b \f \n \r \t
// short; other control bytes \u00XX; invalid UTF-8 as \ufffd; U+2028
// and U+2029 escaped).
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// appendJSONFloat appends f as encoding/json writes a float64 (ES6
// number formatting: 'f' between 1e-6 and 1e21, else 'e' without a
// leading zero in the exponent). NaN and ±Inf, which json.Marshal
// refuses, report false.
func appendJSONFloat(b []byte, f float64) ([]byte, bool) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return b, false
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// e-07 → e-7, as encoding/json cleans it up.
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, true
}

// appendJSONTime appends t as its MarshalJSON writes it (quoted strict
// RFC 3339 with nanoseconds), reporting false where MarshalJSON fails (a
// year outside 0–9999, say).
func appendJSONTime(b []byte, t time.Time) ([]byte, bool) {
	b = append(b, '"')
	b, err := t.AppendText(b)
	if err != nil {
		return nil, false
	}
	return append(b, '"'), true
}

// appendJSONStrings appends a []string: null when nil, as json.Marshal.
func appendJSONStrings(b []byte, ss []string) []byte {
	if ss == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, s)
	}
	return append(b, ']')
}

// sortedKeys returns m's keys in the order json.Marshal writes them
// (byte-wise), in buf when they fit (the placement maps hold a few
// resource classes or providers each).
func sortedKeys[V any](m map[string]V, buf []string) []string {
	keys := buf[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// appendJSONInt64Map appends a map[string]int64: null when nil.
func appendJSONInt64Map(b []byte, m map[string]int64) []byte {
	if m == nil {
		return append(b, "null"...)
	}
	var buf [8]string
	b = append(b, '{')
	for i, k := range sortedKeys(m, buf[:]) {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, k)
		b = append(b, ':')
		b = strconv.AppendInt(b, m[k], 10)
	}
	return append(b, '}')
}
