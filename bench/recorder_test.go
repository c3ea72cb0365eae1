package bench

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

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
			if got := r.kinds.of([]byte(c.key)); got != c.want {
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

// BenchmarkRecorderApply is the recorder's cost per server booted: the
// events of one server's boot as the watch delivers them (build request,
// superconductor lease, claim, cast, instance BUILD then ACTIVE, and the
// deletes that end the hand-offs), counted and timed.
func BenchmarkRecorderApply(b *testing.B) {
	k := etcdschema.New("/berth")
	r := NewRecorder(nil, k)
	r.StartCounting()
	now := time.Now()
	inst := &etcdschema.Instance{UUID: "u", Name: "bench-1", Status: etcdschema.StatusBuild, TaskState: etcdschema.TaskSpawning, Cell: "cell1",
		Host: "bench-000001", Flavor: etcdschema.Flavor{ID: "1", Name: "m1.tiny", VCPUs: 1, RAMMB: 512, DiskGB: 1},
		ProjectID: "p", UserID: "u", CreatedAt: now, UpdatedAt: now}
	build := &etcdschema.Build{Op: etcdschema.OpBuild, InstanceUUID: "u", Name: "bench-1", Cell: "cell1",
		Flavor: inst.Flavor, ProjectID: "p", UserID: "u", Attempt: 1, CastAt: now}
	ids := make([]string, b.N)
	for i := range ids {
		ids[i] = fmt.Sprintf("%08d-0000-4000-8000-000000000000", i)
	}
	put := func(key, val string, rev int64) *clientv3.Event {
		return &clientv3.Event{Type: clientv3.EventTypePut, Kv: &mvccpb.KeyValue{Key: []byte(key), Value: []byte(val), ModRevision: rev}}
	}
	del := func(key string, rev int64) *clientv3.Event {
		return &clientv3.Event{Type: clientv3.EventTypeDelete, Kv: &mvccpb.KeyValue{Key: []byte(key), ModRevision: rev}}
	}
	evs := make([][]*clientv3.Event, b.N)
	rev := int64(1)
	for i, id := range ids {
		inst.UUID, build.InstanceUUID = id, id
		inst.Status, inst.TaskState = etcdschema.StatusBuild, etcdschema.TaskSpawning
		building := etcdschema.MustEncode(inst)
		inst.Status, inst.TaskState = etcdschema.StatusActive, ""
		active := etcdschema.MustEncode(inst)
		evs[i] = []*clientv3.Event{
			put(k.BuildRequests()+id, `{"v":1}`, rev), put(k.InstanceMapping(id), `{"v":1}`, rev),
			put(k.BuildRequestLeases()+id, `{"v":1}`, rev+1),
			put(k.Consumers()+id, `{"v":1}`, rev+2), put(k.Provider("p1"), `{"v":1}`, rev+2),
			put(k.Build("bench-000001", id), etcdschema.MustEncode(build), rev+3), put(k.CellInstance("cell1", id), building, rev+3),
			del(k.BuildRequests()+id, rev+3), del(k.BuildRequestLeases()+id, rev+3),
			put(k.CellInstance("cell1", id), active, rev+4), del(k.Build("bench-000001", id), rev+4),
			del(k.Alternates(id), rev+4), put(k.HostInstance("bench-000001", id), `{"v":1}`, rev+4),
		}
		rev += 5
		r.Expect([]string{id}, now, now)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		r.mu.Lock()
		for _, ev := range evs[i] {
			r.applyLocked(now, ev)
		}
		r.mu.Unlock()
	}
	b.StopTimer()
	if r.Finished() != b.N {
		b.Fatalf("%d of %d servers finished", r.Finished(), b.N)
	}
}

// TestRecorderFinishesOnlyOnAFinishingRecord: the records a boot writes
// to its cell finish it at ACTIVE, ERROR or in cell0, and not before —
// also when a word the recorder looks for sits elsewhere in the record.
func TestRecorderFinishesOnlyOnAFinishingRecord(t *testing.T) {
	k := etcdschema.New("/berth")
	for _, tc := range []struct {
		desc     string
		cell     string
		status   string
		name     string
		metadata map[string]string
		want     string // "" for not finished
	}{
		{desc: "building", cell: "cell1", status: etcdschema.StatusBuild},
		{desc: "building, ACTIVE in its metadata", cell: "cell1", status: etcdschema.StatusBuild,
			metadata: map[string]string{"note": "ACTIVE"}},
		{desc: "building, a status of ERROR in its metadata", cell: "cell1", status: etcdschema.StatusBuild,
			metadata: map[string]string{"status": "ERROR"}},
		{desc: "building, a status of ACTIVE in its name", cell: "cell1", status: etcdschema.StatusBuild,
			name: `x","status":"ACTIVE`},
		{desc: "active, a status of BUILD in its metadata", cell: "cell1", status: etcdschema.StatusActive,
			metadata: map[string]string{"status": "BUILD"}, want: "active"},
		{desc: "active", cell: "cell1", status: etcdschema.StatusActive, want: "active"},
		{desc: "error", cell: "cell2", status: etcdschema.StatusError, want: "failed"},
		{desc: "buried in cell0", cell: "cell0", status: etcdschema.StatusBuild, want: "no valid host"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			r := NewRecorder(nil, k)
			r.Expect([]string{"u1"}, time.Now(), time.Now())
			in := &etcdschema.Instance{UUID: "u1", Name: tc.name, Status: tc.status, Cell: tc.cell, Metadata: tc.metadata}
			r.mu.Lock()
			r.applyLocked(time.Now(), &clientv3.Event{Type: clientv3.EventTypePut,
				Kv: &mvccpb.KeyValue{Key: []byte(k.CellInstance(tc.cell, "u1")), Value: []byte(etcdschema.MustEncode(in)), ModRevision: 2}})
			tr := r.traces["u1"]
			got := ""
			switch {
			case !tr.active.IsZero():
				got = "active"
			case tr.failed:
				got = "failed"
			case tr.noValidHost:
				got = "no valid host"
			}
			r.mu.Unlock()
			if got != tc.want {
				t.Errorf("after a %s record in %s: %q, want %q", tc.status, tc.cell, got, tc.want)
			}
		})
	}
}

