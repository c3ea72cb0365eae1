package etcdschema

import (
	"reflect"
	"strings"
	"testing"
)

// TestParseKeyEveryKeyMethod calls every Keys method that spells one key
// and checks ParseKey gives back its kind (the method's name) and its
// arguments; a key method added without a pattern in parse.go fails here.
func TestParseKeyEveryKeyMethod(t *testing.T) {
	k := New("/deploy-a")
	v := reflect.ValueOf(k)
	typ := v.Type()
	strType, intType := reflect.TypeOf(""), reflect.TypeOf(0)
	// Not single keys: roots, and the election prefix (candidates are
	// keys below it, checked in TestParseKeyElectionCandidate).
	skip := map[string]bool{"Prefix": true, "All": true, "Election": true}
	checked := 0
	for i := 0; i < typ.NumMethod(); i++ {
		m := typ.Method(i)
		mt := m.Type // receiver first
		if skip[m.Name] || mt.NumOut() != 1 || mt.Out(0) != strType {
			continue
		}
		args := []reflect.Value{v}
		var want []string
		ok := true
		for j := 1; j < mt.NumIn(); j++ {
			switch mt.In(j) {
			case strType:
				s := strings.ToLower(m.Name) + "-arg" + string(rune('0'+j))
				args = append(args, reflect.ValueOf(s))
				want = append(want, s)
			case intType:
				args = append(args, reflect.ValueOf(j+1))
				want = append(want, string(rune('0'+j+1)))
			default:
				ok = false
			}
		}
		if !ok {
			continue
		}
		key := m.Func.Call(args)[0].String()
		pk, err := k.ParseKey(key)
		if strings.HasSuffix(key, "/") {
			// A listing prefix, not a key.
			if err == nil {
				t.Errorf("%s = %q is a prefix but parses as %+v", m.Name, key, pk)
			}
			continue
		}
		checked++
		if err != nil {
			t.Errorf("Keys.%s = %q: %v (add a pattern to parse.go)", m.Name, key, err)
			continue
		}
		if string(pk.Kind) != m.Name {
			t.Errorf("Keys.%s = %q parses as kind %s", m.Name, key, pk.Kind)
		}
		got := []string{pk.Host, pk.Cell, pk.UUID, pk.Name, pk.Group, pk.Role, pk.ID}
		if pk.Kind == KindServerGroupSlot || pk.Kind == KindBenchCAS {
			got = append(got, string(rune('0'+pk.Slot)))
		}
		for _, w := range want {
			found := false
			for _, g := range got {
				found = found || g == w
			}
			if !found {
				t.Errorf("Keys.%s = %q parsed as %+v: argument %q lost", m.Name, key, pk, w)
			}
		}
		// berth bench's scratch counter is the one key whose value is not
		// Berth's versioned JSON (docs/etcd-keys.md says so).
		if NewValue(pk.Kind) == nil && pk.Kind != KindBenchCAS {
			t.Errorf("kind %s has no value type", pk.Kind)
		}
	}
	if checked != len(keyPatterns)-1 { // every pattern but the election candidate
		t.Errorf("checked %d key methods, parse.go has %d patterns besides the election candidate", checked, len(keyPatterns)-1)
	}
}

func TestParseKeyElectionCandidate(t *testing.T) {
	k := New("")
	pk, err := k.ParseKey(k.Election("scheduler") + "/694d8b5c3a0e1f04")
	if err != nil || pk.Kind != KindElectionCandidate || pk.Role != "scheduler" || pk.ID != "694d8b5c3a0e1f04" {
		t.Fatalf("ParseKey(candidate) = %+v, %v", pk, err)
	}
	if NewValue(KindElectionCandidate) != nil {
		t.Fatal("an election candidate's value is a plain string, not a Versioned value")
	}
}

