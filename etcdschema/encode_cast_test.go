package etcdschema

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestEncodeCastMatchesCarriedRecords: EncodeCast writes the bytes the
// hand-off wrote before it, each record encoded alone and carried as a
// RawMessage, for random casts, instances and alternates (awkward
// strings, non-ASCII, HTML characters, the rare parts json.Marshal
// keeps, move steps), and the instance it returns is that record's own
// encoding.
func TestEncodeCastMatchesCarriedRecords(t *testing.T) {
	g := genPlacement{rand.New(rand.NewSource(31)), new(bool)}
	fast := 0
	for i := 0; i < 3000; i++ {
		*g.plain = i%2 == 0
		b, inst, alts := g.build(), g.instance(), g.alternates()
		b.Instance, b.Alternates = nil, nil
		if i%50 == 0 {
			b.Move = &MoveStep{MigrationUUID: g.str(), Step: g.str()}
		}
		want, wantInst, wantErr := encodeCastMarshal(b, inst, alts)
		cast, gotInst, err := EncodeCast(b, inst, alts)
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("case %d: error %v, want %v", i, err, wantErr)
		}
		if err != nil {
			continue // a time json.Marshal refuses: both refused it
		}
		if !bytes.Equal(cast, want) {
			t.Fatalf("case %d: cast differs\n got %s\nwant %s", i, cast, want)
		}
		if !bytes.Equal(gotInst, wantInst) {
			t.Fatalf("case %d: instance differs\n got %s\nwant %s", i, gotInst, wantInst)
		}
		if _, ok := b.appendHead(nil, false); ok {
			fast++
		}
	}
	if fast < 1000 {
		t.Errorf("only %d of 3000 casts took the fast path", fast)
	}
}

func TestEncodeCastRefusesCarriedRecords(t *testing.T) {
	b := &Build{Op: OpBuild, InstanceUUID: "u", Instance: json.RawMessage(`{}`)}
	if _, _, err := EncodeCast(b, &Instance{}, &Alternates{}); err == nil {
		t.Fatal("a cast carrying records already was encoded")
	}
}