// TestCastRecordReadsTheEncodedInstance: castRecord tells a cast's
// instance record (BUILD, spawning) from the others as the hand-off
// (etcdschema.EncodeCast) and the cell conductor (MustEncode) write them,
// also when its words sit elsewhere in the record.
func TestCastRecordReadsTheEncodedInstance(t *testing.T) {
	now := time.Now()
	flavor := etcdschema.Flavor{ID: "1", Name: "m1.tiny", VCPUs: 1, RAMMB: 512, DiskGB: 1}
	for _, tc := range []struct {
		desc              string
		status, taskState string
		name              string
		metadata          map[string]string
		want              bool
	}{
		{desc: "a hand-off's", status: etcdschema.StatusBuild, taskState: etcdschema.TaskSpawning, want: true},
		{desc: "a failed build's, back to scheduling", status: etcdschema.StatusBuild, taskState: etcdschema.TaskScheduling},
		{desc: "active", status: etcdschema.StatusActive},
		{desc: "error", status: etcdschema.StatusError},
		{desc: "the words in the name", status: etcdschema.StatusBuild, taskState: etcdschema.TaskScheduling,
			name: `"status":"BUILD","task_state":"spawning"`},
		{desc: "the words in the metadata", status: etcdschema.StatusActive,
			metadata: map[string]string{"status": "BUILD", "task_state": "spawning"}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			in := &etcdschema.Instance{UUID: "u1", Name: tc.name, Status: tc.status, TaskState: tc.taskState,
				Host: "h1", Node: "h1", Cell: "cell1", Flavor: flavor, ProjectID: "p", UserID: "u", Attempts: 1,
				Metadata: tc.metadata, CreatedAt: now, UpdatedAt: now}
			if got := castRecord([]byte(etcdschema.MustEncode(in))); got != tc.want {
				t.Errorf("encoded: castRecord = %v, want %v", got, tc.want)
			}
			build := &etcdschema.Build{Op: etcdschema.OpBuild, InstanceUUID: "u1", Cell: "cell1", Flavor: flavor,
				ProjectID: "p", UserID: "u", Attempt: 1, CastAt: now}
			alts := &etcdschema.Alternates{InstanceUUID: "u1", Cell: "cell1", MaxAttempts: 3}
			_, inst, err := etcdschema.EncodeCast(build, in, alts)
			if err != nil {
				t.Fatal(err)
			}
			if got := castRecord(inst); got != tc.want {
				t.Errorf("encoded with its cast: castRecord = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestRecorderCountsCastsFromTheRecords: a boot's casts are its
// instance's cast records, each after one that is not (a reschedule's
// comes after the failed build's), and only until it finishes.
func TestRecorderCountsCastsFromTheRecords(t *testing.T) {
	k := etcdschema.New("/berth")
	record := func(status, taskState string) string {
		return etcdschema.MustEncode(&etcdschema.Instance{UUID: "u1", Status: status, TaskState: taskState, Cell: "cell1"})
	}
	spawning := record(etcdschema.StatusBuild, etcdschema.TaskSpawning)
	failed := record(etcdschema.StatusBuild, etcdschema.TaskScheduling)
	active := record(etcdschema.StatusActive, "")
	for _, tc := range []struct {
		desc      string
		records   []string
		wantCasts int
	}{
		{desc: "hand-off, active", records: []string{spawning, active}, wantCasts: 1},
		{desc: "hand-off, failed, reschedule, active", records: []string{spawning, failed, spawning, active}, wantCasts: 2},
		{desc: "hand-off, renamed while spawning, active", records: []string{spawning, spawning, active}, wantCasts: 1},
		{desc: "a cast record after it finished (a move's)", records: []string{spawning, active, failed, spawning}, wantCasts: 1},
		{desc: "not cast yet", records: []string{failed}, wantCasts: 0},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			r := NewRecorder(nil, k)
			r.Expect([]string{"u1"}, time.Now(), time.Now())
			r.mu.Lock()
			defer r.mu.Unlock()
			for i, v := range tc.records {
				r.applyLocked(time.Now(), &clientv3.Event{Type: clientv3.EventTypePut,
					Kv: &mvccpb.KeyValue{Key: []byte(k.CellInstance("cell1", "u1")), Value: []byte(v), ModRevision: int64(i + 2)}})
			}
			tr := r.traces["u1"]
			if tr.casts != tc.wantCasts || tr.cast.IsZero() != (tc.wantCasts == 0) {
				t.Errorf("casts %d (first at %v), want %d", tr.casts, tr.cast, tc.wantCasts)
			}
		})
	}
}

// An event delivered after one of a later revision (a watch of the
// member's stream that fell behind another) is counted late, and timed
// as the later revision's first arrival: a claim delivered after its cast
// still comes before it, and the hand-off is sampled.
func TestRecorderCountsALateEvent(t *testing.T) {
	k := etcdschema.New("/berth")
	r := NewRecorder(nil, k)
	r.Expect([]string{"u1"}, time.Now(), time.Now())
	t0 := time.Now()
	put := func(at time.Duration, key, value string, rev int64) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.applyLocked(t0.Add(at), &clientv3.Event{Type: clientv3.EventTypePut,
			Kv: &mvccpb.KeyValue{Key: []byte(key), Value: []byte(value), ModRevision: rev}})
	}
	put(0, k.BuildRequests()+"u1", "{}", 2)
	put(time.Millisecond, k.BuildRequestLeases()+"u1", "{}", 3)
	put(3*time.Millisecond, k.CellInstance("cell1", "u1"), etcdschema.MustEncode(&etcdschema.Instance{UUID: "u1", Status: etcdschema.StatusBuild,
		TaskState: etcdschema.TaskSpawning}), 6)
	put(5*time.Millisecond, k.Consumer("u1"), "{}", 4) // the claim, late
	put(7*time.Millisecond, k.CellInstance("cell1", "u1"), etcdschema.MustEncode(&etcdschema.Instance{UUID: "u1", Status: etcdschema.StatusActive}), 8)
	r.mu.Lock()
	tr := r.traces["u1"]
	if !tr.claim.Equal(t0.Add(3*time.Millisecond)) || tr.casts != 1 {
		t.Errorf("claim at +%v, %d casts; want the late claim timed at the cast's arrival (+3ms) and the one cast", tr.claim.Sub(t0), tr.casts)
	}
	if r.reordered != 1 {
		t.Errorf("%d events counted late, want 1", r.reordered)
	}
	r.mu.Unlock()
	samples, o := r.stageSamples([]string{"u1"})
	if o.Active != 1 {
		t.Errorf("%+v, want 1 active", o)
	}
	for stage, want := range map[string]time.Duration{"queue": time.Millisecond, "schedule": 2 * time.Millisecond,
		"handoff": 0, "build": 4 * time.Millisecond} {
		if got := samples[stage]; len(got) != 1 || got[0] != want {
			t.Errorf("%s samples %v, want [%v]", stage, got, want)
		}
	}
}

// The time of a revision is the first arrival of it or a later one, also
// once the kept advances have been trimmed.
func TestRecorderArrivalIsTheFirstOfALaterRevision(t *testing.T) {
	r := NewRecorder(nil, etcdschema.New("/berth"))
	t0 := time.Now()
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Millisecond) }
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range []struct {
		rev     int64
		arrived int
		want    int
	}{
		{rev: 10, arrived: 0, want: 0},
		{rev: 10, arrived: 1, want: 0}, // the revision's other event
		{rev: 12, arrived: 2, want: 2}, // an advance
		{rev: 11, arrived: 3, want: 2}, // late: 12 came first
		{rev: 9, arrived: 4, want: 0},  // late: 10 came first
		{rev: 20, arrived: 5, want: 5}, // an advance
		{rev: 13, arrived: 6, want: 5}, // late, between advances
		{rev: 12, arrived: 7, want: 2}, // late, an advance's own revision
		{rev: 21, arrived: 8, want: 8}, // an advance
		{rev: 21, arrived: 9, want: 8}, // the same revision again
	} {
		if got := r.arrivalLocked(at(c.arrived), c.rev); !got.Equal(at(c.want)) {
			t.Errorf("revision %d arriving at +%dms: timed +%v, want +%dms", c.rev, c.arrived, got.Sub(t0), c.want)
		}
	}
	for i := range maxAdvances + 1 {
		r.arrivalLocked(at(100+i), int64(100+i))
	}
	if n := len(r.advances); n > maxAdvances {
		t.Fatalf("%d advances kept, want at most %d", n, maxAdvances)
	}
	oldest := r.advances[0]
	if got := r.arrivalLocked(at(1<<20), 1); !got.Equal(oldest.at) {
		t.Errorf("a revision older than every kept advance: timed +%v, want the oldest kept's +%v", got.Sub(t0), oldest.at.Sub(t0))
	}
}
