package pycompat

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// JSONError is what Python's json.loads (Placement's jsonutils.loads)
// says about a body it cannot parse, so that a "Malformed JSON" 400 reads
// as Placement's: the same message at the same line, column and character.
// It returns "" when Python would accept the text. It follows CPython's C
// scanner (Modules/_json.c) in strict mode.
func JSONError(body []byte) string {
	if !utf8.Valid(body) {
		return pyUTF8Error(body)
	}
	s := []rune(string(body))
	if len(s) > 0 && s[0] == '\ufeff' {
		return pyJSONAt(s, "Unexpected UTF-8 BOM (decode using utf-8-sig)", 0)
	}
	p := &pyScanner{s: s}
	idx := p.ws(0)
	end, err := p.value(idx)
	if err != "" {
		return err
	}
	if end = p.ws(end); end != len(s) {
		return pyJSONAt(s, "Extra data", end)
	}
	return ""
}

// pyJSONAt is JSONDecodeError's text: msg at a character position.
func pyJSONAt(s []rune, msg string, pos int) string {
	line, col := 1, pos+1
	for i := 0; i < pos && i < len(s); i++ {
		if s[i] == '\n' {
			line++
			col = pos - i
		}
	}
	return fmt.Sprintf("%s: line %d column %d (char %d)", msg, line, col, pos)
}

type pyScanner struct{ s []rune }

func (p *pyScanner) ws(i int) int {
	for i < len(p.s) && (p.s[i] == ' ' || p.s[i] == '\t' || p.s[i] == '\n' || p.s[i] == '\r') {
		i++
	}
	return i
}

func (p *pyScanner) has(i int, lit string) bool {
	r := []rune(lit)
	if i+len(r) > len(p.s) {
		return false
	}
	for k, c := range r {
		if p.s[i+k] != c {
			return false
		}
	}
	return true
}

// value is scan_once: a value at i, its end, or the error text.
func (p *pyScanner) value(i int) (int, string) {
	expecting := pyJSONAt(p.s, "Expecting value", i)
	if i >= len(p.s) {
		return 0, expecting
	}
	switch c := p.s[i]; {
	case c == '"':
		return p.str(i + 1)
	case c == '{':
		return p.object(i + 1)
	case c == '[':
		return p.array(i + 1)
	case c == 'n' && p.has(i, "null"):
		return i + 4, ""
	case c == 't' && p.has(i, "true"):
		return i + 4, ""
	case c == 'f' && p.has(i, "false"):
		return i + 5, ""
	case c == 'N' && p.has(i, "NaN"):
		return i + 3, ""
	case c == 'I' && p.has(i, "Infinity"):
		return i + 8, ""
	case c == '-' && p.has(i, "-Infinity"):
		return i + 9, ""
	}
	// A number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?
	j := i
	if p.s[j] == '-' {
		j++
		if j >= len(p.s) {
			return 0, expecting
		}
	}
	digit := func(k int) bool { return k < len(p.s) && p.s[k] >= '0' && p.s[k] <= '9' }
	switch {
	case p.s[j] >= '1' && p.s[j] <= '9':
		for j++; digit(j); j++ {
		}
	case p.s[j] == '0':
		j++
	default:
		return 0, expecting
	}
	if j < len(p.s) && p.s[j] == '.' && digit(j+1) {
		for j += 2; digit(j); j++ {
		}
	}
	if j < len(p.s) && (p.s[j] == 'e' || p.s[j] == 'E') {
		k := j + 1
		if k < len(p.s) && (p.s[k] == '-' || p.s[k] == '+') {
			k++
		}
		if digit(k) {
			for ; digit(k); k++ {
			}
			j = k
		}
	}
	return j, ""
}