func TestParseKeyRejects(t *testing.T) {
	k := New("/berth")
	for _, key := range []string{
		"/other/hosts/h1/service",          // outside the prefix
		"/berth",                           // the root itself
		"/berth/hosts/h1/unknown",          // no such host key
		"/berth/hosts//service",            // empty host
		"/berth/cells/cell1/instances/",    // a listing prefix
		"/berth/server_groups/g/slots/h/x", // slot not a number
		"/berth/future/thing",              // a newer version's key
		"/berthx/hosts/h1/service",         // a prefix that only starts alike
	} {
		if pk, err := k.ParseKey(key); err == nil {
			t.Errorf("ParseKey(%q) = %+v, want an error", key, pk)
		}
	}
	pk, err := k.ParseKey("/berth/cells/cell1")
	if err != nil || pk.Kind != KindCell || pk.Cell != "cell1" {
		t.Fatalf("cell record: %+v, %v", pk, err)
	}
	pk, err = k.ParseKey("/berth/server_groups/g1/slots/compute-1/3")
	if err != nil || pk.Kind != KindServerGroupSlot || pk.Group != "g1" || pk.Host != "compute-1" || pk.Slot != 3 {
		t.Fatalf("slot: %+v, %v", pk, err)
	}
}

// TestParseHostKey: the keys a host manager follows split into host and
// rest; anything not a host key under this prefix is refused, whatever
// the prefix's own depth.
func TestParseHostKey(t *testing.T) {
	for _, prefix := range []string{"/berth", "/a/b"} {
		k := New(prefix)
		for _, tc := range []struct{ key, host, rest string }{
			{k.Service("h1"), "h1", "service"},
			{k.Alive("h1"), "h1", "alive"},
			{k.HostInstance("h-2", "u1"), "h-2", "instances/u1"},
			{k.Build("h3", "u2"), "h3", "builds/u2"},
			{k.HostSync("h4"), "h4", "sync"},
		} {
			host, rest, err := k.ParseHostKey(tc.key)
			if err != nil || host != tc.host || rest != tc.rest {
				t.Errorf("ParseHostKey(%q) = %q, %q, %v; want %q, %q", tc.key, host, rest, err, tc.host, tc.rest)
			}
		}
		for _, key := range []string{prefix + "/hosts/h1", prefix + "/hosts/h1/", prefix + "/hosts//service",
			prefix + "/hosts/", prefix + "/hostsX/h1/service", prefix + "x/hosts/h1/service", prefix + "/host/h1/service",
			"/other" + prefix + "/hosts/h1/service", prefix, ""} {
			if host, rest, err := k.ParseHostKey(key); err == nil {
				t.Errorf("ParseHostKey(%q) = %q, %q, want an error", key, host, rest)
			}
		}
	}
}

// TestJoinIsPrefixSlashParts: join, built in one allocation, spells a key
// as prefix + "/" + the parts joined by "/", an empty part escaped.
func TestJoinIsPrefixSlashParts(t *testing.T) {
	for _, k := range []Keys{New("/berth"), New("/"), New("/a/b/")} {
		for _, tc := range []struct{ parts, want []string }{
			{nil, nil},
			{[]string{""}, []string{escapeMark}},
			{[]string{"placement"}, []string{"placement"}},
			{[]string{"placement", "providers", "2f9c0d1e"}, []string{"placement", "providers", "2f9c0d1e"}},
			{[]string{"", "x", ""}, []string{escapeMark, "x", escapeMark}},
		} {
			parts := tc.parts
			if got, want := k.join(parts...), k.prefix+"/"+strings.Join(tc.want, "/"); got != want {
				t.Errorf("%q.join(%q) = %q, want %q", k.prefix, parts, got, want)
			}
		}
	}
	if n := testing.AllocsPerRun(100, func() { _ = New("/berth").Provider("2f9c0d1e-0000-4000-8000-000000000001") }); n > 1 {
		t.Errorf("a provider key took %v allocations, want 1", n)
	}
}
