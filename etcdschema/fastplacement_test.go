package etcdschema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"math/rand"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"
)

// genPlacement makes random Provider and Consumer values with awkward
// strings (escapes, HTML characters, unicode, invalid UTF-8, U+2028),
// floats at encoding/json's format boundaries, zero and zoned times, and
// nil against empty maps and slices.
// With plain set it makes what the fast decoder should take: no escapes,
// integers of at most 18 digits.
type genPlacement struct {
	rng   *rand.Rand
	plain *bool
}

var awkwardPieces = []string{"a", "Z", "0", "-", "_", " ", "\"", "\\", "/", "<", ">", "&", "é", "日本", "\x01", "\x08",
	"\x0c", "\n", "\r", "\t", "\x1f", "\x7f", "\u2028", "\u2029", "\xff", "\xed\xa0\x80", "\ufffd", "🚀", "null", "{", "}", "VCPU"}

func (g genPlacement) str() string {
	if *g.plain || g.rng.Intn(3) == 0 { // the common case: a plain identifier
		return []string{"VCPU", "MEMORY_MB", "DISK_GB", "CUSTOM_X", "2f9c0d1e-0000-4000-8000-000000000001", "compute-1", "",
			"é日本🚀", "a/b c\x7f", fmt.Sprint(g.rng.Intn(1000))}[g.rng.Intn(10)]
	}
	var sb strings.Builder
	for n := g.rng.Intn(6); n > 0; n-- {
		sb.WriteString(awkwardPieces[g.rng.Intn(len(awkwardPieces))])
	}
	return sb.String()
}

func (g genPlacement) strs() []string {
	switch g.rng.Intn(4) {
	case 0:
		return nil
	case 1:
		return []string{}
	}
	out := make([]string, 1+g.rng.Intn(4))
	for i := range out {
		out[i] = g.str()
	}
	return out
}

func (g genPlacement) int64() int64 {
	switch g.rng.Intn(6) {
	case 0:
		return 0
	case 1:
		return -g.rng.Int63n(1000)
	case 2:
		if !*g.plain {
			return g.rng.Int63() // 19 digits: the decoder leaves these to encoding/json
		}
	case 3:
		if !*g.plain {
			return math.MinInt64
		}
		return -999999999999999999
	}
	return g.rng.Int63n(1 << 20)
}

func (g genPlacement) float() float64 {
	boundaries := []float64{0, 1, 16, 1.5, 0.1, 1e21, 1e21 - 65536, 9.999999999999999e20, 1e-6, 1e-7, 9.99999e-7,
		1.0000001e-6, 123456789.125, 3.4e38, math.MaxFloat64, math.SmallestNonzeroFloat64, 5e-324, 1e100, 1e-100,
		math.Copysign(0, -1), 2.5e-8, 12345678901234567890}
	switch g.rng.Intn(4) {
	case 0:
		f := boundaries[g.rng.Intn(len(boundaries))]
		if g.rng.Intn(2) == 0 {
			f = -f
		}
		return f
	case 1:
		f := math.Float64frombits(g.rng.Uint64()) // any bits (NaN and Inf included: json.Marshal refuses those)
		if *g.plain && (math.IsNaN(f) || math.IsInf(f, 0)) {
			return 2
		}
		return f
	case 2:
		return g.rng.Float64() * math.Pow(10, float64(g.rng.Intn(50)-25))
	}
	return float64(g.rng.Intn(64)) / 4
}

func (g genPlacement) time() time.Time {
	switch g.rng.Intn(6) {
	case 0:
		return time.Time{}
	case 1:
		return time.Unix(g.rng.Int63n(4e9), 0).UTC()
	case 2:
		return time.Date(10000+g.rng.Intn(10), 1, 1, 0, 0, 0, 0, time.UTC) // MarshalJSON refuses
	}
	t := time.Unix(g.rng.Int63n(4e9), g.rng.Int63n(1e9))
	if g.rng.Intn(2) == 0 {
		return t.UTC()
	}
	return t.In(time.FixedZone("", 60*(g.rng.Intn(24*60*2)-24*60)))
}

func (g genPlacement) int64Map() map[string]int64 {
	switch g.rng.Intn(5) {
	case 0:
		return nil
	case 1:
		return map[string]int64{}
	}
	m := map[string]int64{}
	for n := 1 + g.rng.Intn(5); n > 0; n-- {
		m[g.str()] = g.int64()
	}
	return m
}

func (g genPlacement) provider() *Provider {
	p := &Provider{UUID: g.str(), Name: g.str(), Generation: g.int64(), RootProviderUUID: g.str(),
		Traits: g.strs(), Aggregates: g.strs(), Usages: g.int64Map(), CreatedAt: g.time(), UpdatedAt: g.time()}
	if g.rng.Intn(2) == 0 {
		p.ParentProviderUUID = g.str()
	}
	switch g.rng.Intn(5) {
	case 0:
	case 1:
		p.Inventories = map[string]Inventory{}
	default:
		p.Inventories = map[string]Inventory{}
		for n := 1 + g.rng.Intn(4); n > 0; n-- {
			p.Inventories[g.str()] = Inventory{Total: g.int64(), Reserved: g.int64(), MinUnit: g.int64(),
				MaxUnit: g.int64(), StepSize: g.int64(), AllocationRatio: g.float()}
		}
	}
	return p
}