// str is scanstring: the string whose opening quote is at end-1.
func (p *pyScanner) str(end int) (int, string) {
	begin := end - 1
	unterminated := pyJSONAt(p.s, "Unterminated string starting at", begin)
	for {
		next := end
		for ; next < len(p.s); next++ {
			c := p.s[next]
			if c == '"' || c == '\\' {
				break
			}
			if c <= 0x1f {
				return 0, pyJSONAt(p.s, "Invalid control character at", next)
			}
		}
		if next >= len(p.s) {
			return 0, unterminated
		}
		if p.s[next] == '"' {
			return next + 1, ""
		}
		next++ // past the backslash
		if next >= len(p.s) {
			return 0, unterminated
		}
		if c := p.s[next]; c != 'u' {
			end = next + 1
			if !strings.ContainsRune(`"\/bfnrt`, c) {
				return 0, pyJSONAt(p.s, `Invalid \escape`, end-2)
			}
			continue
		}
		next++
		end = next + 4
		if end >= len(p.s) {
			return 0, pyJSONAt(p.s, `Invalid \uXXXX escape`, next-1)
		}
		hex := func(from int) (rune, bool) {
			var v rune
			for k := from; k < from+4; k++ {
				c := p.s[k]
				switch {
				case c >= '0' && c <= '9':
					v = v<<4 | (c - '0')
				case c >= 'a' && c <= 'f':
					v = v<<4 | (c - 'a' + 10)
				case c >= 'A' && c <= 'F':
					v = v<<4 | (c - 'A' + 10)
				default:
					return 0, false
				}
			}
			return v, true
		}
		v, ok := hex(next)
		if !ok {
			return 0, pyJSONAt(p.s, `Invalid \uXXXX escape`, end-5)
		}
		// A high surrogate followed by \u and a low one is one character.
		if v >= 0xd800 && v <= 0xdbff && end+6 < len(p.s) && p.s[end] == '\\' && p.s[end+1] == 'u' {
			if _, ok := hex(end + 2); !ok {
				return 0, pyJSONAt(p.s, `Invalid \uXXXX escape`, end+1)
			}
			if w, _ := hex(end + 2); w >= 0xdc00 && w <= 0xdfff {
				end += 6
			}
		}
	}
}

func (p *pyScanner) object(i int) (int, string) {
	i = p.ws(i)
	if i < len(p.s) && p.s[i] == '}' {
		return i + 1, ""
	}
	for {
		if i >= len(p.s) || p.s[i] != '"' {
			return 0, pyJSONAt(p.s, "Expecting property name enclosed in double quotes", i)
		}
		end, err := p.str(i + 1)
		if err != "" {
			return 0, err
		}
		i = p.ws(end)
		if i >= len(p.s) || p.s[i] != ':' {
			return 0, pyJSONAt(p.s, "Expecting ':' delimiter", i)
		}
		i = p.ws(i + 1)
		if i, err = p.value(i); err != "" {
			return 0, err
		}
		i = p.ws(i)
		if i < len(p.s) && p.s[i] == '}' {
			return i + 1, ""
		}
		if i >= len(p.s) || p.s[i] != ',' {
			return 0, pyJSONAt(p.s, "Expecting ',' delimiter", i)
		}
		i = p.ws(i + 1)
	}
}

func (p *pyScanner) array(i int) (int, string) {
	i = p.ws(i)
	if i < len(p.s) && p.s[i] == ']' {
		return i + 1, ""
	}
	for {
		var err string
		if i, err = p.value(i); err != "" {
			return 0, err
		}
		i = p.ws(i)
		if i < len(p.s) && p.s[i] == ']' {
			return i + 1, ""
		}
		if i >= len(p.s) || p.s[i] != ',' {
			return 0, pyJSONAt(p.s, "Expecting ',' delimiter", i)
		}
		i = p.ws(i + 1)
	}
}

// pyUTF8Error is the UnicodeDecodeError Python raises decoding the body.
func pyUTF8Error(b []byte) string {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r != utf8.RuneError || n > 1 {
			i += n
			continue
		}
		c := b[i]
		reason := "invalid start byte"
		if need := utf8Len(c); need > 1 {
			// A valid lead byte: either the data ends or a continuation
			// byte is wrong.
			k := 1
			for k < need && i+k < len(b) && b[i+k]&0xc0 == 0x80 {
				k++
			}
			if i+k >= len(b) && k < need {
				return fmt.Sprintf("'utf-8' codec can't decode bytes in position %d-%d: unexpected end of data", i, len(b)-1)
			}
			reason = "invalid continuation byte"
		}
		return fmt.Sprintf("'utf-8' codec can't decode byte 0x%02x in position %d: %s", c, i, reason)
	}
	return ""
}

func utf8Len(c byte) int {
	switch {
	case c >= 0xc2 && c <= 0xdf:
		return 2
	case c >= 0xe0 && c <= 0xef:
		return 3
	case c >= 0xf0 && c <= 0xf4:
		return 4
	}
	return 1
}
