package pycompat

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"math/big"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode"
)

// Placement's validation messages quote values the way Python prints them
// (repr, and pprint.pformat at width 72 for the schema and instance in
// str(ValidationError)). These helpers spell decoded JSON values, schema
// nodes included, the same way.

// Repr is Python's repr of a decoded JSON value.
func Repr(v any) string {
	switch x := v.(type) {
	case string:
		return StrRepr(x)
	case nil:
		return "None"
	case bool:
		if x {
			return "True"
		}
		return "False"
	case json.Number:
		return NumberRepr(x)
	case int:
		return strconv.Itoa(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		return FloatRepr(x)
	case map[string]any:
		keys := sortedKeys(x)
		parts := make([]string, 0, len(keys))
		for _, k := range keys {
			parts = append(parts, StrRepr(k)+": "+Repr(x[k]))
		}
		return "{" + strings.Join(parts, ", ") + "}"
	case *Schema:
		keys := append([]string(nil), x.keys...)
		sort.Strings(keys)
		parts := make([]string, 0, len(keys))
		for _, k := range keys {
			parts = append(parts, StrRepr(k)+": "+Repr(x.vals[k]))
		}
		return "{" + strings.Join(parts, ", ") + "}"
	case []any:
		parts := make([]string, 0, len(x))
		for _, e := range x {
			parts = append(parts, Repr(e))
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case []string:
		parts := make([]string, 0, len(x))
		for _, e := range x {
			parts = append(parts, StrRepr(e))
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	return fmt.Sprint(v)
}

// StrRepr is repr(str): single quotes unless the text holds a single
// quote and no double one; backslash escapes for the unprintable (Go's
// unicode.IsPrint is str.isprintable: no space but ' '). U+FFFD is
// printable and stays as it is, as CPython leaves it; it is also what Go's
// JSON decoder makes of a lone surrogate, which CPython would spell
// \udXXX, but that number is lost by then and no recorded answer has one.
func StrRepr(s string) string {
	q := byte('\'')
	if strings.ContainsRune(s, '\'') && !strings.ContainsRune(s, '"') {
		q = '"'
	}
	var b strings.Builder
	b.WriteByte(q)
	for _, r := range s {
		switch {
		case r == '\\':
			b.WriteString(`\\`)
		case r == rune(q):
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r < 0x7f:
			b.WriteRune(r)
		case !unicode.IsPrint(r):
			switch {
			case r <= 0xff:
				fmt.Fprintf(&b, `\x%02x`, r)
			case r <= 0xffff:
				fmt.Fprintf(&b, `\u%04x`, r)
			default:
				fmt.Fprintf(&b, `\U%08x`, r)
			}
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte(q)
	return b.String()
}

// NumberRepr is repr(json.loads(n)): a JSON number without fraction or
// exponent is a Python int (of any size; -0 is 0), any other a float.
func NumberRepr(n json.Number) string { return number(n, FloatRepr) }

// NumberJSON is json.dumps(json.loads(n)): as NumberRepr, but a float
// out of range reads as inf and json.dumps spells that Infinity.
func NumberJSON(n json.Number) string { return number(n, FloatJSON) }

func number(n json.Number, float func(float64) string) string {
	s := n.String()
	if !strings.ContainsAny(s, ".eE") {
		if i, ok := new(big.Int).SetString(s, 10); ok {
			return i.String() // "-0" is 0
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && !math.IsInf(f, 0) {
		return s // not a number the JSON decoder would have let through
	}
	return float(f)
}

// FloatRepr is repr(float): the shortest round-tripping digits, in
// positional form for exponents -4 to 15 and scientific beyond, and
// inf, -inf, nan.
func FloatRepr(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	case math.IsNaN(f):
		return "nan"
	}
	return finiteFloat(f)
}

// FloatJSON is json.dumps(float): float.__repr__ for a finite value, and
// JavaScript's words Infinity, -Infinity, NaN for the others.
func FloatJSON(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	case math.IsNaN(f):
		return "NaN"
	}
	return finiteFloat(f)
}

func finiteFloat(f float64) string {
	e := strconv.FormatFloat(f, 'e', -1, 64) // d.ddde±XX
	mant, expS, _ := strings.Cut(e, "e")
	exp, _ := strconv.Atoi(expS)
	if exp < -4 || exp >= 16 {
		sign := "+"
		if exp < 0 {
			sign, exp = "-", -exp
		}
		return fmt.Sprintf("%se%s%02d", mant, sign, exp)
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.ContainsAny(s, ".") {
		s += ".0"
	}
	return s
}

// Float is a float that JSON-encodes as Python's json.dumps does
// (1.0, not 1): Placement's float fields read the same to clients that
// print them.
type Float float64

func (f Float) MarshalJSON() ([]byte, error) {
	if math.IsInf(float64(f), 0) || math.IsNaN(float64(f)) {
		return nil, fmt.Errorf("placement: %v is not JSON", float64(f))
	}
	return []byte(FloatRepr(float64(f))), nil
}

// pformat is pprint.pformat(v, width=72) with its default sorted dicts.
func pformat(v any) string {
	var b strings.Builder
	pp := pprinter{width: 72}
	pp.format(&b, v, 0, 0, 0)
	return b.String()
}

type pprinter struct{ width int }

func (p pprinter) format(b *strings.Builder, v any, indent, allowance, level int) {
	rep := Repr(v)
	if len([]rune(rep)) <= p.width-indent-allowance {
		b.WriteString(rep)
		return
	}
	switch x := v.(type) {
	case map[string]any:
		p.dict(b, sortedKeys(x), func(k string) any { return x[k] }, indent, allowance, level+1)
		return
	case *Schema:
		keys := append([]string(nil), x.keys...)
		sort.Strings(keys)
		p.dict(b, keys, func(k string) any { return x.vals[k] }, indent, allowance, level+1)
		return
	case []any:
		p.list(b, x, indent, allowance, level+1)
		return
	case string:
		p.str(b, x, indent, allowance, level+1)
		return
	}
	b.WriteString(rep)
}

func (p pprinter) dict(b *strings.Builder, keys []string, get func(string) any, indent, allowance, level int) {
	b.WriteByte('{')
	indent++
	allowance++
	for i, k := range keys {
		last := i == len(keys)-1
		rep := StrRepr(k)
		b.WriteString(rep)
		b.WriteString(": ")
		al := 1
		if last {
			al = allowance
		}
		p.format(b, get(k), indent+len([]rune(rep))+2, al, level)
		if !last {
			b.WriteString(",\n" + strings.Repeat(" ", indent))
		}
	}
	b.WriteByte('}')
}

func (p pprinter) list(b *strings.Builder, items []any, indent, allowance, level int) {
	b.WriteByte('[')
	indent++
	allowance++
	for i, e := range items {
		last := i == len(items)-1
		if i > 0 {
			b.WriteString(",\n" + strings.Repeat(" ", indent))
		}
		al := 1
		if last {
			al = allowance
		}
		p.format(b, e, indent, al, level)
	}
	b.WriteByte(']')
}

var pyWordRe = regexp.MustCompile(`\S*\s*`)

// str is pprint's _pprint_str: a long string split at whitespace into
// adjacent literals.
func (p pprinter) str(b *strings.Builder, s string, indent, allowance, level int) {
	var lines []string
	rest := s
	for rest != "" {
		i := strings.IndexAny(rest, "\n\r")
		if i < 0 {
			lines = append(lines, rest)
			break
		}
		j := i + 1
		if rest[i] == '\r' && j < len(rest) && rest[j] == '\n' {
			j++
		}
		lines = append(lines, rest[:j])
		rest = rest[j:]
	}
	if level == 1 {
		indent++
		allowance++
	}
	maxWidth1 := p.width - indent
	maxWidth := maxWidth1
	var chunks []string
	for i, line := range lines {
		rep := StrRepr(line)
		if i == len(lines)-1 {
			maxWidth1 -= allowance
		}
		if len([]rune(rep)) <= maxWidth1 {
			chunks = append(chunks, rep)
			continue
		}
		parts := pyWordRe.FindAllString(line, -1)
		maxWidth2 := maxWidth
		current := ""
		for j, part := range parts {
			cand := current + part
			if j == len(parts)-1 && i == len(lines)-1 {
				maxWidth2 -= allowance
			}
			if len([]rune(StrRepr(cand))) > maxWidth2 {
				if current != "" {
					chunks = append(chunks, StrRepr(current))
				}
				current = part
			} else {
				current = cand
			}
		}
		if current != "" {
			chunks = append(chunks, StrRepr(current))
		}
	}
	if len(chunks) <= 1 {
		b.WriteString(StrRepr(s))
		return
	}
	if level == 1 {
		b.WriteByte('(')
	}
	for i, c := range chunks {
		if i > 0 {
			b.WriteString("\n" + strings.Repeat(" ", indent))
		}
		b.WriteString(c)
	}
	if level == 1 {
		b.WriteByte(')')
	}
}

// Int is Python's int(s): surrounding whitespace, a sign, and digits
// with single underscores between them.
func Int(s string) (int, bool) {
	s = strings.TrimSpace(s)
	sign := 1
	if s != "" && (s[0] == '+' || s[0] == '-') {
		if s[0] == '-' {
			sign = -1
		}
		s = s[1:]
	}
	if s == "" || s[0] == '_' || s[len(s)-1] == '_' || strings.Contains(s, "__") {
		return 0, false
	}
	n, err := strconv.Atoi(strings.ReplaceAll(s, "_", ""))
	if err != nil || strings.ContainsAny(s, "+-") {
		return 0, false
	}
	return sign * n, true
}

// sortedKeys lists a map's keys in order (Python's sorted(d)).
func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