func (g genPlacement) consumer() *Consumer {
	c := &Consumer{UUID: g.str(), Generation: g.int64(), ProjectID: g.str(), UserID: g.str(),
		CreatedAt: g.time(), UpdatedAt: g.time()}
	if g.rng.Intn(2) == 0 {
		c.ConsumerType = g.str()
	}
	switch g.rng.Intn(5) {
	case 0:
	case 1:
		c.Allocations = map[string]ConsumerAllocation{}
	default:
		c.Allocations = map[string]ConsumerAllocation{}
		for n := 1 + g.rng.Intn(3); n > 0; n-- {
			c.Allocations[g.str()] = ConsumerAllocation{Resources: g.int64Map()}
		}
		// The write order, kept only where it is not sorted: none, the
		// providers', some providers' classes, or both.
		if k := g.rng.Intn(4); k > 0 {
			c.Order = &AllocationOrder{}
			for rp, a := range c.Allocations {
				if k != 2 {
					c.Order.Providers = append(c.Order.Providers, rp)
				}
				if k != 1 && g.rng.Intn(2) == 0 {
					if c.Order.Classes == nil {
						c.Order.Classes = map[string][]string{}
					}
					for rc := range a.Resources {
						c.Order.Classes[rp] = append(c.Order.Classes[rp], rc)
					}
				}
			}
		}
	}
	return c
}

// TestPlacementFastEncodeMatchesJSONMarshal: Encode's own encoder writes
// exactly json.Marshal's bytes (and fails where it fails) for many
// random providers and consumers, and really is what Encode uses.
func TestPlacementFastEncodeMatchesJSONMarshal(t *testing.T) {
	g := genPlacement{rand.New(rand.NewSource(7)), new(bool)}
	fast, declined := 0, 0
	check := func(v interface {
		Versioned
		fastEncoder
	}) {
		v.setVersion(v.SchemaVersion())
		want, wantErr := json.Marshal(v)
		got, ok := v.appendJSON(nil)
		if !ok {
			declined++
			if wantErr == nil {
				t.Errorf("fast encoder declined what json.Marshal writes: %s", want)
			}
		} else {
			fast++
			if wantErr != nil {
				t.Errorf("fast encoder wrote %s where json.Marshal fails: %v", got, wantErr)
			} else if !bytes.Equal(got, want) {
				t.Errorf("fast encoder differs:\nfast %s\njson %s", got, want)
			}
		}
		enc, err := Encode(v)
		if (err != nil) != (wantErr != nil) || !bytes.Equal(enc, want) {
			t.Errorf("Encode = %s, %v; json.Marshal = %s, %v", enc, err, want, wantErr)
		}
		// EncodeString, through its pooled buffers (reused from one
		// value to the next), is Encode.
		str, err := EncodeString(v)
		if (err != nil) != (wantErr != nil) || str != string(want) {
			t.Errorf("EncodeString = %s, %v; json.Marshal = %s, %v", str, err, want, wantErr)
		}
	}
	for i := 0; i < 3000; i++ {
		check(g.provider())
		check(g.consumer())
	}
	// The values Berth writes, and the edge cases by hand.
	check(&Provider{})
	check(&Consumer{})
	check(&Provider{Inventories: map[string]Inventory{"A": {AllocationRatio: math.Inf(1)}}})
	check(&Provider{Inventories: map[string]Inventory{"A": {AllocationRatio: math.NaN()}}})
	check(&Provider{CreatedAt: time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)})
	check(&Consumer{UpdatedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("", 24*3600))})
	check(&Consumer{Allocations: map[string]ConsumerAllocation{"rp": {}}})
	check(&Consumer{Allocations: map[string]ConsumerAllocation{"b": {Resources: map[string]int64{"Z": 1, "a": 2, "B": 3, "é": 4, "": 5}}, "a": {}}})
	for _, f := range []float64{1e21, 1e20, 999999999999999999999, 1e-6, 1e-7, 0.000001, 0.0000001, 1.5e-7, -1e21, 5e-324, 1.7976931348623157e308} {
		check(&Provider{Inventories: map[string]Inventory{"VCPU": {Total: 1, AllocationRatio: f}}})
	}
	if fast < 1000 || declined == 0 {
		t.Errorf("fast encoder wrote %d values and declined %d: the generator should exercise both", fast, declined)
	}
}

// decodeBoth decodes in with Decode's fast path (falling back to
// encoding/json as Decode does) and with encoding/json alone, into copies
// of the same starting value, and reports any difference.
func decodeBoth[T any, PT interface {
	*T
	fastDecoder
}](t *testing.T, in []byte, start T) (tookFast bool) {
	t.Helper()
	want := start
	wantErr := json.Unmarshal(in, &want)
	got := start
	if tookFast = PT(&got).decodeFast(in); !tookFast {
		if !reflect.DeepEqual(got, start) {
			t.Errorf("%q: the fast path changed the value it declined: %+v", in, got)
		}
		if err := json.Unmarshal(in, &got); err != nil {
			if wantErr == nil {
				t.Errorf("%q: fallback failed where encoding/json did not", in)
			}
			return false
		}
	} else if wantErr != nil {
		t.Errorf("%q: fast path accepted what encoding/json rejects: %v", in, wantErr)
		return true
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%q:\nfast %#v\njson %#v", in, got, want)
	}
	return tookFast
}

