package servers

import (
	"context"
	"errors"
	"testing"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/placement"
)

type noAllocations struct{}

func (noAllocations) DeleteAllocations(context.Context, string) error { return placement.ErrNotFound }

func newStore(t *testing.T) *Store {
	t.Helper()
	return New(etcdtest.Client(t), etcdschema.New("/t"), noAllocations{}, nil)
}

func createOne(t *testing.T, s *Store, name string) string {
	t.Helper()
	res, err := s.Create(context.Background(), CreateRequest{Name: name, Count: 1, ProjectID: "p", UserID: "u",
		Flavor: etcdschema.Flavor{ID: "1", Name: "m1.tiny", VCPUs: 1, RAMMB: 512, DiskGB: 1}})
	if err != nil {
		t.Fatal(err)
	}
	return res.BuildRequests[0].InstanceUUID
}

// After a delete whose answer etcd lost, the server found gone is the one
// this request deleted: done, not "not found".
func TestDeleteAttemptAfterALostAnswer(t *testing.T) {
	s := newStore(t)
	id := createOne(t, s, "a")
	ctx := context.Background()
	for _, tc := range []struct {
		sent bool
		want deleteOutcome
	}{
		{false, deleteDone}, // the delete lands
		{false, deleteGone}, // a later request finds nothing
		{true, deleteDone},  // a retry of the request whose answer was lost
	} {
		got, wrote, err := s.deleteAttempt(ctx, id, "req-1", tc.sent)
		if err != nil || wrote || got != tc.want {
			t.Fatalf("deleteAttempt(sent %v) = %v, %v, %v; want %v", tc.sent, got, wrote, err, tc.want)
		}
	}
}

// A create's servers are found by Lookup and List until Delete removes
// them; a second Delete is ErrNotFound.
func TestCreateLookupListDelete(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	res, err := s.Create(ctx, CreateRequest{Name: "web", Count: 3, ProjectID: "p", UserID: "u",
		Flavor: etcdschema.Flavor{ID: "1", Name: "m1.tiny"}})
	if err != nil {
		t.Fatal(err)
	}
	for i, br := range res.BuildRequests {
		if want := "web-" + string(rune('1'+i)); br.Name != want || br.ReservationID != res.ID || br.Index != i {
			t.Errorf("build request %d: %+v; want name %s in %s", i, br, want, res.ID)
		}
		v, err := s.Lookup(ctx, br.InstanceUUID)
		if err != nil || v.BuildRequest == nil || v.ID() != br.InstanceUUID || v.ProjectID() != "p" {
			t.Fatalf("lookup %s: %+v %v", br.InstanceUUID, v, err)
		}
	}
	all, err := s.List(ctx)
	if err != nil || len(all) != 3 {
		t.Fatalf("list: %d servers, %v", len(all), err)
	}
	id := res.BuildRequests[0].InstanceUUID
	if err := s.Delete(ctx, id, "req-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Lookup(ctx, id); !errors.Is(err, ErrNotFound) {
		t.Errorf("lookup after delete: %v", err)
	}
	if err := s.Delete(ctx, id, "req-2"); !errors.Is(err, ErrNotFound) {
		t.Errorf("second delete: %v", err)
	}
	if _, err := s.Create(ctx, CreateRequest{Name: "x", Count: MaxCount + 1}); err == nil {
		t.Error("a create over MaxCount was accepted")
	}
}
