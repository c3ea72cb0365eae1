package etcdschema

import (
	"encoding/json"
	"math"
	"math/rand"
	"strings"
	"testing"
	"time"
)

func (g genPlacement) flavor() Flavor {
	f := Flavor{ID: g.str(), Name: g.str(), VCPUs: int(g.int64()), RAMMB: int(g.int64()), DiskGB: int(g.int64()),
		EphemeralGB: int(g.int64()), SwapMB: int(g.int64())}
	if g.rng.Intn(2) == 0 {
		f.Version = FlavorVersion
	}
	switch g.rng.Intn(4) {
	case 0:
	case 1:
		f.ExtraSpecs = map[string]string{}
	default:
		f.ExtraSpecs = map[string]string{}
		for n := 1 + g.rng.Intn(4); n > 0; n-- {
			f.ExtraSpecs[g.str()] = g.str()
		}
	}
	return f
}

func (g genPlacement) build() *Build {
	b := &Build{Op: []string{OpBuild, OpDelete, g.str()}[g.rng.Intn(3)], InstanceUUID: g.str(), Name: g.str(),
		Cell: g.str(), Flavor: g.flavor(), ProjectID: g.str(), UserID: g.str(), Attempt: int(g.int64()), CastAt: g.time()}
	if g.rng.Intn(2) == 0 {
		b.RequestID = g.str()
	}
	if g.rng.Intn(2) == 0 {
		b.Image = &BootImage{ID: g.str(), Name: g.str()}
		for n := g.rng.Intn(3); n > 0; n-- {
			b.Image.Command = append(b.Image.Command, g.str())
		}
	}
	return b
}

var (
	buildJSON = MustEncode(&Build{Op: OpBuild, InstanceUUID: "6a0c9b1e-0000-4000-8000-000000000002", Name: "server-1",
		Cell: "cell1", Flavor: Flavor{header: header{Version: 1}, ID: "2", Name: "m1.small", VCPUs: 1, RAMMB: 2048, DiskGB: 20,
			ExtraSpecs: map[string]string{"hw:cpu_policy": "dedicated", "aggregate_instance_extra_specs:ssd": "true"}},
		ProjectID: "p", UserID: "u", Attempt: 1, RequestID: "req-1", CastAt: providerCreated,
		Image: &BootImage{ID: "1d4a4b0c-0000-4000-8000-000000000003", Name: "sleeper", Command: []string{"sleep", "600"}}})
	leaseJSON = MustEncode(&Lease{Holder: "berth-1", LeaseID: 7587891349216435205, Since: providerCreated})
)

// TestCastsFastDecodeMatchesEncodingJSON: Build (with its nested Flavor)
// and Lease, as the placement records: random encoded values, reshaped,
// and edge cases decode exactly as encoding/json decodes them, or are
// declined; into empty destinations and into ones already holding values.
func TestCastsFastDecodeMatchesEncodingJSON(t *testing.T) {
	g := genPlacement{rand.New(rand.NewSource(5)), new(bool)}
	var builds, leases [][]byte
	for i := 0; i < 2000; i++ {
		*g.plain = i%2 == 0
		if b, err := Encode(g.build()); err == nil {
			builds = append(builds, b, reshape(g.rng, b))
		}
		l := &Lease{Holder: g.str(), LeaseID: g.int64(), Since: g.time()}
		if g.rng.Intn(3) == 0 {
			l.LeaseID = g.rng.Int63() // 19 digits, as etcd's lease ids mostly are
		}
		if b, err := Encode(l); err == nil {
			leases = append(leases, b, reshape(g.rng, b))
		}
	}
	builds = append(builds, placementEdgeCases(buildJSON)...)
	for _, v := range []string{`null`, `{}`, `{"id":"x"}`, `{"version":1,"version":1}`, `{"extra_specs":null}`,
		`{"extra_specs":{}}`, `{"extra_specs":{"a":"b","a":"c"}}`, `{"extra_specs":{"a":1}}`, `{"extra_specs":{"a":null}}`,
		`{"extra_specs":{"a":"\u0062"}}`, `{"extra_specs":[]}`, `{"EXTRA_SPECS":{}}`, `{"vcpus":1.5}`, `{"vcpus":"1"}`,
		`{"ram":9223372036854775808}`, `{"ram":-9223372036854775808}`, `[]`, `"m1"`, `{"id":"x"`, `{"other":1}`} {
		builds = append(builds, []byte(strings.Replace(buildJSON, `"flavor":{`, `"flavor":`+v+`,"x":{`, 1)))
		builds = append(builds, []byte(strings.Replace(buildJSON, `"flavor":{`, `"flavor":`+v+`,"flavor":{`, 1)))
	}
	for _, v := range []string{`"build"`, `"delete"`, `"BUILD"`, `""`, `null`, `"bu\u0069ld"`, `1`} {
		builds = append(builds, []byte(strings.Replace(buildJSON, `"op":"build"`, `"op":`+v, 1)))
	}
	leases = append(leases, placementEdgeCases(leaseJSON)...)
	for _, v := range []string{"9223372036854775807", "9223372036854775808", "-9223372036854775808", "-9223372036854775809",
		"99999999999999999999", "1234567890123456789", "-123456789012345678", "0", "-0", "1e3", "1.0", `"1"`, "null"} {
		leases = append(leases, []byte(strings.Replace(leaseJSON, `"lease_id":7587891349216435205`, `"lease_id":`+v, 1)))
	}
	fast := 0
	for _, in := range builds {
		if decodeBoth(t, in, Build{}) {
			fast++
		}
		decodeBoth(t, in, Build{Op: "old", Attempt: 3, Flavor: Flavor{ID: "old", VCPUs: 9}})
		decodeBoth(t, in, Build{Flavor: Flavor{ExtraSpecs: map[string]string{"old": "x"}}})
		decodeBoth(t, in, Build{Image: &BootImage{ID: "old", Command: []string{"old"}}})
	}
	for _, in := range leases {
		if decodeBoth(t, in, Lease{}) {
			fast++
		}
		decodeBoth(t, in, Lease{Holder: "old", LeaseID: math.MaxInt64, Since: time.Unix(5, 0).UTC()})
	}
	t.Logf("%d of %d values took the fast path", fast, len(builds)+len(leases))
	if fast < 2000 {
		t.Errorf("only %d of %d values took the fast path", fast, len(builds)+len(leases))
	}
	var b Build
	var l Lease
	if !b.decodeFast([]byte(buildJSON)) || !l.decodeFast([]byte(leaseJSON)) {
		t.Errorf("the fast path refused a Build or Lease as Berth writes them:\n%s\n%s", buildJSON, leaseJSON)
	}
	// A malformed cast still fails through Decode with an error naming
	// the key, as before the fast path.
	for _, s := range []string{`{"version":1,"op":"build","flavor":{"vcpus":"1"}}`, `{"version":1,"op":5}`, `{"op":"build"}`} {
		if err := Decode("/hosts/h/builds/u", []byte(s), &Build{}); err == nil || !strings.Contains(err.Error(), "/hosts/h/builds/u") {
			t.Errorf("Decode(%s) = %v, want an error naming the key", s, err)
		}
	}
}

