package etcdschema

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// FuzzFastDecode: for any bytes, each fast decoder keeps its promise
// against encoding/json (fastdecode*.go).
//   - Decode's path (the fast decoder, else encoding/json on the same
//     bytes) and encoding/json alone succeed or fail together and, when
//     they succeed, give equal values: into an empty destination and into
//     one already holding values.
//   - The decoders that decode into a copy (every one but InstanceInfo's,
//     which writes as it reads) leave a destination they decline as it
//     was (decodeBoth).
//   - DecodeInstanceInfoSharing gives Decode's value and error.
//   - DecodeProviderAfter(Key) and DecodeConsumerKey, which share strings
//     and maps with a record decoded before, give exactly Decode's value
//     and error and leave that record as it was.
//
// The fast path's own rules (exact names, each once, null only for maps
// and slices) only make it decline more: the value is encoding/json's.
//
// Seeds are in testdata/fuzz/FuzzFastDecode and the records Berth writes.
func FuzzFastDecode(f *testing.F) {
	for _, s := range []string{buildJSON, leaseJSON, providerJSON, consumerJSON, instanceJSON, instanceMappingJSON,
		MustEncode(&InstanceInfo{UUID: "2f9c0d1e-0000-4000-8000-000000000001", Host: "compute-000001", FlavorID: "2",
			Flavor: "m1.small", State: "active", UpdatedAt: providerCreated}),
		MustEncode(&Service{Host: "compute-000001", Cell: "cell1", ProviderUUID: "rp", Disabled: true, UpdatedAt: providerCreated}),
		MustEncode(&HostSync{Host: "compute-000001", UUIDs: []string{"a", "b"}}),
		MustEncode(&HostSync{Host: "compute-000001", UUIDs: []string{"a", "b"}, FlavorIDs: []string{"1", ""}}),
		MustEncode(&HostMapping{Host: "compute-000001", Cell: "cell1", CreatedAt: providerCreated}),
		MustEncode(&HostCapacity{Host: "compute-000001", Inventories: map[string]Inventory{"VCPU": {Total: 16, MinUnit: 1,
			MaxUnit: 16, StepSize: 1, AllocationRatio: 16}}, Used: map[string]int64{"VCPU": 4}, At: providerCreated}),
	} {
		f.Add([]byte(s))
	}
	prev := &Provider{}
	if err := Decode("p", []byte(providerJSON), prev); err != nil {
		f.Fatal(err)
	}
	like := &Consumer{}
	if err := Decode("c", []byte(consumerJSON), like); err != nil {
		f.Fatal(err)
	}
	prevWas, likeWas := deepCopy(f, prev), deepCopy(f, like)
	old := time.Unix(5, 0).UTC()
	f.Fuzz(func(t *testing.T, data []byte) {
		decodeAsJSON(t, data, InstanceInfo{})
		decodeAsJSON(t, data, InstanceInfo{UUID: "old", State: "old", UpdatedAt: old})
		sharingMatchesDecode(t, data)
		syncSharingMatchesDecode(t, data)

		decodeAsJSON(t, data, Build{})
		decodeBoth(t, data, Build{})
		decodeBoth(t, data, Build{Op: "old", Attempt: 3, Flavor: Flavor{ID: "old", VCPUs: 9}})
		decodeBoth(t, data, Build{Flavor: Flavor{ExtraSpecs: map[string]string{"old": "x"}}})
		decodeBoth(t, data, Build{Image: &BootImage{ID: "old", Command: []string{"old"}}})
		decodeBoth(t, data, Build{Flavor: Flavor{Description: new(string), Projects: []string{"old"}}})
		decodeBoth(t, data, BuildOp{})
		decodeBoth(t, data, Lease{})
		decodeBoth(t, data, Lease{Holder: "old", LeaseID: 9, Since: old})

		decodeBoth(t, data, Service{})
		decodeBoth(t, data, Service{Host: "old", Disabled: true, FailedBuilds: 9})
		decodeBoth(t, data, HostSync{})
		decodeBoth(t, data, HostSync{UUIDs: []string{"x", "y", "z"}})
		decodeBoth(t, data, HostMapping{})
		decodeBoth(t, data, HostMapping{Host: "old", Cell: "old", CreatedAt: old})

		decodeBoth(t, data, Instance{})
		decodeBoth(t, data, Instance{Name: "old", Attempts: 3, Flavor: Flavor{ID: "old", RXTXFactor: 2}, Fault: &Fault{Code: 500}})
		decodeBoth(t, data, Instance{Metadata: map[string]string{"old": "x"}, Image: &BootImage{ID: "old"}})
		decodeBoth(t, data, Instance{Flavor: Flavor{Description: new(string), Projects: []string{"old"}}})
		decodeBoth(t, data, HostCapacity{})
		decodeBoth(t, data, HostCapacity{Host: "old", Used: map[string]int64{"old": 1}})
		decodeBoth(t, data, InstanceMapping{})
		decodeBoth(t, data, InstanceMapping{InstanceUUID: "old", Cell: "old", CreatedAt: old})

		decodeBoth(t, data, Provider{})
		decodeBoth(t, data, Provider{Name: "old", Generation: 7, Traits: []string{"X"}})
		decodeBoth(t, data, Consumer{})
		decodeBoth(t, data, Consumer{ProjectID: "old", Allocations: map[string]ConsumerAllocation{"rp": {}}})

		sharesAsDecode(t, data, prev, like)
		if !reflect.DeepEqual(prev, prevWas) || !reflect.DeepEqual(like, likeWas) {
			t.Fatalf("%q: a sharing decoder changed the record it shares with:\n%s%s", data, valueDiff(prevWas, prev), valueDiff(likeWas, like))
		}
	})
}

