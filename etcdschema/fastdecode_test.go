package etcdschema

import (
	"encoding/binary"
	"encoding/json"
	"math/rand"
	"reflect"
	"testing"
	"time"
)

// TestInstanceInfoFastDecodeMatchesEncodingJSON: Decode (the fast path,
// falling back to encoding/json) and encoding/json alone give the same
// value and the same success for encoded values with awkward strings and
// for hand-written JSON that the fast path must leave to encoding/json.
func TestInstanceInfoFastDecodeMatchesEncodingJSON(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	pieces := []string{"a", "Z", "0", "-", " ", "\"", "\\", "/", "<", ">", "&", "é", "日本", "\x01", "\n", "\u2028", "\xff", "null", "{", "}"}
	str := func() string {
		s := ""
		for n := rng.Intn(6); n > 0; n-- {
			s += pieces[rng.Intn(len(pieces))]
		}
		return s
	}
	var inputs [][]byte
	for i := 0; i < 2000; i++ {
		v := &InstanceInfo{UUID: str(), Host: str(), FlavorID: str(), Flavor: str(), State: str(),
			UpdatedAt: time.Unix(rng.Int63n(4e9), rng.Int63n(1e9)).In(time.FixedZone("", 3600*(rng.Intn(25)-12)))}
		if rng.Intn(4) == 0 {
			v.UpdatedAt = v.UpdatedAt.UTC()
		}
		b, err := Encode(v)
		if err != nil {
			t.Fatal(err)
		}
		inputs = append(inputs, b)
	}
	for _, s := range []string{
		`{}`, ` { } `, `{"version":1}`, `{"version":1,"uuid":"u"}`,
		`{"version":1,"uuid":"u","uuid":"v"}`, // duplicate: the last wins
		`{"Version":1,"UUID":"u"}`,            // names match case-insensitively
		`{"version":1,"other":"x","uuid":"u"}`, `{"version":1,"other":{"a":[1,2]},"uuid":"u"}`,
		`{"version":"1"}`, `{"version":1.0}`, `{"version":1e0}`, `{"version":-1}`, `{"version":01}`,
		`{"version":99999999999999999999}`, `{"version":null}`, `{"uuid":null}`, `{"uuid":5}`,
		`{"uuid":"a\u0062"}`, `{"uuid":"a\"b"}`, "{\"uuid\":\"a\x01\"}", `{"uuid":"é"}`, "{\"uuid\":\"\xff\"}",
		`{"updated_at":"2026-11-22T01:02:03Z"}`, `{"updated_at":"2026-11-22T01:02:03.123456789+05:30"}`,
		`{"updated_at":"2026-11-22 01:02:03"}`, `{"updated_at":"bad"}`, `{"updated_at":5}`,
		`{"version":1} x`, `{"version":1}}`, `{"version":1,}`, `{"version" 1}`, `{"version":1`, `[]`, `null`, ``,
		"{\n\t\"version\" : 1 ,\r\n \"uuid\" : \"u\"\n}",
	} {
		inputs = append(inputs, []byte(s))
	}
	for _, in := range inputs {
		var want InstanceInfo
		wantErr := json.Unmarshal(in, &want)
		var got InstanceInfo
		if !got.decodeFast(in) {
			got = InstanceInfo{}
			if json.Unmarshal(in, &got) != nil {
				if wantErr == nil {
					t.Errorf("%q: fallback failed where encoding/json did not", in)
				}
				continue
			}
		} else if wantErr != nil {
			t.Errorf("%q: fast path accepted what encoding/json rejects: %v", in, wantErr)
			continue
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%q:\nfast %+v\njson %+v", in, got, want)
		}
	}
	// The common value really takes the fast path.
	b, _ := Encode(&InstanceInfo{UUID: "2f9c0d1e-0000-4000-8000-000000000001", Host: "compute-000001", FlavorID: "2",
		Flavor: "m1.small", State: "active", UpdatedAt: time.Now().UTC()})
	var v InstanceInfo
	if !v.decodeFast(b) {
		t.Fatalf("the fast path refused an encoded InstanceInfo: %s", b)
	}
}

// BenchmarkDecodeInstanceInfo: Decode (fast path) against encoding/json
// on the value agents write.
func BenchmarkDecodeInstanceInfo(b *testing.B) {
	data := []byte(MustEncode(&InstanceInfo{UUID: "2f9c0d1e-0000-4000-8000-000000000001", Host: "compute-000001",
		FlavorID: "2", Flavor: "m1.small", State: "active", UpdatedAt: time.Now().UTC()}))
	b.Run("Decode", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			var v InstanceInfo
			if err := Decode("k", data, &v); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			var v InstanceInfo
			if err := json.Unmarshal(data, &v); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestPlainWord: the eight-byte check agrees with a byte-by-byte one on
// every byte value in every position, and on random words.
func TestPlainWord(t *testing.T) {
	plainByte := func(c byte) bool { return c >= 0x20 && c < 0x80 && c != '"' && c != '\\' }
	check := func(b [8]byte) {
		want := true
		for _, c := range b {
			want = want && plainByte(c)
		}
		if got := plainWord(binary.LittleEndian.Uint64(b[:])); got != want {
			t.Fatalf("plainWord(%q) = %v, want %v", b[:], got, want)
		}
	}
	for pos := 0; pos < 8; pos++ {
		for c := 0; c < 256; c++ {
			for _, fill := range []byte{'a', ' ', '~', '!', '#', '[', ']'} {
				var b [8]byte
				for i := range b {
					b[i] = fill
				}
				b[pos] = byte(c)
				check(b)
			}
		}
	}
	rng := rand.New(rand.NewSource(2))
	for i := 0; i < 200000; i++ {
		var b [8]byte
		for j := range b {
			b[j] = byte(0x1e + rng.Intn(0x64)) // around both ends of the plain range
		}
		check(b)
	}
}