// TestPlacementFastDecodeMatchesEncodingJSON: for encoded random values,
// for their JSON reshaped (members reordered, whitespace, names in other
// case, duplicates, nulls) and for hand-written edge cases, the fast path
// gives exactly encoding/json's value or declines.
func TestPlacementFastDecodeMatchesEncodingJSON(t *testing.T) {
	g := genPlacement{rand.New(rand.NewSource(11)), new(bool)}
	fast := 0
	var provs, cons [][]byte
	for i := 0; i < 2000; i++ {
		*g.plain = i%2 == 0
		if b, err := Encode(g.provider()); err == nil {
			provs = append(provs, b, reshape(g.rng, b))
		}
		if b, err := Encode(g.consumer()); err == nil {
			cons = append(cons, b, reshape(g.rng, b))
		}
	}
	provs = append(provs, placementEdgeCases(providerJSON)...)
	cons = append(cons, placementEdgeCases(consumerJSON)...)
	for _, in := range provs {
		if decodeBoth(t, in, Provider{}) {
			fast++
		}
		// A destination already holding values: scalars are kept where
		// the input lacks them, maps and slices leave it to encoding/json.
		decodeBoth(t, in, Provider{Name: "old", CreatedAt: time.Unix(5, 0).UTC()})
		decodeBoth(t, in, Provider{Usages: map[string]int64{"OLD": 1}, Traits: []string{"T"}})
	}
	for _, in := range cons {
		if decodeBoth(t, in, Consumer{}) {
			fast++
		}
		decodeBoth(t, in, Consumer{ProjectID: "old"})
		decodeBoth(t, in, Consumer{Allocations: map[string]ConsumerAllocation{"rp": {}}})
	}
	// DecodeConsumerKey, whatever uuid and earlier consumer its caller
	// has, is Decode, and leaves the earlier consumer as it was.
	var likes []*Consumer
	for _, in := range cons {
		want := &Consumer{}
		wantErr := Decode("/c", in, want)
		if wantErr == nil {
			likes = append(likes, want)
		}
		for _, uuid := range []string{"", want.UUID, "2f9c0d1e-0000-4000-8000-000000000001", "x"} {
			other := (*Consumer)(nil)
			if len(likes) > 0 {
				other = likes[g.rng.Intn(len(likes))]
			}
			for _, like := range []*Consumer{nil, want, other, {ProjectID: "p", UserID: "u", ConsumerType: "INSTANCE"}} {
				var before Consumer
				if like != nil {
					before = *like
				}
				var rps []string
				for rp := range want.Allocations {
					rps = append(rps, "other", rp)
				}
				got, err := DecodeConsumerKey([]byte("/c"), in, uuid, like, rps)
				if (err == nil) != (wantErr == nil) || (err != nil && err.Error() != wantErr.Error()) || !reflect.DeepEqual(got, want) {
					t.Errorf("%q with uuid %q after %+v: DecodeConsumerKey gave %#v, %v; Decode %#v, %v", in, uuid, like, got, err, want, wantErr)
				}
				if like != nil && !reflect.DeepEqual(*like, before) {
					t.Errorf("%q: the earlier consumer was changed", in)
				}
			}
		}
	}
	uuid := strings.Clone("6a0c9b1e-0000-4000-8000-000000000002")
	like := &Consumer{ProjectID: strings.Clone("p"), UserID: strings.Clone("u")}
	rp := strings.Clone("2f9c0d1e-0000-4000-8000-000000000001")
	got, err := DecodeConsumerKey([]byte("/c"), []byte(consumerJSON), uuid, like, []string{"x", rp})
	var gotRP string
	for k := range got.Allocations {
		gotRP = k
	}
	var likeC Consumer
	if err := Decode("/c", []byte(consumerJSON), &likeC); err != nil {
		t.Fatal(err)
	}
	if again, err := DecodeConsumerKey([]byte("/c"), []byte(consumerJSON), uuid, &likeC, nil); err != nil ||
		reflect.ValueOf(again.Allocations[rp].Resources).Pointer() != reflect.ValueOf(likeC.Allocations[rp].Resources).Pointer() {
		t.Errorf("DecodeConsumerKey did not share the earlier consumer's equal resources: %+v, %v", again, err)
	}
	if err != nil || unsafe.StringData(got.UUID) != unsafe.StringData(uuid) || unsafe.StringData(gotRP) != unsafe.StringData(rp) ||
		unsafe.StringData(got.ProjectID) != unsafe.StringData(like.ProjectID) || unsafe.StringData(got.UserID) != unsafe.StringData(like.UserID) {
		t.Errorf("DecodeConsumerKey did not share the caller's uuid and provider and the earlier consumer's project and user: %+v, %v", got, err)
	}
	t.Logf("%d of %d values took the fast path", fast, len(provs)+len(cons))
	if fast < 2000 {
		t.Errorf("only %d of %d values took the fast path", fast, len(provs)+len(cons))
	}
	// What Berth writes takes the fast path.
	var p Provider
	if !p.decodeFast([]byte(providerJSON)) {
		t.Errorf("the fast path refused a provider as Berth writes it: %s", providerJSON)
	}
	var c Consumer
	if !c.decodeFast([]byte(consumerJSON)) {
		t.Errorf("the fast path refused a consumer as Berth writes it: %s", consumerJSON)
	}
}