// BenchmarkEncodeCast: a hand-off's instance and cast, encoded the old way
// (each record, then carried) against EncodeCast.
func BenchmarkEncodeCast(b *testing.B) {
	f := Flavor{header: header{Version: 1}, ID: "2", Name: "m1.small", VCPUs: 1, RAMMB: 2048, DiskGB: 20}
	im := &BootImage{ID: "1d4a4b0c-0000-4000-8000-000000000003", Name: "sleeper", Command: []string{"sleep", "600"}}
	inst := &Instance{UUID: "6a0c9b1e-0000-4000-8000-000000000002", Name: "server-1", Status: StatusBuild,
		TaskState: TaskSpawning, Host: "compute-1", Node: "compute-1", Cell: "cell1", Flavor: f, ProjectID: "p",
		UserID: "u", AvailabilityZone: "nova", Attempts: 1, CreatedAt: providerCreated, UpdatedAt: providerCreated,
		Image: im, RequestID: "req-1"}
	sel := Selection{ComputeNodeUUID: "2f9c0d1e-0000-4000-8000-000000000001", ServiceHost: "compute-2",
		Nodename: "compute-2", Cell: "cell1",
		AllocationRequest:        `{"allocations":{"2f9c0d1e-0000-4000-8000-000000000001":{"resources":{"DISK_GB":20,"MEMORY_MB":2048,"VCPU":1}}}}`,
		AllocationRequestVersion: "1.36", AvailabilityZone: "nova"}
	alts := &Alternates{InstanceUUID: inst.UUID, Cell: "cell1", MaxAttempts: 3, Remaining: []Selection{sel, sel},
		Attempts: []Attempt{{Host: "compute-1", At: providerCreated}}}
	build := func() *Build {
		return &Build{Op: OpBuild, InstanceUUID: inst.UUID, Name: "server-1", Cell: "cell1", Flavor: f,
			ProjectID: "p", UserID: "u", Attempt: 1, RequestID: "req-1", CastAt: providerCreated, Image: im}
	}
	b.Run("carried", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := encodeCastMarshal(build(), inst, alts); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("EncodeCast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := EncodeCast(build(), inst, alts); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// olderBuild reads casts as a Berth before version 2 did.
type olderBuild struct{ Build }

func (*olderBuild) SchemaVersion() int { return 1 }

// TestEncodeCastLeavesOutWhatItsInstanceHolds: a hand-off's cast whose
// members are its instance's is written as version 2 without them, and
// reads back (as a Build and as a BuildOp) exactly as the full form; a
// cast whose members differ is written in full; an older reader refuses
// version 2 by its version, naming the key; a version 2 cast without
// its instance fails as a Build and as a BuildOp alike.
func TestEncodeCastLeavesOutWhatItsInstanceHolds(t *testing.T) {
	desc := "d"
	f := Flavor{header: header{Version: 1}, ID: "2", Name: "m1.small", VCPUs: 1, RAMMB: 2048, DiskGB: 20,
		ExtraSpecs: map[string]string{"k": "v"}, Description: &desc}
	at := time.Date(2026, 11, 28, 3, 0, 0, 123, time.UTC)
	inst := &Instance{UUID: "6a0c9b1e-0000-4000-8000-000000000002", Name: "server-1", Status: StatusBuild,
		Host: "compute-1", Node: "compute-1", Cell: "cell1", Flavor: f, ProjectID: "p", UserID: "u",
		CreatedAt: at, UpdatedAt: at, RequestID: "req-1"}
	newCast := func() *Build {
		return &Build{Op: OpBuild, InstanceUUID: inst.UUID, Name: inst.Name, Cell: inst.Cell, Flavor: f,
			ProjectID: "p", UserID: "u", Attempt: 1, RequestID: "req-1", CastAt: at}
	}
	alts := &Alternates{InstanceUUID: inst.UUID, Cell: "cell1", MaxAttempts: 3}
	cast, _, err := EncodeCast(newCast(), inst, alts)
	if err != nil {
		t.Fatal(err)
	}
	full := newCast()
	full.Version = castFullVersion
	instJSON, _ := EncodeBytes(inst)
	altsJSON, _ := EncodeBytes(alts)
	full.Instance, full.Alternates = instJSON, altsJSON
	fullJSON, err := json.Marshal(full)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(cast, []byte(`{"version":2,"op":"build","attempt":1,"cast_at":`)) {
		t.Fatalf("compact cast %s", cast)
	}
	t.Logf("cast %d bytes, full form %d", len(cast), len(fullJSON))
	for _, data := range [][]byte{cast, fullJSON} {
		var got Build
		if err := Decode("/k", data, &got); err != nil {
			t.Fatal(err)
		}
		want := *full
		want.Version = got.Version
		if got.Version == castCompactVersion {
			carried, err := got.CarriedInstance("/k")
			if err != nil || got.carried != nil || !reflect.DeepEqual(carried.Flavor, inst.Flavor) || carried.UUID != inst.UUID {
				t.Errorf("carried instance %+v, %v", carried, err)
			}
		}
		if !reflect.DeepEqual(&got, &want) {
			t.Errorf("%s read back as\n%+v, want\n%+v", data, got, want)
		}
		var viaJSON Build // encoding/json's path, as for a cast the fast one declines
		if err := json.Unmarshal(data, &viaJSON); err != nil {
			t.Fatal(err)
		}
		err = viaJSON.complete("/k")
		viaJSON.carried = nil
		if err != nil || !reflect.DeepEqual(&viaJSON, &got) {
			t.Errorf("encoding/json's path read %s as %+v (%v)", data, viaJSON, err)
		}
		var op BuildOp
		if err := Decode("/k", data, &op); err != nil || op.Op != OpBuild || op.Version != got.Version || op.instance != nil {
			t.Errorf("BuildOp of %s: %+v, %v", data, op, err)
		}
	}
	var old olderBuild
	if err := Decode("/k", cast, &old); !errors.Is(err, ErrUnsupportedVersion) || !strings.Contains(err.Error(), "/k") {
		t.Errorf("an older reader decoded a version 2 cast: %v", err)
	}
	renamed := newCast()
	renamed.Name = "other"
	if c, _, err := EncodeCast(renamed, inst, alts); err != nil || !bytes.HasPrefix(c, []byte(`{"version":1,`)) {
		t.Errorf("a cast whose name is not its instance's: %s, %v", c, err)
	}
	noInst := []byte(`{"version":2,"op":"build","attempt":1,"cast_at":"2026-11-28T03:00:00Z"}`)
	var b Build
	var op BuildOp
	errB, errO := Decode("/k", noInst, &b), Decode("/k", noInst, &op)
	if errB == nil || errO == nil || errB.Error() != errO.Error() {
		t.Errorf("a version 2 cast without its instance: as a Build %v, as a BuildOp %v", errB, errO)
	}
}

// sameFlavor decides whether a version 2 cast may leave the flavor out,
// so it must compare every member a reader sees: a member added to Flavor
// and not compared there would be dropped from a cast whose flavor
// differs from its instance's in it.
func TestSameFlavorComparesEveryMember(t *testing.T) {
	const compared = 13 // header and the twelve members sameFlavor reads
	if n := reflect.TypeFor[Flavor]().NumField(); n != compared {
		t.Fatalf("Flavor has %d fields, sameFlavor compares %d: compare the new member in sameFlavor (cast_compact.go) and update this count", n, compared)
	}
	base := Flavor{ID: "1", Name: "m1", VCPUs: 1, RAMMB: 512, DiskGB: 1}
	differ := []func(f *Flavor){
		func(f *Flavor) { f.Version = 9 },
		func(f *Flavor) { f.ID = "2" },
		func(f *Flavor) { f.Name = "m2" },
		func(f *Flavor) { f.VCPUs = 2 },
		func(f *Flavor) { f.RAMMB = 1024 },
		func(f *Flavor) { f.DiskGB = 2 },
		func(f *Flavor) { f.EphemeralGB = 1 },
		func(f *Flavor) { f.SwapMB = 1 },
		func(f *Flavor) { f.ExtraSpecs = map[string]string{"k": "v"} },
		func(f *Flavor) { d := "d"; f.Description = &d },
		func(f *Flavor) { f.RXTXFactor = 2 },
		func(f *Flavor) { f.Private = true },
		func(f *Flavor) { f.Projects = []string{"p"} },
	}
	for i, change := range differ {
		f := base
		change(&f)
		if sameFlavor(&base, &f) {
			t.Errorf("change %d: sameFlavor called two different flavors the same", i)
		}
	}
	if b := base; !sameFlavor(&base, &b) {
		t.Error("sameFlavor called a flavor different from its copy")
	}
}