// TestBuildOpDecodesAsBuild: Decode into a BuildOp succeeds or fails
// exactly as Decode into a fresh Build, with the same error, and keeps
// the same version and op; Berth's own casts take the fast path.
func TestBuildOpDecodesAsBuild(t *testing.T) {
	g := genPlacement{rand.New(rand.NewSource(9)), new(bool)}
	var inputs [][]byte
	for i := 0; i < 2000; i++ {
		*g.plain = i%2 == 0
		if b, err := Encode(g.build()); err == nil {
			inputs = append(inputs, b, reshape(g.rng, b))
		}
	}
	inputs = append(inputs, placementEdgeCases(buildJSON)...)
	for _, v := range []string{`null`, `{"vcpus":"1"}`, `{"extra_specs":{"a":1}}`, `{"id":5}`, `{"name":"\u0041"}`} {
		inputs = append(inputs, []byte(strings.Replace(buildJSON, `"flavor":{`, `"flavor":`+v+`,"x":{`, 1)))
	}
	for _, v := range []string{`"attempt":"1"`, `"cast_at":"x"`, `"request_id":null`, `"name":1`, `"cell":"\u0063"`} {
		inputs = append(inputs, []byte(strings.Replace(buildJSON, `"version":1`, `"version":1,`+v, 1)))
	}
	fast := 0
	for _, in := range inputs {
		var b Build
		var o BuildOp
		errB, errO := Decode("/k", in, &b), Decode("/k", in, &o)
		if (errB == nil) != (errO == nil) || (errB != nil && errB.Error() != errO.Error()) {
			t.Errorf("%q: Decode into a Build: %v; into a BuildOp: %v", in, errB, errO)
			continue
		}
		if errB == nil && (o.Op != b.Op || o.Version != b.Version) {
			t.Errorf("%q: BuildOp %+v, Build op %q version %d", in, o, b.Op, b.Version)
		}
		var f BuildOp
		if f.decodeFast(in) {
			fast++
			if err := json.Unmarshal(in, &Build{}); err != nil {
				t.Errorf("%q: the fast path took what encoding/json refuses as a Build: %v", in, err)
			}
		}
	}
	t.Logf("%d of %d values took the fast path", fast, len(inputs))
	if fast < 1000 {
		t.Errorf("only %d of %d values took the fast path", fast, len(inputs))
	}
	var o BuildOp
	if !o.decodeFast([]byte(buildJSON)) || o.Op != OpBuild || o.Version != BuildVersion {
		t.Errorf("the fast path refused a cast as Berth writes it, or read it as %+v", o)
	}
}

// BenchmarkDecodeCasts: Decode (fast path) against encoding/json on the
// cast and lease every scheduler follows.
func BenchmarkDecodeCasts(b *testing.B) {
	for _, tc := range []struct {
		name string
		data []byte
		new  func() Versioned
	}{
		{"build", []byte(buildJSON), func() Versioned { return &Build{} }},
		{"build-op", []byte(buildJSON), func() Versioned { return &BuildOp{} }},
		{"lease", []byte(leaseJSON), func() Versioned { return &Lease{} }},
	} {
		b.Run(tc.name+"/Decode", func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if err := Decode("k", tc.data, tc.new()); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(tc.name+"/json.Unmarshal", func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if err := json.Unmarshal(tc.data, tc.new()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