var (
	providerCreated = time.Date(2026, 11, 22, 1, 2, 3, 456789000, time.UTC)
	providerJSON    = MustEncode(&Provider{UUID: "2f9c0d1e-0000-4000-8000-000000000001", Name: "compute-000001",
		Generation: 7, RootProviderUUID: "2f9c0d1e-0000-4000-8000-000000000001",
		Inventories: map[string]Inventory{
			"VCPU":      {Total: 64, MinUnit: 1, MaxUnit: 64, StepSize: 1, AllocationRatio: 16},
			"MEMORY_MB": {Total: 262144, Reserved: 512, MinUnit: 1, MaxUnit: 262144, StepSize: 1, AllocationRatio: 1.5},
			"DISK_GB":   {Total: 2000, MinUnit: 1, MaxUnit: 2000, StepSize: 1, AllocationRatio: 1}},
		Traits: []string{"COMPUTE_STATUS_DISABLED", "HW_CPU_X86_AVX2"}, Aggregates: []string{},
		Usages:    map[string]int64{"VCPU": 10, "MEMORY_MB": 20480},
		CreatedAt: time.Date(2026, 11, 22, 1, 2, 3, 456789000, time.UTC), UpdatedAt: time.Date(2026, 11, 22, 1, 2, 4, 0, time.UTC)})
	consumerJSON = MustEncode(&Consumer{UUID: "6a0c9b1e-0000-4000-8000-000000000002", Generation: 1, ProjectID: "p", UserID: "u",
		Allocations: map[string]ConsumerAllocation{"2f9c0d1e-0000-4000-8000-000000000001": {Resources: map[string]int64{"VCPU": 1, "MEMORY_MB": 2048}}},
		CreatedAt:   time.Date(2026, 11, 22, 1, 2, 3, 456789000, time.UTC), UpdatedAt: time.Date(2026, 11, 22, 1, 2, 3, 456789000, time.UTC)})
)

// reshape rewrites encoded JSON as another writer (or an older Berth)
// might: whitespace between tokens, and sometimes a member name changed
// in case, repeated, or its value replaced by null. Strings are kept
// intact (the tokenizer below skips over them).
func reshape(rng *rand.Rand, b []byte) []byte {
	var out []byte
	ws := []string{"", " ", "\n", "\t", "\r\n  "}
	inStr, esc := false, false
	for i, c := range b {
		if inStr {
			out = append(out, c)
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
			}
			continue
		}
		if c == '"' {
			inStr = true
			// A member name: sometimes in another case (encoding/json
			// matches it to the field; the fast path must decline).
			if i > 0 && (b[i-1] == '{' || b[i-1] == ',') && rng.Intn(20) == 0 {
				j := bytes.IndexByte(b[i+1:], '"')
				out = append(out, '"')
				out = append(out, bytes.ToUpper(b[i+1:i+1+j])...)
				out = append(out, '"')
				return append(out, b[i+2+j:]...)
			}
		}
		out = append(out, c)
		if c == '{' || c == ',' || c == ':' || c == '[' {
			out = append(out, ws[rng.Intn(len(ws))]...)
		}
	}
	if rng.Intn(4) == 0 {
		out = append(append([]byte(" \n"), out...), "\t "...)
	}
	return out
}

