package conductor

import (
	"testing"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/workqueue"
)

// TestDecodedRequestsByVersion: a stored version is decoded once and
// shared until its holder takes it; a new version of the key (a new mod
// revision) is decoded afresh; an unreadable one gives Decode's error.
func TestDecodedRequestsByVersion(t *testing.T) {
	keys := etcdschema.New("/t")
	item := func(uuid, name string, rev int64) workqueue.Item {
		br := &etcdschema.BuildRequest{InstanceUUID: uuid, Name: name, ReservationID: "r", Count: 2, Index: 1}
		return workqueue.Item{ID: uuid, Key: keys.BuildRequest(uuid), Value: []byte(etcdschema.MustEncode(br)), ModRev: rev}
	}
	var d decodedRequests
	v1 := item("a", "first", 10)
	p1, err := d.get(v1)
	if err != nil || p1.Name != "first" || p1.Count != 2 {
		t.Fatalf("get = %+v, %v", p1, err)
	}
	if again, _ := d.get(v1); again != p1 {
		t.Fatal("the same version was decoded twice")
	}
	v2 := item("a", "second", 11)
	if p2, _ := d.get(v2); p2 == p1 || p2.Name != "second" {
		t.Fatalf("a new version read as %+v", p2)
	}
	got, err := d.take(v2)
	if err != nil || got.Name != "second" {
		t.Fatalf("take = %+v, %v", got, err)
	}
	if _, ok := d.m[v2.Key]; ok {
		t.Fatal("take left its entry")
	}
	bad := workqueue.Item{ID: "b", Key: keys.BuildRequest("b"), Value: []byte("{"), ModRev: 12}
	if _, err := d.take(bad); err == nil {
		t.Fatal("an unreadable request decoded")
	}
}
