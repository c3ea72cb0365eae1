package etcdschema

import (
	"encoding/json"
	"math/rand"
	"reflect"
	"strings"
	"testing"
	"time"
)

// instanceJSON is an Instance as a boot writes it at its hand-off, with
// every member the fast path reads (and a flavor with every optional
// member).
var instanceJSON = func() string {
	d, fd := "web server", "small"
	return MustEncode(&Instance{UUID: "6a0c9b1e-0000-4000-8000-000000000002", Name: "server-1", Status: StatusBuild,
		TaskState: TaskSpawning, Host: "compute-1", Node: "compute-1", Cell: "cell1",
		Flavor: Flavor{header: header{Version: 1}, ID: "2", Name: "m1.small", VCPUs: 1, RAMMB: 2048, DiskGB: 20,
			EphemeralGB: 1, SwapMB: 512, ExtraSpecs: map[string]string{"hw:cpu_policy": "dedicated"}, Description: &fd,
			RXTXFactor: 1.5, Private: true, Projects: []string{"p"}},
		ProjectID: "p", UserID: "u", AvailabilityZone: "nova", Attempts: 1, CreatedAt: providerCreated,
		UpdatedAt: providerCreated.Add(1500 * time.Millisecond),
		Image:     &BootImage{ID: "1d4a4b0c-0000-4000-8000-000000000003", Name: "sleeper", Command: []string{"sleep", "600"}},
		Metadata:  map[string]string{"k": "v"}, Description: &d, ReservationID: "r-1", LaunchIndex: 2, Group: "g1",
		RequestID: "req-1", DeleteRequestID: "req-2", MigrationUUID: "m-1", RequestedAZ: "az1"})
}()

var instanceMappingJSON = MustEncode(&InstanceMapping{InstanceUUID: "6a0c9b1e-0000-4000-8000-000000000002",
	Cell: "cell1", ProjectID: "p", CreatedAt: providerCreated})

