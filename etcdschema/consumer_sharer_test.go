package etcdschema

import (
	"reflect"
	"testing"
	"time"
	"unsafe"
)

// TestConsumerSharerDecodesAsDecode: every record a sharer decodes equals
// Decode's (an unreadable one gives Decode's error), resources maps equal
// to a recent one are that one, provider uuids are Provider's strings,
// and an allocation equal to the last one on its provider is that map.
func TestConsumerSharerDecodesAsDecode(t *testing.T) {
	at := time.Date(2026, 11, 26, 21, 0, 0, 0, time.UTC)
	rp := "5b1f0b2a-0000-4000-8000-000000000001"
	small := map[string]int64{"VCPU": 1, "MEMORY_MB": 2048}
	cases := []struct {
		name  string
		value string
	}{
		{"first", MustEncode(&Consumer{UUID: "c1", Generation: 1, ProjectID: "p", UserID: "u",
			Allocations: map[string]ConsumerAllocation{rp: {Resources: small}}, CreatedAt: at, UpdatedAt: at})},
		{"same flavor", MustEncode(&Consumer{UUID: "c2", Generation: 2, ProjectID: "p", UserID: "u2",
			Allocations: map[string]ConsumerAllocation{rp: {Resources: map[string]int64{"MEMORY_MB": 2048, "VCPU": 1}}}, CreatedAt: at, UpdatedAt: at})},
		{"other provider and flavor", MustEncode(&Consumer{UUID: "c3", Generation: 1, ProjectID: "q", UserID: "u", ConsumerType: "INSTANCE",
			Allocations: map[string]ConsumerAllocation{"unknown-rp": {Resources: map[string]int64{"VCPU": 4}}}, CreatedAt: at, UpdatedAt: at})},
		{"no allocations", MustEncode(&Consumer{UUID: "c4", ProjectID: "p", UserID: "u", CreatedAt: at, UpdatedAt: at})},
		{"unreadable", `{"version":1,"uuid":7}`},
		{"newer version", `{"version":99,"uuid":"c5"}`},
	}
	indexed := string([]byte(rp)) // the caller's own string
	sh := ConsumerSharer{Provider: func(uuid []byte) (string, bool) {
		return indexed, string(uuid) == indexed
	}}
	var first map[string]int64
	var firstAllocs map[string]ConsumerAllocation // c1's, on rp alone
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			key := "/berth/placement/consumers/" + tc.name
			want := &Consumer{}
			wantErr := Decode(key, []byte(tc.value), want)
			got, err := sh.Decode([]byte(key), []byte(tc.value))
			if (err == nil) != (wantErr == nil) || (err != nil && err.Error() != wantErr.Error()) {
				t.Fatalf("error %v, Decode's %v", err, wantErr)
			}
			if err != nil {
				return
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("decoded %+v, Decode %+v", got, want)
			}
			switch tc.name {
			case "first":
				firstAllocs = got.Allocations
			case "same flavor":
				// On the same provider with the same resources: c1's map.
				if reflect.ValueOf(got.Allocations).Pointer() != reflect.ValueOf(firstAllocs).Pointer() {
					t.Errorf("an equal single-provider allocation was not shared")
				}
			}
			for p, a := range got.Allocations {
				if p == indexed && unsafe.StringData(p) != unsafe.StringData(indexed) {
					t.Errorf("provider uuid is a copy, not Provider's string")
				}
				switch {
				case first == nil:
					first = a.Resources
				case reflect.DeepEqual(a.Resources, first) && reflect.ValueOf(a.Resources).Pointer() != reflect.ValueOf(first).Pointer():
					t.Errorf("an equal resources map was not shared")
				}
			}
		})
	}
}
