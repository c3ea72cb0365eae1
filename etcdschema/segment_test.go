package etcdschema

import (
	"errors"
	"strings"
	"testing"
)

func TestCheckSegment(t *testing.T) {
	for _, tc := range []struct {
		desc string
		in   string
		ok   bool
	}{
		{"uuid", "6f1b2a52-8c0e-4c43-9f5a-0d6b4c7e9a11", true},
		{"host name", "compute-1.rack7.example.org", true},
		{"flavor name with spaces and symbols", "m1.tiny (old) #2 %x", true},
		{"non-ASCII letters", "hôte-ünïcode-計算", true},
		{"empty", "", false},
		{"slash", "a/b", false},
		{"key-shaped hint", "6f1b2a52-8c0e-4c43-9f5a-0d6b4c7e9a11/members/6f1b2a52-8c0e-4c43-9f5a-0d6b4c7e9a12", false},
		{"only a slash", "/", false},
		{"newline", "host\n", false},
		{"NUL", "a\x00b", false},
		{"tab", "a\tb", false},
		{"DEL", "a\x7fb", false},
		{"C1 control (NEL)", "a\u0085b", false},
		{"invalid UTF-8", "a\xffb", false},
	} {
		err := CheckSegment(tc.in)
		if (err == nil) != tc.ok {
			t.Errorf("%s: CheckSegment(%q) = %v, want ok=%v", tc.desc, tc.in, err, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrBadSegment) {
			t.Errorf("%s: error %v does not wrap ErrBadSegment", tc.desc, err)
		}
		if got := cleanSegment(tc.in); got != tc.ok {
			t.Errorf("%s: cleanSegment(%q) = %v, want %v", tc.desc, tc.in, got, tc.ok)
		}
	}
}

// badSegments are arguments a careless caller could pass a Keys method.
var badSegments = []string{
	"",
	"/",
	"a/b",
	"6f1b2a52-8c0e-4c43-9f5a-0d6b4c7e9a11/members/6f1b2a52-8c0e-4c43-9f5a-0d6b4c7e9a12",
	"../../hosts/x/alive",
	"x\n",
	"\x7f",
	"\x7f%2F",
	"a\xffb",
}

// TestKeysKeepTheirShapeWhateverTheArguments builds every kind of key with
// each bad segment in each variable place: the key must still parse as the
// same kind, with the same number of levels, the bad argument escaped.
func TestKeysKeepTheirShapeWhateverTheArguments(t *testing.T) {
	k := New("/berth")
	for _, p := range keyPatterns {
		if p.kind == KindElectionCandidate {
			continue // spelled by etcd's election from a lease id, not by Keys
		}
		clean := make([]string, len(p.params))
		for i, name := range p.params {
			clean[i] = "clean-" + name
			if name == "Slot" {
				clean[i] = "3"
			}
		}
		want := strings.Count(p.build(k, clean), "/")
		for i, name := range p.params {
			if name == "Slot" {
				continue // an int: no caller can pass a string there
			}
			for _, bad := range badSegments {
				args := append([]string(nil), clean...)
				args[i] = bad
				key := p.build(k, args)
				if got := strings.Count(key, "/"); got != want {
					t.Errorf("%s with %s=%q: key %q has %d levels, want %d", p.kind, name, bad, key, got, want)
				}
				pk, err := k.ParseKey(key)
				if err != nil || pk.Kind != p.kind {
					t.Errorf("%s with %s=%q: key %q parses as %v, %v; want its own kind", p.kind, name, bad, key, pk.Kind, err)
				}
				if seg := parsedField(pk, name); !Escaped(seg) {
					t.Errorf("%s with %s=%q: segment %q is not escaped", p.kind, name, bad, seg)
				}
			}
		}
	}
}

func parsedField(pk ParsedKey, name string) string {
	switch name {
	case "Host":
		return pk.Host
	case "Cell":
		return pk.Cell
	case "UUID":
		return pk.UUID
	case "Name":
		return pk.Name
	case "Group":
		return pk.Group
	case "Role":
		return pk.Role
	case "ID":
		return pk.ID
	}
	return ""
}

// TestEscapedSegmentsNeverCollide: two different bad segments escape to
// two different keys, and none to a key spelled from a clean name.
func TestEscapedSegmentsNeverCollide(t *testing.T) {
	k := New("")
	seen := map[string]string{}
	for _, s := range append(append([]string(nil), badSegments...), "%2F", "a%2Fb", "%7F", "%7F%252F", "a b") {
		key := k.Flavor(s)
		if prev, dup := seen[key]; dup {
			t.Errorf("Flavor(%q) and Flavor(%q) are both %q", prev, s, key)
		}
		seen[key] = s
	}
}

// TestCleanKeyAllocatesOnce: the check adds no allocation to the hot path
// (the one allocation is the key itself).
func TestCleanKeyAllocatesOnce(t *testing.T) {
	k := New("")
	const host, uuid = "compute-1", "6f1b2a52-8c0e-4c43-9f5a-0d6b4c7e9a11"
	if n := testing.AllocsPerRun(100, func() { keySink = k.Build(host, uuid) }); n != 1 {
		t.Fatalf("Build allocates %v times a call, want 1", n)
	}
	if n := testing.AllocsPerRun(100, func() { keySink = k.Flavor("hôte-計算") }); n != 1 {
		t.Fatalf("Flavor with a non-ASCII name allocates %v times a call, want 1", n)
	}
}

// TestCleanSegmentWordAtATime: the eight-bytes-at-a-time check agrees with
// CheckSegment for every byte value at every position of a word, and in
// the tail.
func TestCleanSegmentWordAtATime(t *testing.T) {
	base := []byte("abcdefghijklmnopq") // two words and a tail byte
	for pos := range base {
		for c := 0; c < 256; c++ {
			b := append([]byte(nil), base...)
			b[pos] = byte(c)
			s := string(b)
			if got, want := cleanSegment(s), CheckSegment(s) == nil; got != want {
				t.Fatalf("cleanSegment(%q) = %v, CheckSegment says %v", s, got, want)
			}
		}
	}
}