// placementEdgeCases are hand-written variants of a valid record: each
// must decode as encoding/json decodes it, or be declined.
func placementEdgeCases(valid string) [][]byte {
	var out [][]byte
	add := func(s string) { out = append(out, []byte(s)) }
	add(valid)
	add(" \t\r\n" + valid + " \n")
	add(valid + "x")
	add(valid + "}")
	add(valid[:len(valid)-1])
	add(valid[:len(valid)-1] + `,}`)
	add(strings.Replace(valid, `{"version":1,`, `{`, 1))                                    // no version: Decode's error
	add(strings.Replace(valid, `{"version":1,`, `{"version":1,"version":1,`, 1))            // repeated
	add(strings.Replace(valid, `{"version":1,`, `{"Version":1,`, 1))                        // case
	add(strings.Replace(valid, `{"version":1,`, `{"version":2,`, 1))                        // newer: Decode's error
	add(strings.Replace(valid, `{"version":1,`, `{"version":0,`, 1))                        // older than any
	add(strings.Replace(valid, `{"version":1,`, `{"version":-1,`, 1))                       // negative
	add(strings.Replace(valid, `{"version":1,`, `{"version":1.0,`, 1))                      // not an int
	add(strings.Replace(valid, `{"version":1,`, `{"version":1e0,`, 1))                      // not an int
	add(strings.Replace(valid, `{"version":1,`, `{"version":01,`, 1))                       // invalid JSON
	add(strings.Replace(valid, `{"version":1,`, `{"version":"1",`, 1))                      // a string
	add(strings.Replace(valid, `{"version":1,`, `{"version":null,`, 1))                     // null
	add(strings.Replace(valid, `{"version":1,`, `{"version":99999999999999999999,`, 1))     // overflow
	add(strings.Replace(valid, `{"version":1,`, `{"version":999999999999999999,`, 1))       // 18 digits
	add(strings.Replace(valid, `{"version":1,`, `{"version":-0,`, 1))                       // -0
	add(strings.Replace(valid, `{"version":1,`, `{"version":1,"other":{"a":[1,null]},`, 1)) // unknown member
	add(strings.Replace(valid, `{"version":1,`, `{"version":1,"other":1,`, 1))
	add(strings.Replace(valid, `"uuid":"`, `"uuid":"\u0041`, 1))          // an escape
	add(strings.Replace(valid, `"uuid":"`, `"uuid":"\"`, 1))              // an escaped quote
	add(strings.Replace(valid, `"uuid":"`, "\"uuid\":\"\x01", 1))         // a control byte
	add(strings.Replace(valid, `"uuid":"`, "\"uuid\":\"é日本🚀\x7f", 1))     // unicode: kept as is
	add(strings.Replace(valid, `"uuid":"`, "\"uuid\":\"\xff", 1))         // invalid UTF-8: replaced by encoding/json
	add(strings.Replace(valid, `"uuid":"`, "\"uuid\":\"\xed\xa0\x80", 1)) // a surrogate
	add(strings.Replace(valid, `"uuid":"`, "\"uuid\":\"\u2028", 1))       // raw U+2028 is valid
	add(strings.Replace(valid, `"uuid":"`, `"uuid":null,"x":"`, 1))       // null string
	add(strings.Replace(valid, `"uuid":"`, `"uuid":5,"x":"`, 1))          // a number for a string
	add(strings.Replace(valid, `"generation":`, `"generation":-`, 1))     // negative generation
	add(strings.Replace(valid, `"generation":`, `"generation":"`, 1))     // broken
	add(strings.Replace(valid, `"created_at":"`, `"created_at":"x`, 1))   // bad time
	add(strings.Replace(valid, `"created_at":"2026`, `"created_at":"0000`, 1))
	add(strings.Replace(valid, `"created_at":"`, `"created_at":null,"x":"`, 1))
	add(strings.Replace(valid, `Z"`, `+05:30"`, 1))                       // a zone
	add(strings.Replace(valid, `Z"`, `+00:00"`, 1))                       // UTC spelled as an offset
	add(strings.Replace(valid, `Z"`, `z"`, 1))                            // lower-case z: strict RFC 3339 refuses it
	add(strings.Replace(valid, `T01`, ` 01`, 1))                          // a space for T
	add(strings.Replace(valid, `":{`, `":null,"x":{`, 1))                 // null map
	add(strings.Replace(valid, `":{`, `":{},"y":{`, 1))                   // empty map then unknown
	add(strings.Replace(valid, `":{"`, `":{"A":1,"`, 1))                  // a number where an object belongs
	add(strings.Replace(valid, `":{"`, `":{"VCPU":{"total":1},"`, 1))     // a repeated key in a map
	add(strings.Replace(valid, `"VCPU":`, `"VCPU" : `, -1))               // spaces
	add(strings.Replace(valid, `"VCPU":`, `"vcpu":`, -1))                 // map keys are exact
	add(strings.Replace(valid, `"total":64`, `"total":64,"total":65`, 1)) // repeated member of an inventory
	add(strings.Replace(valid, `"total":64`, `"Total":64`, 1))            // case in an inventory
	add(strings.Replace(valid, `"total":64`, `"total":64,"extra":1`, 1))  // unknown in an inventory
	add(strings.Replace(valid, `"allocation_ratio":16`, `"allocation_ratio":16.0`, 1))
	add(strings.Replace(valid, `"allocation_ratio":16`, `"allocation_ratio":1.6e1`, 1))
	add(strings.Replace(valid, `"allocation_ratio":16`, `"allocation_ratio":1.6E+1`, 1))
	add(strings.Replace(valid, `"allocation_ratio":16`, `"allocation_ratio":-0`, 1))
	add(strings.Replace(valid, `"allocation_ratio":16`, `"allocation_ratio":1e400`, 1)) // out of range: json's error
	add(strings.Replace(valid, `"allocation_ratio":16`, `"allocation_ratio":1e-400`, 1))
	add(strings.Replace(valid, `"allocation_ratio":16`, `"allocation_ratio":0.1000000000000000055511151231257827021181583404541015625`, 1))
	add(strings.Replace(valid, `"allocation_ratio":16`, `"allocation_ratio":.5`, 1))
	add(strings.Replace(valid, `"allocation_ratio":16`, `"allocation_ratio":1.`, 1))
	add(strings.Replace(valid, `"allocation_ratio":16`, `"allocation_ratio":1e`, 1))
	add(strings.Replace(valid, `"allocation_ratio":16`, `"allocation_ratio":+1`, 1))
	add(strings.Replace(valid, `"allocation_ratio":16`, `"allocation_ratio":Infinity`, 1))
	add(strings.Replace(valid, `"allocation_ratio":16`, `"allocation_ratio":"16"`, 1))
	add(strings.Replace(valid, `"allocation_ratio":16`, `"allocation_ratio":0x10`, 1))
	add(strings.Replace(valid, `"traits":[`, `"traits":[ "A" , "B" ,`, 1))
	add(strings.Replace(valid, `"traits":[`, `"traits":[null,`, 1))
	add(strings.Replace(valid, `"traits":[`, `"traits":[1,`, 1))
	add(strings.Replace(valid, `"traits":[`, `"traits":[,`, 1))
	add(strings.Replace(valid, `"traits":[`, `"traits":null,"x":[`, 1))
	add(strings.Replace(valid, `"aggregates":[]`, `"aggregates":[ ]`, 1))
	add(strings.Replace(valid, `"aggregates":[]`, `"aggregates":["a",]`, 1))
	add(strings.Replace(valid, `"resources":{`, `"resources":{"DISK_GB":1,`, 1))
	add(strings.Replace(valid, `"resources":{`, `"resources":{"VCPU":1,`, 1))       // repeated class
	add(strings.Replace(valid, `"resources":{`, `"resources":null,"x":{`, 1))       // null
	add(strings.Replace(valid, `"resources":{`, `"resources":{},"resources":{`, 1)) // repeated member
	add(strings.Replace(valid, `"resources":{`, `"generation":1,"resources":{`, 1)) // unknown in an allocation
	add(strings.Replace(valid, `"resources":{`, `"Resources":{`, 1))
	add(strings.Replace(valid, `"allocations":{`, `"allocations":{},"allocations":{`, 1))
	add(strings.Replace(valid, `"usages":{`, `"usages":{"Z":9},"usages":{`, 1))                                 // encoding/json merges
	add(strings.Replace(valid, `"allocations":{`, `"allocations":{"rpZ":{"resources":{}}},"allocations":{`, 1)) // merges
	add(strings.Replace(valid, `"traits":[`, `"traits":["Z"],"traits":[`, 1))
	// The generation's value replaced by each of these numbers.
	gen := regexp.MustCompile(`"generation":[0-9]+`)
	for _, n := range []string{"9999999999999999999", "9223372036854775807", "9223372036854775808", "-9223372036854775808",
		"-9223372036854775809", "999999999999999999", "-999999999999999999", "-0", "0", "00", "-", "1.5", "2e3"} {
		add(gen.ReplaceAllLiteralString(valid, `"generation":`+n))
	}
	add(strings.Replace(valid, `"usages":{`, `"usages":{"VCPU":1.5,`, 1))
	add(strings.Replace(valid, `"usages":{`, `"usages":{"X":-9223372036854775808,`, 1))
	add(`{}`)
	add(` { } `)
	add(`{"version":1}`)
	add(`[]`)
	add(`null`)
	add(``)
	add(`{`)
	add(`{"version":1,}`)
	add(`{"version" 1}`)
	add(`{"version":1 "uuid":"u"}`)
	// Members in another order (an older Berth, another writer).
	var m map[string]json.RawMessage
	if json.Unmarshal([]byte(valid), &m) == nil {
		var sb strings.Builder
		sb.WriteString("{\n")
		first := true
		for k, v := range m { // map order: random
			if !first {
				sb.WriteString(",\n")
			}
			first = false
			sb.WriteString("  " + `"` + k + `": ` + string(v))
		}
		sb.WriteString("\n}\n")
		add(sb.String())
	}
	return out
}

