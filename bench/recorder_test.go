package bench

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/berth-project/berth/etcdschema"
)

// TestRecorderKind checks the key families the write table counts by,
// named from the key's bytes without splitting it.
func TestRecorderKind(t *testing.T) {
	k := etcdschema.New("/berth")
	r := NewRecorder(nil, k)
	for _, c := range []struct{ desc, key, want string }{
		{"a cast", k.Build("bench-000001", "u1"), "hosts/*/builds"},
		{"a host's service", k.Service("bench-000001"), "hosts/*/service"},
		{"a cell's instance", k.CellInstance("cell1", "u1"), "cells/*/instances"},
		{"a consumer", k.Consumers() + "u1", "placement/consumers"},
		{"a superconductor lease", k.BuildRequestLeases() + "u1", "leases/build_requests"},
		{"a build request", k.BuildRequests() + "u1", "build_requests"},
		{"a mapping", k.InstanceMappings() + "u1", "instance_mappings"},
		{"a two-segment host key keeps its first", k.All() + "hosts/h1", "hosts"},
		{"a one-segment placement key", k.All() + "placement", "placement"},
		{"a group's member", k.All() + "server_groups/g1/members/u1", "server_groups/*/members"},
	} {
		for range 2 { // the second time from the interned names
			if got := r.kind([]byte(c.key)); got != c.want {
				t.Errorf("%s: kind(%q) = %q, want %q", c.desc, c.key, got, c.want)
			}
		}
	}
}

// TestRecordedInstanceReadsTheRecord checks that the recorder's partial
// instance reads the members of a record as etcdschema encodes it.
func TestRecordedInstanceReadsTheRecord(t *testing.T) {
	in := &etcdschema.Instance{UUID: "u1", Name: "n", Status: etcdschema.StatusActive, TaskState: "resize_prep",
		Cell: "cell2", MigrationUUID: "m1", Flavor: etcdschema.Flavor{ID: "1", Name: "m1.tiny"},
		Metadata: map[string]string{"status": "ERROR"}, CreatedAt: time.Now()}
	var got recordedInstance
	if err := json.Unmarshal([]byte(etcdschema.MustEncode(in)), &got); err != nil {
		t.Fatal(err)
	}
	if got.Status != in.Status || got.TaskState != in.TaskState || got.Cell != in.Cell ||
		got.MigrationUUID != in.MigrationUUID || got.Flavor.Name != in.Flavor.Name {
		t.Errorf("read %+v from %+v", got, in)
	}
}
