package compute

import "encoding/json"

// decodePlain is decodeOrdered in one pass without encoding/json, for
// the documents clients send: ASCII strings without escapes, numbers,
// literals, objects and arrays, whitespace around them and nothing after.
// decodeTokens (json.Decoder's Token per value, which allocates for each
// and builds a syntax error at every comma) cost a server create more
// allocations than any other step of the compute API. ok is false for
// any document it does not read to the end — an escape, a non-ASCII or
// control byte, a syntax error, deep nesting, anything after the value:
// decodeTokens decides those, so which bodies are accepted and what they
// decode to is exactly as before (TestDecodePlainAgrees).
func decodePlain(body []byte) (v any, ok bool) {
	p := plainParser{b: body}
	v, ok = p.value(0)
	if !ok {
		return nil, false
	}
	p.space()
	return v, p.i == len(p.b)
}

// maxPlainDepth bounds the nesting decodePlain reads (deeper documents go
// to decodeTokens, which has encoding/json's own limit).
const maxPlainDepth = 64

type plainParser struct {
	b []byte
	i int
}

func (p *plainParser) space() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *plainParser) value(depth int) (any, bool) {
	if depth > maxPlainDepth {
		return nil, false
	}
	p.space()
	if p.i >= len(p.b) {
		return nil, false
	}
	switch c := p.b[p.i]; {
	case c == '{':
		return p.object(depth)
	case c == '[':
		return p.array(depth)
	case c == '"':
		s, ok := p.str()
		return s, ok
	case c == 't':
		return true, p.literal("true")
	case c == 'f':
		return false, p.literal("false")
	case c == 'n':
		return nil, p.literal("null")
	case c == '-' || c >= '0' && c <= '9':
		return p.number()
	}
	return nil, false
}

// object keeps decodeTokens' order: a repeated key keeps its first place
// and takes its last value.
func (p *plainParser) object(depth int) (any, bool) {
	o := obj{}
	if p.open('}') {
		return o, true
	}
	for {
		p.space()
		if p.i >= len(p.b) || p.b[p.i] != '"' {
			return nil, false
		}
		k, ok := p.str()
		if !ok {
			return nil, false
		}
		p.space()
		if p.i >= len(p.b) || p.b[p.i] != ':' {
			return nil, false
		}
		p.i++
		v, ok := p.value(depth + 1)
		if !ok {
			return nil, false
		}
		replaced := false
		for j := range o {
			if o[j].k == k {
				o[j].v, replaced = v, true
			}
		}
		if !replaced {
			o = append(o, member{k, v})
		}
		closed, ok := p.separator('}')
		if !ok {
			return nil, false
		}
		if closed {
			return o, true
		}
	}
}

func (p *plainParser) array(depth int) (any, bool) {
	out := []any{}
	if p.open(']') {
		return out, true
	}
	for {
		v, ok := p.value(depth + 1)
		if !ok {
			return nil, false
		}
		out = append(out, v)
		closed, ok := p.separator(']')
		if !ok {
			return nil, false
		}
		if closed {
			return out, true
		}
	}
}

// open steps over a container's opening bracket and the whitespace after
// it, and says whether close follows at once (an empty container, closed
// and stepped over).
func (p *plainParser) open(close byte) (empty bool) {
	p.i++
	p.space()
	if p.i < len(p.b) && p.b[p.i] == close {
		p.i++
		return true
	}
	return false
}

// separator steps over what follows a container's element: whitespace,
// then a comma (another element follows) or close (the container ends,
// closed is true). ok is false for anything else.
func (p *plainParser) separator(close byte) (closed, ok bool) {
	p.space()
	if p.i >= len(p.b) {
		return false, false
	}
	switch p.b[p.i] {
	case ',':
		p.i++
		return false, true
	case close:
		p.i++
		return true, true
	}
	return false, false
}

// str reads a string of printable ASCII without escapes.
func (p *plainParser) str() (string, bool) {
	p.i++ // "
	start := p.i
	for p.i < len(p.b) {
		switch c := p.b[p.i]; {
		case c == '"':
			s := string(p.b[start:p.i])
			p.i++
			return s, true
		case c == '\\' || c < 0x20 || c >= 0x80:
			return "", false
		}
		p.i++
	}
	return "", false
}

func (p *plainParser) literal(word string) bool {
	if len(p.b)-p.i < len(word) || string(p.b[p.i:p.i+len(word)]) != word {
		return false
	}
	p.i += len(word)
	return true
}

// number reads JSON's number grammar: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
// and keeps its text, as UseNumber does.
func (p *plainParser) number() (any, bool) {
	start := p.i
	digits := func() int {
		n := 0
		for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
			p.i++
			n++
		}
		return n
	}
	if p.b[p.i] == '-' {
		p.i++
	}
	switch {
	case p.i < len(p.b) && p.b[p.i] == '0':
		p.i++
	case digits() == 0:
		return nil, false
	}
	if p.i < len(p.b) && p.b[p.i] == '.' {
		p.i++
		if digits() == 0 {
			return nil, false
		}
	}
	if p.i < len(p.b) && (p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		p.i++
		if p.i < len(p.b) && (p.b[p.i] == '+' || p.b[p.i] == '-') {
			p.i++
		}
		if digits() == 0 {
			return nil, false
		}
	}
	return json.Number(p.b[start:p.i]), true
}