// TestServerFastDecodeMatchesEncodingJSON: random Instances and
// InstanceMappings (odd strings and times, every optional member, the
// rare parts the fast path leaves to encoding/json), their JSON
// reshaped, and edge cases decode exactly as encoding/json decodes them,
// or are declined; into empty destinations and into ones already
// holding values.
func TestServerFastDecodeMatchesEncodingJSON(t *testing.T) {
	g := genPlacement{rand.New(rand.NewSource(17)), new(bool)}
	var instances, mappings [][]byte
	for i := 0; i < 2000; i++ {
		*g.plain = i%2 == 0
		if b, err := Encode(g.instance()); err == nil {
			instances = append(instances, b, reshape(g.rng, b))
		}
		m := &InstanceMapping{InstanceUUID: g.str(), Cell: g.str(), ProjectID: g.str(), CreatedAt: g.time()}
		if b, err := Encode(m); err == nil {
			mappings = append(mappings, b, reshape(g.rng, b))
		}
	}
	instances = append(instances, placementEdgeCases(instanceJSON)...)
	mappings = append(mappings, placementEdgeCases(instanceMappingJSON)...)
	for _, v := range []string{`"description":null`, `"description":1`, `"metadata":null`, `"metadata":{}`,
		`"metadata":{"a":"b","a":"c"}`, `"metadata":{"a":1}`, `"image":null`, `"image":{"id":"x","id":"y"}`,
		`"attempts":1.5`, `"attempts":"2"`, `"launch_index":null`, `"created_at":"x"`, `"created_at":null`,
		`"host":null`, `"status":"\u0041CTIVE"`, `"status":"DELETED"`, `"fault":null`,
		`"fault":{"code":500,"message":"m","created":"2025-01-02T03:04:05Z"}`, `"failed_attempts":[]`,
		`"shelve":null`, `"shelve_actions":[]`, `"Flavor":{}`, `"flavor":null`} {
		instances = append(instances, []byte(strings.Replace(instanceJSON, `"version":1,"uuid"`, `"version":1,`+v+`,"uuid"`, 1)))
	}
	for _, v := range []string{`"description":null`, `"description":"d"`, `"description":1`, `"rxtx_factor":1`,
		`"rxtx_factor":1e400`, `"rxtx_factor":null`, `"rxtx_factor":"1"`, `"private":false`, `"private":null`,
		`"private":1`, `"projects":null`, `"projects":[]`, `"projects":[1]`, `"projects":"p"`, `"extra_specs":null`,
		`"Description":"d"`} {
		instances = append(instances, []byte(strings.Replace(instanceJSON, `"flavor":{"version":1,`, `"flavor":{"version":1,`+v+`,"x":`, 1)))
		instances = append(instances, []byte(strings.Replace(instanceJSON, `"flavor":{"version":1,`, `"flavor":{`+v+`,`, 1)))
	}
	fast := 0
	d := "old"
	for _, in := range instances {
		if decodeBoth(t, in, Instance{}) {
			fast++
		}
		decodeBoth(t, in, Instance{Name: "old", Status: "old", Attempts: 3, LaunchIndex: 4, Host: "old",
			Flavor: Flavor{ID: "old", VCPUs: 9, RXTXFactor: 2, Private: true}, UpdatedAt: time.Unix(5, 0)})
		decodeBoth(t, in, Instance{Fault: &Fault{Code: 500, Message: "old"}, FailedAttempts: []Attempt{{Host: "old"}},
			Shelve: &ShelveState{}, ShelveActions: []ServerAction{{}}})
		decodeBoth(t, in, Instance{Metadata: map[string]string{"old": "x"}})
		decodeBoth(t, in, Instance{Description: &d})
		decodeBoth(t, in, Instance{Image: &BootImage{ID: "old"}})
		decodeBoth(t, in, Instance{Flavor: Flavor{ExtraSpecs: map[string]string{"old": "x"}}})
		decodeBoth(t, in, Instance{Flavor: Flavor{Description: &d}})
		decodeBoth(t, in, Instance{Flavor: Flavor{Projects: []string{"old"}}})
	}
	// Strings with escapes, random times json.Marshal refuses and the
	// rare parts leave about 700 of 2,750 to the fast path; every plain
	// instance without a rare part takes it.
	t.Logf("%d of %d instances took the fast path", fast, len(instances))
	if fast < 600 {
		t.Errorf("only %d of %d instances took the fast path", fast, len(instances))
	}
	fast = 0
	for _, in := range mappings {
		if decodeBoth(t, in, InstanceMapping{}) {
			fast++
		}
		decodeBoth(t, in, InstanceMapping{InstanceUUID: "old", Cell: "old", CreatedAt: time.Unix(5, 0)})
	}
	t.Logf("%d of %d mappings took the fast path", fast, len(mappings))
	if fast < 1000 {
		t.Errorf("only %d of %d mappings took the fast path", fast, len(mappings))
	}
	for name, s := range map[string]string{"instance": instanceJSON, "mapping": instanceMappingJSON} {
		var ok bool
		if name == "instance" {
			ok = new(Instance).decodeFast([]byte(s))
		} else {
			ok = new(InstanceMapping).decodeFast([]byte(s))
		}
		if !ok {
			t.Errorf("the fast path refused an %s as Berth writes it:\n%s", name, s)
		}
	}
}

