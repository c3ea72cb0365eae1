package etcdschema

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// A key segment is one of the names or ids a Keys method puts between two
// "/": a host, a cell, a uuid, a flavor or trait name. A segment that held
// a "/" would move the key elsewhere in the tree (a scheduler hint spelled
// "<uuid>/members/<uuid>" once wrote a group member's key from a request
// string), an empty one would name the parent's prefix, and a control
// character makes a key that logs and etcdctl show as something else.
//
// So the rule is checked twice:
//   - at every boundary where a string from outside becomes an id (the
//     APIs, config, an agent's registration), with CheckSegment or a
//     stricter check of its own (a UUID, a name alphabet), so the caller
//     gets a clear error in its own shape;
//   - in the Keys methods themselves, which cannot fail: a segment that is
//     not clean is escaped (see escapeSegment), so whatever a caller forgot
//     to check, the key keeps its place and depth in the schema and never
//     collides with a key spelled from a clean segment.
//
// The check costs one pass over the bytes and allocates nothing; keys are
// built on every claim and every host write.

// ErrBadSegment is wrapped by every error CheckSegment returns.
var ErrBadSegment = errors.New("not usable as an etcd key segment")

// CheckSegment says why s cannot be a key segment, or nil when it can: it
// must be non-empty valid UTF-8 with no "/" and no control character
// (C0, DEL or C1).
func CheckSegment(s string) error {
	if s == "" {
		return fmt.Errorf("empty name: %w", ErrBadSegment)
	}
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '/':
				return fmt.Errorf("%q contains \"/\": %w", s, ErrBadSegment)
			case c < 0x20 || c == 0x7f:
				return fmt.Errorf("%q contains a control character at byte %d: %w", s, i, ErrBadSegment)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			return fmt.Errorf("%q is not valid UTF-8 at byte %d: %w", s, i, ErrBadSegment)
		}
		if unicode.IsControl(r) {
			return fmt.Errorf("%q contains a control character at byte %d: %w", s, i, ErrBadSegment)
		}
		i += n
	}
	return nil
}

// cleanSegment is CheckSegment without the error: the Keys methods' fast
// path. Plain printable ASCII, the common case, is checked eight bytes at
// a time; anything else (a multi-byte character, a bad byte) gets
// CheckSegment's closer look.
func cleanSegment(s string) bool {
	if s == "" {
		return false
	}
	i := 0
	for ; i+8 <= len(s); i += 8 {
		// The compiler merges these loads into one (and, w being 8 long,
		// checks no bound).
		w := s[i : i+8]
		x := uint64(w[0]) | uint64(w[1])<<8 | uint64(w[2])<<16 | uint64(w[3])<<24 |
			uint64(w[4])<<32 | uint64(w[5])<<40 | uint64(w[6])<<48 | uint64(w[7])<<56
		if notPlainWord(x) {
			return CheckSegment(s) == nil
		}
	}
	for ; i < len(s); i++ {
		if notPlainASCII[s[i]] {
			return CheckSegment(s) == nil
		}
	}
	return true
}

// Word-at-a-time byte tests (the "haszero" family): each sets the high
// bit of every byte of the result that matches, and only false positives
// for bytes that also match another test, so a zero result means no byte
// of x is a control character, "/", DEL or a byte >= 0x80.
const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// notPlainWord reports whether some byte of x is not plain printable ASCII
// other than "/".
func notPlainWord(x uint64) bool {
	below20 := (x - 0x20*ones) &^ x & highs // a byte < 0x20 (exact while no byte >= 0x80)
	slash := x ^ '/'*ones                   // zero where a byte is "/"
	del := x ^ 0x7f*ones                    // zero where a byte is DEL
	zeroSlash := (slash - ones) &^ slash & highs
	zeroDel := (del - ones) &^ del & highs
	return x&highs|below20|zeroSlash|zeroDel != 0
}

// notPlainASCII marks the bytes cleanSegment cannot pass without a closer
// look: controls, "/", DEL and every byte of a multi-byte character.
var notPlainASCII = func() (t [256]bool) {
	for c := range t {
		t[c] = c < 0x20 || c >= 0x7f || c == '/'
	}
	return t
}()

// escapeMark starts every escaped segment. DEL is a control character, so
// no clean segment contains it: an escaped segment can never equal a clean
// one, and two different bad segments escape differently (the rest is a
// percent-encoding that encodes "%" itself).
const escapeMark = "\x7f"

// escapeSegment spells a segment that is not clean as escapeMark followed
// by s with every byte outside printable ASCII, and every "/" and "%",
// written %XX. The key keeps its shape; the operator who finds one (berth
// debug dump, etcdctl) knows a caller skipped its boundary check.
func escapeSegment(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(escapeMark) + 3*len(s))
	b.WriteString(escapeMark)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= 0x20 || c >= 0x7f || c == '/' || c == '%' {
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&0xf])
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// Escaped reports whether a segment taken from a key (ParseKey,
// LastSegment, FirstSegment) is an escaped one: the key was spelled from a
// name no boundary should have let through.
func Escaped(segment string) bool { return strings.HasPrefix(segment, escapeMark) }