// TestDecodeOlderPlacementRecords: records as an older Berth or another
// writer may have left them (members in another order, indented,
// unknown members, a version this build does not read) decode through
// Decode as encoding/json reads them, or fail with Decode's version error.
func TestDecodeOlderPlacementRecords(t *testing.T) {
	older := `{
  "updated_at": "2025-01-02T03:04:05Z",
  "usages": {"VCPU": 2},
  "uuid": "rp1", "name": "h1", "generation": 3, "root_provider_uuid": "rp1",
  "inventories": {"VCPU": {"allocation_ratio": 16.0, "total": 8, "max_unit": 8, "min_unit": 1, "step_size": 1, "reserved": 0}},
  "traits": ["T"], "aggregates": null, "legacy_field": true,
  "created_at": "2025-01-02T03:04:05.5+01:00",
  "version": 1
}`
	var p Provider
	if err := Decode("k", []byte(older), &p); err != nil {
		t.Fatal(err)
	}
	if p.UUID != "rp1" || p.Generation != 3 || p.Inventories["VCPU"].AllocationRatio != 16 || p.Inventories["VCPU"].Total != 8 ||
		p.Usages["VCPU"] != 2 || len(p.Traits) != 1 || p.Aggregates != nil || p.CreatedAt.Nanosecond() != 5e8 {
		t.Errorf("older provider record decoded as %+v", p)
	}
	var p2 Provider
	if !p2.decodeFast([]byte(strings.Replace(strings.Replace(older, `"legacy_field": true,`, ``, 1), `null`, `[]`, 1))) {
		t.Errorf("the fast path refused a reordered, indented record")
	}
	for _, s := range []string{
		`{"version":2,"uuid":"c","allocations":{}}`,
		`{"uuid":"c","allocations":{}}`,
	} {
		var c Consumer
		if err := Decode("/c", []byte(s), &c); err == nil || !strings.Contains(err.Error(), "/c") {
			t.Errorf("Decode(%s) = %v, want a version error naming the key", s, err)
		}
	}
	var c Consumer
	err := Decode("/c", []byte(`{"version":1,"uuid":"c","allocations":{"rp":{"resources":{"VCPU":1.5}}}}`), &c)
	if err == nil || !strings.Contains(err.Error(), "decode /c") {
		t.Errorf("a fraction in resources: %v, want encoding/json's error naming the key", err)
	}
}