// TestDecodeOlderServerRecords: an Instance and an InstanceMapping as an
// older Berth wrote them (before the image, metadata, reservation,
// request ids, moves and shelving existed; members indented and in
// another order) decode through Decode as encoding/json reads them, on
// the fast path; a record with a fault or shelving, and one of a newer
// version, reach encoding/json or Decode's version error.
func TestDecodeOlderServerRecords(t *testing.T) {
	older := `{
  "version": 1, "uuid": "6a0c9b1e-0000-4000-8000-000000000002", "name": "server-1",
  "status": "ACTIVE", "host": "compute-1", "node": "compute-1", "cell": "cell1",
  "flavor": {"version": 1, "id": "1", "name": "m1.tiny", "vcpus": 1, "ram": 512, "disk": 1, "ephemeral": 0, "swap": 0},
  "project_id": "p", "user_id": "u", "attempts": 1,
  "updated_at": "2025-01-02T03:04:05.5+01:00",
  "created_at": "2025-01-02T03:04:05Z"
}`
	var in Instance
	if !in.decodeFast([]byte(older)) {
		t.Fatalf("the fast path refused an older instance record:\n%s", older)
	}
	var want Instance
	if err := json.Unmarshal([]byte(older), &want); err != nil {
		t.Fatal(err)
	}
	var got Instance
	if err := Decode("/i", []byte(older), &got); err != nil {
		t.Fatal(err)
	}
	if got.UUID != want.UUID || got.Status != StatusActive || got.Flavor.RAMMB != 512 || got.UpdatedAt.Nanosecond() != 5e8 ||
		got.Image != nil || got.Metadata != nil || got.Description != nil {
		t.Errorf("older instance record decoded as %+v", got)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Decode and encoding/json differ on an older record:\n%s", valueDiff(want, got))
	}

	faulted := strings.Replace(older, `"attempts": 1,`,
		`"attempts": 1, "fault": {"code": 500, "message": "No valid host", "created": "2025-01-02T03:04:05Z"},
  "shelve_actions": [{"action": "shelve", "request_id": "req-9", "start": "2025-01-02T03:04:05Z"}],`, 1)
	var f Instance
	if f.decodeFast([]byte(faulted)) {
		t.Errorf("the fast path took a record with a fault, which it leaves to encoding/json")
	}
	if err := Decode("/i", []byte(faulted), &f); err != nil || f.Fault == nil || f.Fault.Message != "No valid host" ||
		len(f.ShelveActions) != 1 || f.UUID != want.UUID {
		t.Errorf("a faulted record: %v, %+v", err, f)
	}

	for _, s := range []string{strings.Replace(older, `"version": 1,`, `"version": 2,`, 1),
		strings.Replace(older, `"version": 1,`, ``, 1)} {
		if err := Decode("/i", []byte(s), &Instance{}); err == nil || !strings.Contains(err.Error(), "/i") {
			t.Errorf("Decode(%s) = %v, want a version error naming the key", s, err)
		}
	}
	if err := Decode("/i", []byte(`{"version":1,"attempts":"2"}`), &Instance{}); err == nil ||
		!strings.Contains(err.Error(), "decode /i") {
		t.Errorf("Decode of a malformed instance = %v, want encoding/json's error naming the key", err)
	}

	var m InstanceMapping
	olderMapping := `{"cell": "cell1", "instance_uuid": "u1", "version": 1,
  "project_id": "p", "created_at": "2025-01-02T03:04:05Z"}`
	if !m.decodeFast([]byte(olderMapping)) || m.InstanceUUID != "u1" || m.Cell != "cell1" || m.Version != 1 {
		t.Errorf("older mapping record decoded as %+v", m)
	}
}

// BenchmarkDecodeInstance: Decode (fast path) of the instance a build
// cast carries, and of its mapping, against encoding/json.
func BenchmarkDecodeInstance(b *testing.B) {
	for _, rec := range []struct {
		name string
		data []byte
		new  func() Versioned
	}{
		{"Instance", []byte(instanceJSON), func() Versioned { return &Instance{} }},
		{"InstanceMapping", []byte(instanceMappingJSON), func() Versioned { return &InstanceMapping{} }},
	} {
		b.Run(rec.name+"/Decode", func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if err := Decode("k", rec.data, rec.new()); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(rec.name+"/json.Unmarshal", func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if err := json.Unmarshal(rec.data, rec.new()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
