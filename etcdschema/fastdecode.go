package etcdschema

import (
	"encoding/binary"
	"unicode/utf8"
)

// fastDecoder is a value type with a decoder for the plain JSON that
// Encode writes, tried before encoding/json (whose reflection and
// validation pass were most of a cold start's CPU: a scheduler decodes
// every instance's InstanceInfo when it starts). decodeFast reports false
// for anything it does not read exactly as encoding/json would, and
// Decode then uses encoding/json on the same bytes.
type fastDecoder interface {
	decodeFast(data []byte) bool
}

// flatMember is one member of a flat JSON object: its name, and either
// a string (str, no escapes, ASCII) or an integer (num).
type flatMember struct {
	name  []byte
	str   []byte
	num   int64
	isStr bool
}

// eachFlatMember calls set for every member of a JSON object whose
// members are plain ASCII strings without escapes or integers, in order.
// It returns false, having stopped, at anything else — escapes,
// non-ASCII or control bytes, other value types, nesting, trailing data
// — or when set does. set gets the member by value: a pointer to it,
// passed to a function value, made it escape, one allocation per record
// (a million InstanceInfos at a cold start of 100,000 hosts).
func eachFlatMember(data []byte, set func(m flatMember) bool) bool {
	i := skipWS(data, 0)
	if i >= len(data) || data[i] != '{' {
		return false
	}
	i = skipWS(data, i+1)
	if i < len(data) && data[i] == '}' {
		return skipWS(data, i+1) == len(data)
	}
	var m flatMember
	for {
		var ok bool
		if m.name, i, ok = plainString(data, i); !ok {
			return false
		}
		i = skipWS(data, i)
		if i >= len(data) || data[i] != ':' {
			return false
		}
		i = skipWS(data, i+1)
		if i >= len(data) {
			return false
		}
		switch c := data[i]; {
		case c == '"':
			if m.str, i, ok = plainString(data, i); !ok {
				return false
			}
			m.isStr = true
		case c >= '0' && c <= '9':
			j := i
			var n int64
			for j < len(data) && data[j] >= '0' && data[j] <= '9' {
				if j-i >= 18 || (j > i && data[i] == '0') {
					return false // too long to be sure of int64; or a leading zero JSON rejects
				}
				n = n*10 + int64(data[j]-'0')
				j++
			}
			if j < len(data) && (data[j] == '.' || data[j] == 'e' || data[j] == 'E') {
				return false
			}
			m.num, m.isStr, i = n, false, j
		default:
			return false
		}
		if !set(m) {
			return false
		}
		i = skipWS(data, i)
		if i >= len(data) {
			return false
		}
		switch data[i] {
		case ',':
			i = skipWS(data, i+1)
		case '}':
			return skipWS(data, i+1) == len(data)
		default:
			return false
		}
	}
}

// plainString reads a JSON string at data[i] that has no escapes, no
// control bytes and only valid UTF-8 (what encoding/json returns byte for
// byte; it replaces invalid UTF-8), returning its contents and the index
// after it.
func plainString(data []byte, i int) ([]byte, int, bool) {
	if i >= len(data) || data[i] != '"' {
		return nil, i, false
	}
	ascii := true
	for j := i + 1; j < len(data); j++ {
		// Eight plain ASCII bytes at a time (no quote, backslash, control
		// or non-ASCII byte among them): most of a record is uuids and
		// names, and this scan was the largest part of every decode.
		for j+8 <= len(data) && plainWord(binary.LittleEndian.Uint64(data[j:])) {
			j += 8
		}
		if j >= len(data) {
			break
		}
		switch c := data[j]; {
		case c == '"':
			s := data[i+1 : j]
			if !ascii && !utf8.Valid(s) {
				return nil, i, false
			}
			return s, j + 1, true
		case c == '\\' || c < 0x20:
			return nil, i, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return nil, i, false
}

// plainWord reports whether none of the eight bytes of w is a quote, a
// backslash, a control byte (< 0x20) or non-ASCII (>= 0x80). Once no
// byte has its high bit set, subtracting 0x20 from each borrows (and sets
// a high bit) exactly when some byte is below 0x20, and a byte equal to c
// is a zero byte of w^c.
func plainWord(w uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	return w&highs == 0 && (w-0x20*ones)&highs == 0 && !hasZeroByte(w^('"'*ones)) && !hasZeroByte(w^('\\'*ones))
}

// hasZeroByte reports whether some byte of x is zero (exactly, for any x).
func hasZeroByte(x uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	return (x-ones)&^x&highs != 0
}

func skipWS(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

func (v *InstanceInfo) decodeFast(data []byte) bool { return v.decodeFastSharing(data, "", nil) }

// decodeFastSharing is decodeFast taking the host name from host when
// the record's equals it, and the flavor name and id from names (when
// not nil): strings a reader already holds instead of three new ones a
// record.
func (v *InstanceInfo) decodeFastSharing(data []byte, host string, names StringSharer) bool {
	str := func(b []byte) string {
		if names != nil {
			return names.Share(b)
		}
		return string(b)
	}
	return eachFlatMember(data, func(m flatMember) bool {
		switch string(m.name) {
		case "version":
			if m.isStr {
				return false
			}
			v.Version = int(m.num)
		case "uuid":
			v.UUID = string(m.str)
		case "host":
			if host != "" && string(m.str) == host {
				v.Host = host
			} else {
				v.Host = string(m.str)
			}
		case "flavor_id":
			v.FlavorID = str(m.str)
		case "flavor":
			v.Flavor = str(m.str)
		case "state":
			v.State = internState(m.str)
		case "updated_at":
			if !m.isStr {
				return false
			}
			t, err := parseTime(m.str)
			if err != nil {
				return false
			}
			v.UpdatedAt = t
		default:
			return false // a name encoding/json may match differently (case) or ignore
		}
		// A string where the field is a number (or the reverse) is
		// encoding/json's error to report.
		return m.isStr != (string(m.name) == "version")
	})
}

// internState returns an instance info's state, shared for the states
// agents write (every scheduler keeps every instance's info: a million
// copies of "active" at a cold start of 100,000 hosts).
func internState(s []byte) string {
	switch string(s) {
	case "active":
		return "active"
	case "building":
		return "building"
	case "error":
		return "error"
	case "stopped":
		return "stopped"
	case "deleted":
		return "deleted"
	}
	return string(s)
}
