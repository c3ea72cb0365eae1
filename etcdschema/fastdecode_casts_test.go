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
	if g.rng.Intn(2) == 0 {
		b.Instance = g.raw(0)
	}
	if g.rng.Intn(2) == 0 {
		b.Alternates = g.raw(0)
	}
	return b
}

// raw is a random JSON value for a json.RawMessage field: nested
// objects and arrays, numbers, literals and strings, one of them JSON
// itself (escaped, as an alternate's allocation_request is).
func (g genPlacement) raw(depth int) json.RawMessage {
	var v func(d int) any
	v = func(d int) any {
		switch n := g.rng.Intn(8); {
		case n == 0 && d < 4:
			m := map[string]any{}
			for k := g.rng.Intn(4); k > 0; k-- {
				m[g.str()] = v(d + 1)
			}
			return m
		case n == 1 && d < 4:
			var a []any
			for k := g.rng.Intn(4); k > 0; k-- {
				a = append(a, v(d+1))
			}
			return a
		case n == 2:
			return g.rng.NormFloat64() * 1e6
		case n == 3:
			return []any{true, false, nil}[g.rng.Intn(3)]
		case n == 4:
			inner, _ := json.Marshal(map[string]any{"allocations": map[string]any{g.str(): map[string]int64{"VCPU": g.int64()}}})
			return string(inner)
		default:
			return g.str()
		}
	}
	b, _ := json.Marshal(map[string]any{"uuid": g.str(), "v": v(depth)})
	return b
}

var (
	buildJSON = MustEncode(&Build{Op: OpBuild, InstanceUUID: "6a0c9b1e-0000-4000-8000-000000000002", Name: "server-1",
		Cell: "cell1", Flavor: Flavor{header: header{Version: 1}, ID: "2", Name: "m1.small", VCPUs: 1, RAMMB: 2048, DiskGB: 20,
			ExtraSpecs: map[string]string{"hw:cpu_policy": "dedicated", "aggregate_instance_extra_specs:ssd": "true"}},
		ProjectID: "p", UserID: "u", Attempt: 1, RequestID: "req-1", CastAt: providerCreated,
		Image: &BootImage{ID: "1d4a4b0c-0000-4000-8000-000000000003", Name: "sleeper", Command: []string{"sleep", "600"}},
		Instance: json.RawMessage(MustEncode(&Instance{UUID: "6a0c9b1e-0000-4000-8000-000000000002", Name: "server-1",
			Status: StatusBuild, TaskState: TaskSpawning, Host: "compute-1", Cell: "cell1", ProjectID: "p", UserID: "u",
			Metadata: map[string]string{"k": "v \"quoted\""}, CreatedAt: providerCreated, UpdatedAt: providerCreated})),
		Alternates: json.RawMessage(MustEncode(&Alternates{InstanceUUID: "6a0c9b1e-0000-4000-8000-000000000002", Cell: "cell1",
			MaxAttempts: 3, Attempts: []Attempt{{Host: "compute-1", At: providerCreated}},
			Remaining: []Selection{{ServiceHost: "compute-2", Nodename: "compute-2", Cell: "cell1",
				AllocationRequest: `{"allocations":{"rp-2":{"resources":{"VCPU":1}}}}`, AllocationRequestVersion: "1.36"}}}))})
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
	for _, v := range rawEdgeCases() {
		builds = append(builds, []byte(strings.Replace(buildJSON, `"flavor":{`, `"instance":`+v+`,"flavor":{`, 1)))
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
		decodeBoth(t, in, Build{Instance: json.RawMessage(`{"old":1}`), Alternates: json.RawMessage(`[]`)})
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
	for _, v := range rawEdgeCases() {
		inputs = append(inputs, []byte(strings.Replace(buildJSON, `"flavor":{`, `"alternates":`+v+`,"flavor":{`, 1)))
	}
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
	if !o.decodeFast([]byte(buildJSON)) || o.Op != OpBuild || o.Version != castFullVersion {
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
		{"build-op-bare", []byte(bareBuildJSON()), func() Versioned { return &BuildOp{} }},
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

// rawEdgeCases are values for a json.RawMessage member, valid and not:
// escapes, literals, numbers, nesting, control characters, truncation.
func rawEdgeCases() []string {
	return []string{`{}`, `[]`, `null`, `true`, `false`, `tru`, `nul`, `{"a":}`, `{"a" 1}`, `[1,]`, `[,1]`, `{"a":1,}`,
		`"\u00zz"`, `"\u00e9"`, `"a\"b"`, `"\x"`, `{"\u0061":1}`, `{"a\"b":[1,{"c":"d"}]}`, `-0.5e+3`, `01`, `1.`, `-`,
		`{"a":[{"b":[null,false]}]}`, "\"\x01\"", "\"\t\"", ` { "a" : [ 1 , 2 ] } `, `"\/\b\f\n\r\t\\"`,
		`"{\"allocations\":{}}"`, strings.Repeat("[", 70) + strings.Repeat("]", 70),
		strings.Repeat("[", 10) + strings.Repeat("]", 10), `{"a":1`, `[`, `"`}
}

// bareBuildJSON is buildJSON without the instance and alternates a build
// cast carries (a delete cast's shape, or a build's before they moved in).
func bareBuildJSON() string {
	var b Build
	if err := json.Unmarshal([]byte(buildJSON), &b); err != nil {
		panic(err)
	}
	b.Instance, b.Alternates = nil, nil
	return MustEncode(&b)
}
