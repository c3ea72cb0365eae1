package servers

import (
	"context"
	"encoding/json"
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
	carried := &etcdschema.Alternates{InstanceUUID: "u1", Cell: "cell1", MaxAttempts: 3,
		Attempts:  []etcdschema.Attempt{{Host: "h1", At: at}},
		Remaining: []etcdschema.Selection{{ServiceHost: "h4", Nodename: "n4", Cell: "cell1"}}}
	castWith := &etcdschema.Build{Op: etcdschema.OpBuild, InstanceUUID: "u1", Cell: "cell1",
		Alternates: json.RawMessage(etcdschema.MustEncode(carried))}
	castWithout := &etcdschema.Build{Op: etcdschema.OpBuild, InstanceUUID: "u1", Cell: "cell1"}
	retrying := instance(etcdschema.StatusBuild, nil)
	retrying.Host = ""
	for _, tc := range []struct {
		name  string
		v     *Server
		alts  *etcdschema.Alternates // an older Berth's key
		cast  *etcdschema.Build      // on the instance's host
		retry *etcdschema.Retry
		want  Selection
	}{
		{"carried in the cast", &Server{Instance: instance(etcdschema.StatusBuild, nil)}, nil, castWith, nil,
			Selection{Instance: "u1", AttemptsMade: 2, Status: etcdschema.StatusBuild, Host: "h2", Cell: "cell1",
				MaxAttempts: 3, Kept: true, Attempts: []Attempt{{Host: "h1", At: at}},
				Alternates: []Alternate{{Host: "h4", Node: "n4", Cell: "cell1"}}}},
		{"carried in a retry", &Server{Instance: retrying}, nil, nil,
			&etcdschema.Retry{InstanceUUID: "u1", Cell: "cell1", FailedHost: "h1", Reason: "no room", Build: *castWith},
			Selection{Instance: "u1", AttemptsMade: 2, Status: etcdschema.StatusBuild, Cell: "cell1",
				MaxAttempts: 3, Kept: true, Attempts: []Attempt{{Host: "h1", Reason: "no room", At: at}},
				Alternates: []Alternate{{Host: "h4", Node: "n4", Cell: "cell1"}}}},
		{"an older Berth's key beside a cast without them", &Server{Instance: instance(etcdschema.StatusBuild, nil)},
			&etcdschema.Alternates{InstanceUUID: "u1", Cell: "cell1", MaxAttempts: 3, Attempts: failed},
			castWithout, nil,
			Selection{Instance: "u1", AttemptsMade: 2, Status: etcdschema.StatusBuild, Host: "h2", Cell: "cell1",
				MaxAttempts: 3, Kept: true, Attempts: []Attempt{{Host: "h1", Reason: "no room", At: at}},
				Alternates: []Alternate{}}},
		{"a cast without them, no key", &Server{Instance: instance(etcdschema.StatusBuild, nil)}, nil, castWithout, nil,
			Selection{Instance: "u1", AttemptsMade: 2, Status: etcdschema.StatusBuild, Host: "h2", Cell: "cell1",
				Attempts: []Attempt{}, Alternates: []Alternate{}}},
		{"kept record", &Server{Instance: instance(etcdschema.StatusBuild, nil)},
			&etcdschema.Alternates{InstanceUUID: "u1", Cell: "cell1", MaxAttempts: 3, Attempts: failed,
				Remaining: []etcdschema.Selection{{ServiceHost: "h3", Nodename: "n3", Cell: "cell1"}}}, nil, nil,
			Selection{Instance: "u1", AttemptsMade: 2, Status: etcdschema.StatusBuild, Host: "h2", Cell: "cell1",
				MaxAttempts: 3, Kept: true, Attempts: []Attempt{{Host: "h1", Reason: "no room", At: at}},
				Alternates: []Alternate{{Host: "h3", Node: "n3", Cell: "cell1"}}}},
		{"active after a retry", &Server{Instance: instance(etcdschema.StatusActive, failed)}, nil, nil, nil,
			Selection{Instance: "u1", AttemptsMade: 2, Status: etcdschema.StatusActive, Host: "h2", Cell: "cell1",
				Attempts:   []Attempt{{Host: "h1", Reason: "no room", At: at}, {Host: "h2", At: at.Add(time.Minute), Built: true}},
				Alternates: []Alternate{}}},
		{"error: no build worked", &Server{Instance: instance(etcdschema.StatusError, failed)}, nil, nil, nil,
			Selection{Instance: "u1", AttemptsMade: 2, Status: etcdschema.StatusError, Host: "h2", Cell: "cell1",
				Attempts: []Attempt{{Host: "h1", Reason: "no room", At: at}}, Alternates: []Alternate{}}},
		{"active at once", &Server{Instance: instance(etcdschema.StatusActive, nil)}, nil, nil, nil,
			Selection{Instance: "u1", AttemptsMade: 2, Status: etcdschema.StatusActive, Host: "h2", Cell: "cell1",
				Attempts: []Attempt{}, Alternates: []Alternate{}}},
		{"build request", &Server{BuildRequest: &etcdschema.BuildRequest{InstanceUUID: "u1"}}, nil, nil, nil,
			Selection{Instance: "u1", Status: etcdschema.StatusBuild, Attempts: []Attempt{}, Alternates: []Alternate{}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for key, v := range map[string]etcdschema.Versioned{s.keys.Alternates("u1"): tc.alts,
				s.keys.Build("h2", "u1"): tc.cast, s.keys.Retry("cell1", "u1"): tc.retry} {
				if _, err := s.cli.Delete(ctx, key); err != nil {
					t.Fatal(err)
				}
				if !reflect.ValueOf(v).IsNil() {
					if _, err := s.cli.Put(ctx, key, etcdschema.MustEncode(v)); err != nil {
						t.Fatal(err)
					}
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
