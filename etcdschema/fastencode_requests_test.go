package etcdschema

import (
	"bytes"
	"encoding/json"
	"math/rand"
	"strconv"
	"testing"
)

func (g genPlacement) alternates() *Alternates {
	a := &Alternates{InstanceUUID: g.str(), Cell: g.str(), MaxAttempts: int(g.int64())}
	if g.rng.Intn(2) == 0 {
		a.Group = g.str()
	}
	switch g.rng.Intn(4) {
	case 0: // nil: null
	case 1:
		a.Remaining = []Selection{}
	default:
		for n := 1 + g.rng.Intn(3); n > 0; n-- {
			s := Selection{ComputeNodeUUID: g.str(), ServiceHost: g.str(), Nodename: g.str(), Cell: g.str()}
			if g.rng.Intn(2) == 0 {
				s.AllocationRequest, s.AllocationRequestVersion, s.AvailabilityZone = g.str(), g.str(), g.str()
			}
			// What version 2 writes compactly: the node named as the
			// host, the record's cell, a shared request version, a
			// single-provider request (or one nearly of that form).
			if g.rng.Intn(2) == 0 {
				s.Nodename = s.ServiceHost
			}
			if g.rng.Intn(2) == 0 {
				s.Cell = a.Cell
			}
			if g.rng.Intn(2) == 0 {
				s.AllocationRequestVersion = "1.36"
			}
			if g.rng.Intn(2) == 0 {
				s.AvailabilityZone = "nova"
			}
			switch g.rng.Intn(6) {
			case 0:
				s.AllocationRequest = `{"allocations":{"` + s.ComputeNodeUUID + `":{"resources":{"DISK_GB":20,"VCPU":` +
					strconv.Itoa(g.rng.Intn(64)) + `}}}}`
			case 1:
				s.AllocationRequest = `{"allocations":{"` + s.ComputeNodeUUID + `":{"resources":` + g.str() + `}}}`
			case 2:
				s.AllocationRequest = `{"allocations":{"` + s.ComputeNodeUUID + `":{"resources":{}},"x":{"resources":{"A":1}}}}`
			}
			if g.rng.Intn(8) == 0 {
				s.Limits = map[string]any{"vcpu": 16.0} // json.Marshal's
			}
			a.Remaining = append(a.Remaining, s)
		}
	}
	switch g.rng.Intn(3) {
	case 0:
	case 1:
		a.Attempts = []Attempt{}
	default:
		for n := 1 + g.rng.Intn(3); n > 0; n-- {
			a.Attempts = append(a.Attempts, Attempt{Host: g.str(), Reason: g.str(), At: g.time()})
		}
	}
	return a
}

// checkFastEncode checks v's own encoder against json.Marshal, and
// Encode and EncodeString with it, reporting whether it wrote v.
func checkFastEncode(t *testing.T, v interface {
	Versioned
	fastEncoder
}, mayDecline bool) bool {
	t.Helper()
	v.setVersion(v.SchemaVersion())
	want, wantErr := json.Marshal(v)
	got, ok := v.appendJSON(nil)
	switch {
	case !ok && wantErr == nil && !mayDecline:
		t.Errorf("fast encoder declined what json.Marshal writes: %s", want)
	case ok && wantErr != nil:
		t.Errorf("fast encoder wrote %s where json.Marshal fails: %v", got, wantErr)
	case ok && !bytes.Equal(got, want):
		t.Errorf("fast encoder differs:\nfast %s\njson %s", got, want)
	}
	enc, err := Encode(v)
	if (err != nil) != (wantErr != nil) || !bytes.Equal(enc, want) {
		t.Errorf("Encode = %s, %v; json.Marshal = %s, %v", enc, err, want, wantErr)
	}
	if str, err := EncodeString(v); (err != nil) != (wantErr != nil) || str != string(want) {
		t.Errorf("EncodeString = %s, %v; json.Marshal = %s, %v", str, err, want, wantErr)
	}
	return ok
}

// TestRequestFastEncodeMatchesJSONMarshal: the encoders of the
// BuildRequest, the Lease and the Alternates write exactly json.Marshal's
// bytes (and fail where it fails) for many random values with odd
// strings and times, every optional member, and nil against empty
// slices; they decline only where json.Marshal fails or a selection has
// limits.
func TestRequestFastEncodeMatchesJSONMarshal(t *testing.T) {
	g := genPlacement{rand.New(rand.NewSource(19)), new(bool)}
	fast := 0
	for i := 0; i < 3000; i++ {
		*g.plain = i%2 == 0
		br := g.buildRequest()
		br.Flavor = g.richFlavor()
		if g.rng.Intn(4) == 0 {
			br.Hints.SameHost, br.Hints.DifferentHost = []string{}, g.strs() // empty: omitted
		}
		if checkFastEncode(t, br, false) {
			fast++
		}
		if checkFastEncode(t, &Lease{Holder: g.str(), LeaseID: g.int64(), Since: g.time()}, false) {
			fast++
		}
		a := g.alternates()
		limited := false
		for _, s := range a.Remaining {
			limited = limited || len(s.Limits) > 0
		}
		if checkFastEncode(t, a, limited) {
			fast++
		}
	}
	// Times json.Marshal refuses and selections with limits leave about
	// 7,400 of the 9,000 values to the fast path.
	t.Logf("%d of 9000 values took the fast path", fast)
	if fast < 5000 {
		t.Errorf("only %d of 9000 values took the fast path", fast)
	}
}

// BenchmarkEncodeRequests: Encode of a create's BuildRequest, the
// superconductor's lease on it and the alternates its hand-off carries,
// against json.Marshal.
func BenchmarkEncodeRequests(b *testing.B) {
	var br BuildRequest
	if err := Decode("k", []byte(buildRequestJSON), &br); err != nil {
		b.Fatal(err)
	}
	sel := func(h string) Selection {
		return Selection{ComputeNodeUUID: "c433d477-c692-518a-b3e9-efb2f7150b15", ServiceHost: h, Nodename: h,
			Cell: "cell1", AllocationRequest: `{"allocations":{"c433d477-c692-518a-b3e9-efb2f7150b15":{"resources":{"VCPU":1}}}}`,
			AllocationRequestVersion: "1.36"}
	}
	vals := []Versioned{&br,
		&Lease{Holder: "berth-1/superconductor", LeaseID: 7587885938219384321, Since: providerCreated},
		&Alternates{InstanceUUID: br.InstanceUUID, Cell: "cell1", MaxAttempts: 3,
			Remaining: []Selection{sel("compute-2"), sel("compute-3")}, Attempts: []Attempt{{Host: "compute-1", At: providerCreated}}},
	}
	benchEncodeAgainstMarshal(b, vals)
}
