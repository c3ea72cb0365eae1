package etcdschema

import (
	"errors"
	"math/rand"
	"reflect"
	"strings"
	"testing"
)

// TestAlternatesRoundTrip: every record Encode writes (the compact form,
// random selections with and without what it elides) decodes into the
// record encoded, nil against empty slices included. Valid UTF-8 only:
// JSON cannot carry other strings in either version.
func TestAlternatesRoundTrip(t *testing.T) {
	g := genPlacement{rand.New(rand.NewSource(20)), new(bool)}
	*g.plain = true
	for i := 0; i < 3000; i++ {
		a := g.alternates()
		enc, err := Encode(a)
		if err != nil {
			continue // a time json.Marshal refuses
		}
		var got Alternates
		if err := Decode("k", enc, &got); err != nil {
			t.Fatalf("decode %s: %v", enc, err)
		}
		if !reflect.DeepEqual(&got, a) {
			t.Fatalf("round trip of %s:\n got %+v\nwant %+v", enc, got, *a)
		}
	}
}

// TestAlternatesCompactForm: a hand-off's alternates (the scheduler's
// single-provider requests, nodes named as their hosts, the record's
// cell) are written without what the record implies, and are much
// smaller than version 1 wrote them.
func TestAlternatesCompactForm(t *testing.T) {
	sel := func(uuid, host string) Selection {
		return Selection{ComputeNodeUUID: uuid, ServiceHost: host, Nodename: host, Cell: "cell1",
			AllocationRequest:        `{"allocations":{"` + uuid + `":{"resources":{"DISK_GB":20,"MEMORY_MB":2048,"VCPU":1}}}}`,
			AllocationRequestVersion: "1.36", AvailabilityZone: "nova"}
	}
	a := &Alternates{InstanceUUID: "7fd9f212-a8b1-4e8b-82bc-d559486995d2", Cell: "cell1", MaxAttempts: 3,
		Remaining: []Selection{sel("1e49d889-74ce-54fa-b387-5cf6e922ddcd", "compute-99"),
			sel("d2bb4bd9-5b83-5ff0-b7f9-38b06401edbc", "compute-71")},
		Attempts: []Attempt{{Host: "compute-91", At: providerCreated}}}
	enc := string(MustEncode(a))
	want := `{"version":2,"instance_uuid":"7fd9f212-a8b1-4e8b-82bc-d559486995d2","cell":"cell1","max_attempts":3,` +
		`"allocation_request_version":"1.36","availability_zone":"nova","remaining":[` +
		`{"compute_node_uuid":"1e49d889-74ce-54fa-b387-5cf6e922ddcd","service_host":"compute-99","resources":{"DISK_GB":20,"MEMORY_MB":2048,"VCPU":1}},` +
		`{"compute_node_uuid":"d2bb4bd9-5b83-5ff0-b7f9-38b06401edbc","service_host":"compute-71","resources":{"DISK_GB":20,"MEMORY_MB":2048,"VCPU":1}}],` +
		`"attempts":[{"host":"compute-91","at":"` + providerCreated.Format("2006-01-02T15:04:05.999999999Z07:00") + `"}]}`
	if enc != want {
		t.Fatalf("encoded\n%s\nwant\n%s", enc, want)
	}
	v1 := *a
	v1.Version = 1
	old, err := v1.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("version 1: %d bytes, version 2: %d bytes", len(old), len(enc))
	if len(enc) > len(old)*7/10 {
		t.Errorf("version 2 is %d bytes, version 1 %d: not compact", len(enc), len(old))
	}
}

// TestAlternatesVersion1StillDecodes: a record an older Berth wrote (in a
// cast or a retry in flight during an upgrade, or its alternates key)
// reads as it always did: every member as written, nothing implied.
func TestAlternatesVersion1StillDecodes(t *testing.T) {
	old := `{"version":1,"instance_uuid":"i","cell":"cell1","max_attempts":3,"remaining":[` +
		`{"compute_node_uuid":"n1","service_host":"compute-2","nodename":"","cell_uuid":"cell2",` +
		`"allocation_request":"{\"allocations\":{\"n1\":{\"resources\":{\"VCPU\":1}}}}","allocation_request_version":"1.36","availability_zone":"nova"},` +
		`{"compute_node_uuid":"n2","service_host":"compute-3","nodename":"compute-3","cell_uuid":""}],` +
		`"attempts":[{"host":"compute-1","at":"2026-01-02T03:04:05Z"}],"group":"g"}`
	var got Alternates
	if err := Decode("k", []byte(old), &got); err != nil {
		t.Fatal(err)
	}
	want := []Selection{
		{ComputeNodeUUID: "n1", ServiceHost: "compute-2", Nodename: "", Cell: "cell2",
			AllocationRequest: `{"allocations":{"n1":{"resources":{"VCPU":1}}}}`, AllocationRequestVersion: "1.36", AvailabilityZone: "nova"},
		{ComputeNodeUUID: "n2", ServiceHost: "compute-3", Nodename: "compute-3", Cell: ""},
	}
	if got.Version != 1 || got.Group != "g" || got.MaxAttempts != 3 || len(got.Attempts) != 1 || !reflect.DeepEqual(got.Remaining, want) {
		t.Fatalf("decoded %+v", got)
	}
	// Copied as read (json.Marshal of the version 1 record), it is
	// written as version 1 wrote it.
	again, err := got.MarshalJSON()
	if err != nil || string(again) != old {
		t.Fatalf("version 1 re-marshalled as\n%s (%v)\nwant\n%s", again, err, old)
	}
}

// TestAlternatesNewerVersionRefused: a record newer than this build
// reads is refused by its version, naming the key, as an older Berth
// refuses version 2 (it never misreads the implied members as empty).
func TestAlternatesNewerVersionRefused(t *testing.T) {
	var a Alternates
	err := Decode("/berth/hosts/h/builds/i", []byte(`{"version":3,"instance_uuid":"i","remaining":[]}`), &a)
	if !errors.Is(err, ErrUnsupportedVersion) || !strings.Contains(err.Error(), "/berth/hosts/h/builds/i") {
		t.Fatalf("err = %v", err)
	}
}

// TestAlternatesBothRequestAndResourcesRefused: a selection with both
// forms of its allocation request is not guessed at.
func TestAlternatesBothRequestAndResourcesRefused(t *testing.T) {
	var a Alternates
	bad := `{"version":2,"instance_uuid":"i","cell":"c","max_attempts":2,"remaining":[` +
		`{"compute_node_uuid":"n","service_host":"h","allocation_request":"{}","resources":{"VCPU":1}}],"attempts":null}`
	if err := Decode("k", []byte(bad), &a); err == nil {
		t.Fatalf("decoded %+v", a)
	}
}