// BenchmarkPlacementRecords: Decode and Encode of the provider and
// consumer a claim writes, against encoding/json.
func BenchmarkPlacementRecords(b *testing.B) {
	for _, tc := range []struct {
		name string
		data []byte
		new  func() Versioned
	}{
		{"provider", []byte(providerJSON), func() Versioned { return &Provider{} }},
		{"consumer", []byte(consumerJSON), func() Versioned { return &Consumer{} }},
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
		v := tc.new()
		if err := Decode("k", tc.data, v); err != nil {
			b.Fatal(err)
		}
		b.Run(tc.name+"/Encode", func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if _, err := Encode(v); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(tc.name+"/json.Marshal", func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if _, err := json.Marshal(v); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestDecodeProviderAfterMatchesDecode: decoding a provider record after
// another (the one it replaces) gives exactly Decode's value and error,
// whatever the previous record; prev is left as it was; and a record
// that changed only in usages and generation shares prev's parts.
func TestDecodeProviderAfterMatchesDecode(t *testing.T) {
	g := genPlacement{rand.New(rand.NewSource(13)), new(bool)}
	var inputs [][]byte
	var after []*Provider // for each input, the record it replaces (nil: none)
	var prevs []*Provider
	for i := 0; i < 1500; i++ {
		*g.plain = i%2 == 0
		p := g.provider()
		b, err := Encode(p)
		if err != nil {
			continue
		}
		inputs = append(inputs, b, reshape(g.rng, b))
		after = append(after, nil, nil)
		var dec Provider
		if Decode("k", b, &dec) == nil {
			// The record decoded, then a claim's change of it, then
			// others: a trait or an inventory changed, one more or less.
			prevs = append(prevs, &dec)
			next := dec
			next.Generation++
			next.Usages = map[string]int64{"VCPU": g.int64()}
			for _, mod := range []func(*Provider){
				func(*Provider) {},
				func(p *Provider) { p.Traits = append(append([]string{}, p.Traits...), "X") },
				func(p *Provider) {
					if len(p.Traits) > 0 {
						p.Traits = p.Traits[:len(p.Traits)-1]
					}
				},
				func(p *Provider) {
					if len(p.Traits) > 0 {
						p.Traits = append([]string{"Y"}, p.Traits[1:]...)
					}
				},
				func(p *Provider) {
					p.Inventories = maps.Clone(p.Inventories)
					for rc, inv := range p.Inventories {
						inv.AllocationRatio = math.Copysign(inv.AllocationRatio, -1)
						p.Inventories[rc] = inv
						break
					}
				},
				func(p *Provider) {
					p.Inventories = maps.Clone(p.Inventories)
					if p.Inventories == nil {
						p.Inventories = map[string]Inventory{}
					}
					p.Inventories["VCPU"] = Inventory{Total: 1}
				},
				func(p *Provider) { p.Aggregates, p.Traits, p.Inventories = nil, nil, nil },
				func(p *Provider) { p.Name, p.RootProviderUUID, p.ParentProviderUUID = "other", p.UUID+"x", "" },
			} {
				n := next
				mod(&n)
				if b, err := Encode(&n); err == nil {
					inputs = append(inputs, b)
					after = append(after, &dec)
				}
			}
		}
	}
	// A class repeated where the previous record has two equal ones.
	inv := Inventory{Total: 8, MinUnit: 1, MaxUnit: 8, StepSize: 1, AllocationRatio: 1}
	twin := &Provider{UUID: "rp", RootProviderUUID: "rp", Inventories: map[string]Inventory{"A": inv, "B": inv}}
	twinJSON := MustEncode(twin)
	inputs = append(inputs, []byte(strings.Replace(twinJSON, `"B":`, `"A":`, 1)))
	after = append(after, twin)
	inputs = append(inputs, placementEdgeCases(providerJSON)...)
	var p0 Provider
	if err := Decode("k", []byte(providerJSON), &p0); err != nil {
		t.Fatal(err)
	}
	prevs = append(prevs, &p0, &Provider{}, &Provider{Traits: []string{}, Aggregates: []string{}, Inventories: map[string]Inventory{}})
	shared := 0
	for i, in := range inputs {
		want := &Provider{}
		wantErr := Decode("/p", in, want)
		own := &p0
		if i < len(after) && after[i] != nil {
			own = after[i]
		}
		for _, prev := range []*Provider{own, prevs[g.rng.Intn(len(prevs))], nil} {
			var before Provider
			if prev != nil {
				before = deepCopyProvider(prev)
			}
			got, err := DecodeProviderAfter("/p", in, prev)
			if (err == nil) != (wantErr == nil) || (err != nil && err.Error() != wantErr.Error()) {
				t.Errorf("%q after %+v: error %v, Decode's %v", in, prev, err, wantErr)
				continue
			}
			gotKey, errKey := DecodeProviderAfterKey([]byte("/p"), in, prev)
			if (errKey == nil) != (wantErr == nil) || (errKey != nil && errKey.Error() != wantErr.Error()) || !reflect.DeepEqual(gotKey, want) {
				t.Errorf("%q after %+v: DecodeProviderAfterKey gave %#v, %v; Decode %#v, %v", in, prev, gotKey, errKey, want, wantErr)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%q after %+v:\ngot  %#v\nwant %#v", in, prev, got, want)
			}
			if prev != nil && !reflect.DeepEqual(*prev, before) {
				t.Errorf("%q: the previous record was changed", in)
			}
			if prev != nil && err == nil && len(got.Inventories) > 0 &&
				reflect.ValueOf(got.Inventories).Pointer() == reflect.ValueOf(prev.Inventories).Pointer() {
				shared++
			}
		}
	}
	t.Logf("%d decodes shared the previous record's inventories", shared)
	if shared < 1000 {
		t.Errorf("only %d decodes shared the previous record's inventories", shared)
	}
	// -0 is not 0 (reflect.DeepEqual cannot tell them apart).
	zero := &Provider{UUID: "rp", RootProviderUUID: "rp", Inventories: map[string]Inventory{"A": {Total: 1}}}
	negZero := strings.Replace(MustEncode(zero), `"allocation_ratio":0`, `"allocation_ratio":-0`, 1)
	if got, err := DecodeProviderAfter("/p", []byte(negZero), zero); err != nil || !math.Signbit(got.Inventories["A"].AllocationRatio) {
		t.Errorf("%s after a ratio of 0: %+v, %v; want -0", negZero, got, err)
	}
	// A claim's change: everything but usages, generation and the update
	// time is the previous record's own.
	claimed := deepCopyProvider(&p0)
	claimed.Generation++
	claimed.Usages = map[string]int64{"VCPU": 11, "MEMORY_MB": 22528}
	claimed.UpdatedAt = claimed.UpdatedAt.Add(time.Second)
	got, err := DecodeProviderAfter("/p", []byte(MustEncode(&claimed)), &p0)
	if err != nil {
		t.Fatal(err)
	}
	if reflect.ValueOf(got.Inventories).Pointer() != reflect.ValueOf(p0.Inventories).Pointer() ||
		&got.Traits[0] != &p0.Traits[0] || unsafe.StringData(got.UUID) != unsafe.StringData(p0.UUID) ||
		unsafe.StringData(got.Name) != unsafe.StringData(p0.Name) || got.Usages["VCPU"] != 11 {
		t.Errorf("a claim's provider record did not share the previous record's parts: %+v", got)
	}
}

func deepCopyProvider(p *Provider) Provider {
	c := *p
	c.Inventories = maps.Clone(p.Inventories)
	c.Usages = maps.Clone(p.Usages)
	c.Traits = slices.Clone(p.Traits)
	c.Aggregates = slices.Clone(p.Aggregates)
	return c
}

// TestProviderRecordLeavesOutEmptyMembers: a compute node's provider
// record (no traits, no aggregates, reserved 0 in some classes) is
// written without those members, and reads back the same through this
// build's decoders and through an older Berth's reader (its struct with
// the members it always wrote, read by encoding/json as its fallback
// does): nil lists and 0 reserved, as the nulls and zeros it wrote meant.
// A provider with traits, aggregates and a reserve still writes them.
func TestProviderRecordLeavesOutEmptyMembers(t *testing.T) {
	type olderInventory struct {
		Total           int64   `json:"total"`
		Reserved        int64   `json:"reserved"`
		MinUnit         int64   `json:"min_unit"`
		MaxUnit         int64   `json:"max_unit"`
		StepSize        int64   `json:"step_size"`
		AllocationRatio float64 `json:"allocation_ratio"`
	}
	type olderProvider struct {
		Version          int                       `json:"version"`
		UUID             string                    `json:"uuid"`
		Generation       int64                     `json:"generation"`
		RootProviderUUID string                    `json:"root_provider_uuid"`
		Inventories      map[string]olderInventory `json:"inventories"`
		Traits           []string                  `json:"traits"`
		Aggregates       []string                  `json:"aggregates"`
		Usages           map[string]int64          `json:"usages"`
	}
	at := time.Date(2026, 11, 28, 2, 45, 10, 39955663, time.UTC)
	inv := map[string]Inventory{
		"DISK_GB":   {Total: 1000, MinUnit: 1, MaxUnit: 1000, StepSize: 1, AllocationRatio: 1},
		"MEMORY_MB": {Total: 65536, Reserved: 512, MinUnit: 1, MaxUnit: 65536, StepSize: 1, AllocationRatio: 1},
	}
	for _, tc := range []struct {
		name        string
		p           Provider
		has, hasNot []string
	}{
		{"compute node", Provider{UUID: "rp1", Name: "compute-1", Generation: 2, RootProviderUUID: "rp1",
			Inventories: inv, Usages: map[string]int64{"DISK_GB": 20}, CreatedAt: at, UpdatedAt: at},
			[]string{`"MEMORY_MB":{"total":65536,"reserved":512,`}, []string{`"traits"`, `"aggregates"`, `"reserved":0`}},
		{"empty lists", Provider{UUID: "rp1", Name: "compute-1", RootProviderUUID: "rp1", Traits: []string{}, Aggregates: []string{},
			CreatedAt: at, UpdatedAt: at}, nil, []string{`"traits"`, `"aggregates"`}},
		{"traits and aggregates", Provider{UUID: "rp1", Name: "compute-1", RootProviderUUID: "rp1", Inventories: inv,
			Traits: []string{"COMPUTE_STATUS_DISABLED"}, Aggregates: []string{"agg1"}, CreatedAt: at, UpdatedAt: at},
			[]string{`"traits":["COMPUTE_STATUS_DISABLED"]`, `"aggregates":["agg1"]`}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data, err := EncodeBytes(&tc.p)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range tc.has {
				if !bytes.Contains(data, []byte(s)) {
					t.Errorf("record %s lacks %s", data, s)
				}
			}
			for _, s := range tc.hasNot {
				if bytes.Contains(data, []byte(s)) {
					t.Errorf("record %s has %s", data, s)
				}
			}
			var got Provider
			if err := Decode("k", data, &got); err != nil {
				t.Fatal(err)
			}
			var old olderProvider
			if err := json.Unmarshal(data, &old); err != nil {
				t.Fatal(err)
			}
			for _, traits := range [][]string{got.Traits, old.Traits} {
				if !slices.Equal(traits, tc.p.Traits) {
					t.Errorf("traits read back %q, want %q", traits, tc.p.Traits)
				}
			}
			for _, aggs := range [][]string{got.Aggregates, old.Aggregates} {
				if !slices.Equal(aggs, tc.p.Aggregates) {
					t.Errorf("aggregates read back %q, want %q", aggs, tc.p.Aggregates)
				}
			}
			if !maps.Equal(got.Inventories, tc.p.Inventories) {
				t.Errorf("inventories read back %v, want %v", got.Inventories, tc.p.Inventories)
			}
			if len(old.Inventories) != len(tc.p.Inventories) {
				t.Errorf("an older reader read %d inventories, want %d", len(old.Inventories), len(tc.p.Inventories))
			}
			for rc, o := range old.Inventories {
				if Inventory(o) != tc.p.Inventories[rc] {
					t.Errorf("an older reader read %s as %+v, want %+v", rc, o, tc.p.Inventories[rc])
				}
			}
			if old.Version != ProviderVersion || old.UUID != tc.p.UUID || old.RootProviderUUID != tc.p.RootProviderUUID {
				t.Errorf("an older reader read %+v", old)
			}
		})
	}
}
