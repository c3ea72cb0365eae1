package servers

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/berth-project/berth/etcdschema"
)

// SelectionOf says what was tried and what is left: the alternates
// record while it is kept, else the instance's failed attempts and, for a
// server not in ERROR, the build that worked.
func TestSelectionOf(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	at := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	failed := []etcdschema.Attempt{{Host: "h1", Reason: "no room", At: at}}
	instance := func(status string, attempts []etcdschema.Attempt) *etcdschema.Instance {
		return &etcdschema.Instance{UUID: "u1", Status: status, Host: "h2", Cell: "cell1", Attempts: 2,
			FailedAttempts: attempts, UpdatedAt: at.Add(time.Minute)}
	}
	for _, tc := range []struct {
		name string
		v    *Server
		alts *etcdschema.Alternates
		want Selection
	}{
		{"kept record", &Server{Instance: instance(etcdschema.StatusBuild, nil)},
			&etcdschema.Alternates{InstanceUUID: "u1", Cell: "cell1", MaxAttempts: 3, Attempts: failed,
				Remaining: []etcdschema.Selection{{ServiceHost: "h3", Nodename: "n3", Cell: "cell1"}}},
			Selection{Instance: "u1", AttemptsMade: 2, Status: etcdschema.StatusBuild, Host: "h2", Cell: "cell1",
				MaxAttempts: 3, Kept: true, Attempts: []Attempt{{Host: "h1", Reason: "no room", At: at}},
				Alternates: []Alternate{{Host: "h3", Node: "n3", Cell: "cell1"}}}},
		{"active after a retry", &Server{Instance: instance(etcdschema.StatusActive, failed)}, nil,
			Selection{Instance: "u1", AttemptsMade: 2, Status: etcdschema.StatusActive, Host: "h2", Cell: "cell1",
				Attempts:   []Attempt{{Host: "h1", Reason: "no room", At: at}, {Host: "h2", At: at.Add(time.Minute), Built: true}},
				Alternates: []Alternate{}}},
		{"error: no build worked", &Server{Instance: instance(etcdschema.StatusError, failed)}, nil,
			Selection{Instance: "u1", AttemptsMade: 2, Status: etcdschema.StatusError, Host: "h2", Cell: "cell1",
				Attempts: []Attempt{{Host: "h1", Reason: "no room", At: at}}, Alternates: []Alternate{}}},
		{"active at once", &Server{Instance: instance(etcdschema.StatusActive, nil)}, nil,
			Selection{Instance: "u1", AttemptsMade: 2, Status: etcdschema.StatusActive, Host: "h2", Cell: "cell1",
				Attempts: []Attempt{}, Alternates: []Alternate{}}},
		{"build request", &Server{BuildRequest: &etcdschema.BuildRequest{InstanceUUID: "u1"}}, nil,
			Selection{Instance: "u1", Status: etcdschema.StatusBuild, Attempts: []Attempt{}, Alternates: []Alternate{}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := s.keys.Alternates("u1")
			if _, err := s.cli.Delete(ctx, key); err != nil {
				t.Fatal(err)
			}
			if tc.alts != nil {
				if _, err := s.cli.Put(ctx, key, string(etcdschema.MustEncode(tc.alts))); err != nil {
					t.Fatal(err)
				}
			}
			got, err := s.SelectionOf(ctx, tc.v)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("SelectionOf =\n %+v\nwant\n %+v", got, tc.want)
			}
		})
	}
}
