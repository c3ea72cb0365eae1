package etcdschema

import (
	"bytes"
	"encoding/json"
	"math/rand"
	"testing"
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
		if _, ok := b.appendHead(nil); ok {
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
