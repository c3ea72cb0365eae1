package etcdschema

import (
	"bytes"
	"encoding/json"
	"math/rand"
	"testing"
	"unicode/utf8"
)

// richFlavor is flavor with, at random, the members a flavor rarely has
// (description, rxtx_factor, private, projects) and empty extra specs.
func (g genPlacement) richFlavor() Flavor {
	f := g.flavor()
	if g.rng.Intn(3) == 0 {
		d := g.str()
		f.Description = &d
	}
	if g.rng.Intn(3) == 0 {
		f.RXTXFactor = g.float()
	}
	if g.rng.Intn(3) == 0 {
		f.Private, f.Projects = true, g.strs()
	}
	return f
}

func (g genPlacement) instance() *Instance {
	in := &Instance{UUID: g.str(), Name: g.str(), Status: g.str(), Cell: g.str(), Flavor: g.richFlavor(),
		ProjectID: g.str(), UserID: g.str(), Attempts: int(g.int64()), CreatedAt: g.time(), UpdatedAt: g.time()}
	if g.rng.Intn(2) == 0 {
		in.TaskState, in.Host, in.Node, in.AvailabilityZone = g.str(), g.str(), g.str(), g.str()
	}
	if g.rng.Intn(2) == 0 {
		in.Image = &BootImage{ID: g.str(), Name: g.str(), Command: g.strs()}
	}
	if g.rng.Intn(2) == 0 {
		in.Metadata = map[string]string{}
		for n := g.rng.Intn(3); n > 0; n-- {
			in.Metadata[g.str()] = g.str()
		}
	}
	if g.rng.Intn(3) == 0 {
		d := g.str()
		in.Description = &d
	}
	if g.rng.Intn(2) == 0 {
		in.ReservationID, in.LaunchIndex, in.Group, in.RequestID = g.str(), int(g.int64()), g.str(), g.str()
		in.DeleteRequestID, in.MigrationUUID, in.RequestedAZ = g.str(), g.str(), g.str()
	}
	switch g.rng.Intn(8) { // the rare parts json.Marshal keeps
	case 0:
		in.Fault = &Fault{Code: 500, Message: g.str(), Created: g.time()}
	case 1:
		in.FailedAttempts = []Attempt{{Host: g.str(), At: g.time()}}
	case 2:
		in.FailedAttempts = []Attempt{} // empty: omitted, the fast path's
	}
	return in
}

// TestServerFastEncodeMatchesJSONMarshal: Encode's own encoders for the
// hand-off's records write exactly json.Marshal's bytes (and fail where
// it fails) for many random values; they decline only where json.Marshal
// fails or where the record has a part they leave to it.
func TestServerFastEncodeMatchesJSONMarshal(t *testing.T) {
	g := genPlacement{rand.New(rand.NewSource(13)), new(bool)}
	fast := 0
	check := func(v interface {
		Versioned
		fastEncoder
	}, mayDecline bool) {
		if checkFastEncode(t, v, mayDecline) {
			fast++
		}
	}
	for i := 0; i < 3000; i++ {
		*g.plain = i%2 == 0
		in := g.instance()
		check(in, in.Fault != nil || len(in.FailedAttempts) > 0)
		b := g.build()
		b.Flavor = g.richFlavor()
		moved := g.rng.Intn(8) == 0
		if moved {
			b.Move = &MoveStep{MigrationUUID: g.str(), Step: g.str()}
		}
		switch g.rng.Intn(4) {
		case 0: // a hand-off's cast: the instance and the alternates carried
			if enc, err := Encode(in); err == nil { // a random time json.Marshal refuses: none carried
				b.Instance = enc
			}
			b.Alternates = json.RawMessage(MustEncode(&Alternates{InstanceUUID: g.str(), Cell: g.str(), MaxAttempts: 3, Group: g.str()}))
		case 1: // carried bytes json.Marshal compacts, escapes or refuses
			raws := []string{`{ "a" : [1, 2] }`, `{"a":"<b>"}`, `{"a":"é"}`, `{"a":`, `"x"`}
			b.Instance = json.RawMessage(raws[g.rng.Intn(len(raws))])
		}
		check(b, moved || !plainASCII(b.Instance) || !plainASCII(b.Alternates))
		check(&InstanceMapping{InstanceUUID: g.str(), Cell: g.str(), ProjectID: g.str(), CreatedAt: g.time()}, false)
		check(&QuotaInstance{CreatedAt: g.time()}, false)
	}
	// Random carried bytes are often non-ASCII, which the fast encoder
	// leaves to json.Marshal: about 5,200 of 9,000 go fast, and most of
	// the 3,000 quota records.
	if fast < 6500 {
		t.Errorf("only %d of 12000 values took the fast path", fast)
	}
}

// BenchmarkEncodeHandOff: Encode of a hand-off's instance, mapping and
// cast against json.Marshal.
func BenchmarkEncodeHandOff(b *testing.B) {
	d := "web server"
	f := Flavor{header: header{Version: 1}, ID: "2", Name: "m1.small", VCPUs: 1, RAMMB: 2048, DiskGB: 20}
	im := &BootImage{ID: "1d4a4b0c-0000-4000-8000-000000000003", Name: "sleeper", Command: []string{"sleep", "600"}}
	vals := []Versioned{
		&Instance{UUID: "6a0c9b1e-0000-4000-8000-000000000002", Name: "server-1", Status: StatusBuild,
			TaskState: TaskSpawning, Host: "compute-1", Node: "compute-1", Cell: "cell1", Flavor: f, ProjectID: "p",
			UserID: "u", AvailabilityZone: "nova", Attempts: 1, CreatedAt: providerCreated, UpdatedAt: providerCreated,
			Image: im, Metadata: map[string]string{"k": "v"}, Description: &d, RequestID: "req-1"},
		&InstanceMapping{InstanceUUID: "6a0c9b1e-0000-4000-8000-000000000002", Cell: "cell1", ProjectID: "p",
			CreatedAt: providerCreated},
		&Build{Op: OpBuild, InstanceUUID: "6a0c9b1e-0000-4000-8000-000000000002", Name: "server-1", Cell: "cell1",
			Flavor: f, ProjectID: "p", UserID: "u", Attempt: 1, RequestID: "req-1", CastAt: providerCreated, Image: im},
	}
	benchEncodeAgainstMarshal(b, vals)
}

// plainASCII: raw has no byte the fast encoder declines.
func plainASCII(raw []byte) bool {
	return !bytes.ContainsAny(raw, "<>&") && !bytes.ContainsFunc(raw, func(r rune) bool { return r >= utf8.RuneSelf })
}

// benchEncodeAgainstMarshal times EncodeString of vals (the fast
// encoders where they apply) against json.Marshal of the same values.
func benchEncodeAgainstMarshal(b *testing.B, vals []Versioned) {
	b.Run("Encode", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			for _, v := range vals {
				if _, err := EncodeString(v); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("json.Marshal", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			for _, v := range vals {
				if _, err := json.Marshal(v); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}
