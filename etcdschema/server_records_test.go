package etcdschema

import (
	"reflect"
	"testing"
)

// The image, metadata and description (and an instance's reservation,
// launch index and group) came without a version bump: a record written
// before them decodes with their zero values, and one written with them
// round-trips.
func TestServerRecordsOldAndNew(t *testing.T) {
	oldBR := `{"version":1,"instance_uuid":"u","name":"a","reservation_id":"r-1","index":0,"count":1,` +
		`"flavor":{"version":1,"id":"1","name":"m1.tiny","vcpus":1,"ram":512,"disk":1,"ephemeral":0,"swap":0},` +
		`"project_id":"p","user_id":"u","created_at":"2026-01-02T03:04:05Z"}`
	var br BuildRequest
	if err := Decode("/t/build_requests/u", []byte(oldBR), &br); err != nil {
		t.Fatal(err)
	}
	if br.Image != nil || br.Metadata != nil || br.Description != nil || br.Name != "a" {
		t.Errorf("old build request: %+v", br)
	}
	oldIn := `{"version":1,"uuid":"u","name":"a","status":"ACTIVE","cell":"cell1","flavor":{"id":"1"},` +
		`"project_id":"p","user_id":"u","attempts":1,"created_at":"2026-01-02T03:04:05Z","updated_at":"2026-01-02T03:04:05Z"}`
	var in Instance
	if err := Decode("/t/cells/cell1/instances/u", []byte(oldIn), &in); err != nil {
		t.Fatal(err)
	}
	if in.Image != nil || in.ReservationID != "" || in.LaunchIndex != 0 || in.Group != "" || in.Metadata != nil {
		t.Errorf("old instance: %+v", in)
	}

	desc := "web <1>"
	br.Image = &BootImage{ID: "i", Name: "sleeper", Command: []string{"sleep", "60"}}
	br.Metadata, br.Description = map[string]string{"k": "v"}, &desc
	var back BuildRequest
	if err := Decode("/t/build_requests/u", []byte(MustEncode(&br)), &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, br) {
		t.Errorf("build request round trip:\n got %+v\nwant %+v", back, br)
	}
	in.Image, in.Metadata, in.Description = br.Image, br.Metadata, &desc
	in.ReservationID, in.LaunchIndex, in.Group = "r-1", 2, "g"
	var inBack Instance
	if err := Decode("/t/cells/cell1/instances/u", []byte(MustEncode(&in)), &inBack); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(inBack, in) {
		t.Errorf("instance round trip:\n got %+v\nwant %+v", inBack, in)
	}
}