// decodeAsJSON checks Decode's path (without its version check) against
// encoding/json alone, both from start.
func decodeAsJSON[T any, PT interface {
	*T
	fastDecoder
}](t *testing.T, in []byte, start T) {
	t.Helper()
	want := start
	wantErr := json.Unmarshal(in, &want)
	got := start
	var err error
	if !PT(&got).decodeFast(in) {
		err = json.Unmarshal(in, &got)
	}
	switch {
	case (err == nil) != (wantErr == nil):
		t.Errorf("%q: Decode's path: error %v; encoding/json: error %v", in, err, wantErr)
	case err == nil && !reflect.DeepEqual(got, want):
		t.Errorf("%q: Decode's path and encoding/json differ:\n%s", in, valueDiff(want, got))
	}
}

// sharesAsDecode checks the decoders that share parts of a record decoded
// before against Decode into a fresh value.
func sharesAsDecode(t *testing.T, in []byte, prev *Provider, like *Consumer) {
	t.Helper()
	want := &Provider{}
	wantErr := Decode("/k", in, want)
	for name, decode := range map[string]func() (*Provider, error){
		"DecodeProviderAfter":    func() (*Provider, error) { return DecodeProviderAfter("/k", in, prev) },
		"DecodeProviderAfterKey": func() (*Provider, error) { return DecodeProviderAfterKey([]byte("/k"), in, prev) },
	} {
		got, err := decode()
		sameDecode(t, in, name, want, wantErr, got, err)
	}
	wantC := &Consumer{}
	wantCErr := Decode("/k", in, wantC)
	got, err := DecodeConsumerKey([]byte("/k"), in, like.UUID, like, []string{"rp-1", prev.UUID})
	sameDecode(t, in, "DecodeConsumerKey", wantC, wantCErr, got, err)
}

func sameDecode[T any](t *testing.T, in []byte, name string, want *T, wantErr error, got *T, err error) {
	t.Helper()
	if fmt.Sprint(err) != fmt.Sprint(wantErr) {
		t.Errorf("%q: %s error %v, Decode's %v", in, name, err, wantErr)
		return
	}
	if err == nil && !reflect.DeepEqual(got, want) {
		t.Errorf("%q: %s and Decode differ:\n%s", in, name, valueDiff(want, got))
	}
}

// deepCopy copies v through encoding/json, which round-trips every record.
func deepCopy[T any](t testing.TB, v *T) *T {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	out := new(T)
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// valueDiff is cmp.Diff of two records (-want +got). reflect.DeepEqual
// is the test (it tells a time's zone apart, and a nil map from an empty
// one, as callers may); where cmp sees no difference, both are printed.
func valueDiff(want, got any) string {
	if d := cmp.Diff(want, got, cmp.Exporter(func(reflect.Type) bool { return true })); d != "" {
		return "(-want +got):\n" + d
	}
	return fmt.Sprintf("want %#v\n got %#v\n", want, got)
}
