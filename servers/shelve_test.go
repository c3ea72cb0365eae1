package servers

import (
	"context"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
)

// placeInstance stores in (in cell1, mapped) and a compute service h1.
func placeInstance(t *testing.T, s *Store, in etcdschema.Instance) {
	t.Helper()
	k := s.keys
	in.Cell, in.ProjectID, in.UserID = "cell1", "p", "u"
	_, err := s.cli.Txn(context.Background()).Then(
		clientv3.OpPut(k.InstanceMapping(in.UUID), etcdschema.MustEncode(&etcdschema.InstanceMapping{InstanceUUID: in.UUID, Cell: "cell1", ProjectID: "p"})),
		clientv3.OpPut(k.CellInstance("cell1", in.UUID), etcdschema.MustEncode(&in)),
		clientv3.OpPut(k.Service("h1"), etcdschema.MustEncode(&etcdschema.Service{Host: "h1", Cell: "cell1"})),
		clientv3.OpPut(k.ShelvedOffload(in.UUID), etcdschema.MustEncode(&etcdschema.ShelvedOffload{InstanceUUID: in.UUID, Cell: "cell1"})),
	).Commit()
	if err != nil {
		t.Fatal(err)
	}
}

// TestShelveActionsAccepted: each action's writes, in one transaction:
// the task, the action, the cast to the host (or the MoveRequest of an
// offloaded server's unshelve), the offload due date dropped.
func TestShelveActionsAccepted(t *testing.T) {
	const id = "11111111-2222-4333-8444-555555555555"
	for _, tc := range []struct {
		desc     string
		inst     etcdschema.Instance
		do       func(s *Store) error
		task     string
		castStep string // "" for none
		moveReq  bool
		check    func(t *testing.T, in etcdschema.Instance)
	}{
		{"shelve, offload at once", etcdschema.Instance{Status: etcdschema.StatusActive, Host: "h1"},
			func(s *Store) error { return s.Shelve(context.Background(), id, "req-1", 0) },
			etcdschema.TaskShelving, etcdschema.StepShelve, false, func(t *testing.T, in etcdschema.Instance) {
				if in.Shelve == nil || !in.Shelve.OffloadNow || in.Shelve.OffloadAfter != 0 {
					t.Errorf("shelve state %+v, want OffloadNow", in.Shelve)
				}
				if len(in.ShelveActions) != 1 || in.ShelveActions[0].Action != "shelve" || in.ShelveActions[0].RequestID != "req-1" {
					t.Errorf("actions %+v, want shelve req-1", in.ShelveActions)
				}
			}},
		{"shelve, offload later", etcdschema.Instance{Status: etcdschema.StatusActive, Host: "h1"},
			func(s *Store) error { return s.Shelve(context.Background(), id, "req-1", 5*time.Minute) },
			etcdschema.TaskShelving, etcdschema.StepShelve, false, func(t *testing.T, in etcdschema.Instance) {
				if in.Shelve == nil || in.Shelve.OffloadNow || in.Shelve.OffloadAfter != 5*time.Minute {
					t.Errorf("shelve state %+v, want OffloadAfter 5m", in.Shelve)
				}
			}},
		{"shelve, never offload", etcdschema.Instance{Status: etcdschema.StatusActive, Host: "h1"},
			func(s *Store) error { return s.Shelve(context.Background(), id, "req-1", ShelveOffloadNever) },
			etcdschema.TaskShelving, etcdschema.StepShelve, false, func(t *testing.T, in etcdschema.Instance) {
				if in.Shelve == nil || in.Shelve.OffloadNow || in.Shelve.OffloadAfter != 0 {
					t.Errorf("shelve state %+v, want neither", in.Shelve)
				}
			}},
		{"shelveOffload", etcdschema.Instance{Status: etcdschema.StatusShelved, Host: "h1"},
			func(s *Store) error { return s.ShelveOffload(context.Background(), id, "req-2") },
			etcdschema.TaskShelvingOffloading, etcdschema.StepShelveOffload, false, nil},
		{"unshelve a SHELVED server", etcdschema.Instance{Status: etcdschema.StatusShelved, Host: "h1"},
			func(s *Store) error { return s.Unshelve(context.Background(), id, UnshelveRequest{RequestID: "req-3"}) },
			etcdschema.TaskUnshelving, etcdschema.StepUnshelveStart, false, nil},
		{"unshelve an offloaded server into its zone", etcdschema.Instance{Status: etcdschema.StatusShelvedOffloaded, RequestedAZ: "az1",
			Shelve: &etcdschema.ShelveState{Attempts: []etcdschema.Attempt{{Host: "old"}}}},
			func(s *Store) error { return s.Unshelve(context.Background(), id, UnshelveRequest{RequestID: "req-3"}) },
			etcdschema.TaskUnshelving, "", true, func(t *testing.T, in etcdschema.Instance) {
				if in.RequestedAZ != "az1" || len(in.Shelve.Attempts) != 0 {
					t.Errorf("zone %q attempts %+v, want az1 kept and the last unshelve's attempts gone", in.RequestedAZ, in.Shelve.Attempts)
				}
			}},
		{"unshelve an offloaded server unpinned (2.91 null)", etcdschema.Instance{Status: etcdschema.StatusShelvedOffloaded, RequestedAZ: "az1"},
			func(s *Store) error {
				return s.Unshelve(context.Background(), id, UnshelveRequest{ZoneGiven: true, Host: "h1", RequestID: "req-3"})
			},
			etcdschema.TaskUnshelving, "", true, func(t *testing.T, in etcdschema.Instance) {
				if in.RequestedAZ != "" || in.Shelve.RequestedHost != "h1" {
					t.Errorf("zone %q host %q, want unpinned to h1", in.RequestedAZ, in.Shelve.RequestedHost)
				}
			}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			s := newStore(t)
			in := tc.inst
			in.UUID = id
			placeInstance(t, s, in)
			if err := tc.do(s); err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			v, err := s.Lookup(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			got := *v.Instance
			if got.TaskState != tc.task {
				t.Errorf("task %q, want %q", got.TaskState, tc.task)
			}
			resp, err := s.cli.Get(ctx, s.keys.Build("h1", id))
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.castStep == "" && len(resp.Kvs) != 0:
				t.Errorf("cast to h1 written, want none")
			case tc.castStep != "":
				var b etcdschema.Build
				if len(resp.Kvs) != 1 || etcdschema.Decode("cast", resp.Kvs[0].Value, &b) != nil || b.Move == nil ||
					b.Move.Step != tc.castStep || b.Move.Kind != etcdschema.MoveKindUnshelve {
					t.Errorf("cast %+v, want step %s of kind unshelve", b.Move, tc.castStep)
				}
			}
			mr, _ := s.cli.Get(ctx, s.keys.MoveRequest(id))
			if (len(mr.Kvs) == 1) != tc.moveReq {
				t.Errorf("move request written %v, want %v", len(mr.Kvs) == 1, tc.moveReq)
			}
			if so, _ := s.cli.Get(ctx, s.keys.ShelvedOffload(id)); len(so.Kvs) != 0 {
				t.Error("the offload due date was kept")
			}
			if tc.check != nil {
				tc.check(t, got)
			}
		})
	}
}

// TestShelveActionsRefused: Nova's refusals, each a typed error.
func TestShelveActionsRefused(t *testing.T) {
	const id = "11111111-2222-4333-8444-555555555555"
	denied := errors.New("policy says no")
	nowhere := "nowhere"
	var se *StateError
	var ue *UnshelveStateError
	var he *HostError
	var hz *HostNotInZoneError
	for _, tc := range []struct {
		desc string
		inst etcdschema.Instance
		do   func(s *Store) error
		is   func(err error) bool
		text string
	}{
		{"shelve a SHELVED server", etcdschema.Instance{Status: etcdschema.StatusShelved, Host: "h1"},
			func(s *Store) error { return s.Shelve(context.Background(), id, "r", 0) },
			func(err error) bool { return errors.As(err, &se) }, "Cannot 'shelve' instance " + id + " while it is in vm_state shelved"},
		{"shelve while resizing", etcdschema.Instance{Status: etcdschema.StatusActive, Host: "h1", TaskState: etcdschema.TaskResizePrep},
			func(s *Store) error { return s.Shelve(context.Background(), id, "r", 0) },
			func(err error) bool { return errors.As(err, &se) }, "Cannot 'shelve' instance " + id + " while it is in task_state resize_prep"},
		{"offload an ACTIVE server", etcdschema.Instance{Status: etcdschema.StatusActive, Host: "h1"},
			func(s *Store) error { return s.ShelveOffload(context.Background(), id, "r") },
			func(err error) bool { return errors.As(err, &se) }, "Cannot 'shelveOffload' instance " + id + " while it is in vm_state active"},
		{"unshelve an ACTIVE server", etcdschema.Instance{Status: etcdschema.StatusActive, Host: "h1"},
			func(s *Store) error { return s.Unshelve(context.Background(), id, UnshelveRequest{}) },
			func(err error) bool { return errors.As(err, &se) }, "Cannot 'unshelve' instance " + id + " while it is in vm_state active"},
		{"unshelve while unshelving", etcdschema.Instance{Status: etcdschema.StatusShelvedOffloaded, TaskState: etcdschema.TaskUnshelving},
			func(s *Store) error { return s.Unshelve(context.Background(), id, UnshelveRequest{}) },
			func(err error) bool { return errors.As(err, &se) }, "Cannot 'unshelve' instance " + id + " while it is in task_state unshelving"},
		{"a zone for a SHELVED server", etcdschema.Instance{Status: etcdschema.StatusShelved, Host: "h1"},
			func(s *Store) error {
				return s.Unshelve(context.Background(), id, UnshelveRequest{ZoneGiven: true, Zone: &nowhere})
			},
			func(err error) bool { return errors.As(err, &ue) }, "Specifying an availability zone or a host when unshelving server \"" +
				id + "\" with status \"shelved\" is not supported. The server status must be SHELVED_OFFLOADED."},
		{"an unknown zone", etcdschema.Instance{Status: etcdschema.StatusShelvedOffloaded},
			func(s *Store) error {
				return s.Unshelve(context.Background(), id, UnshelveRequest{ZoneGiven: true, Zone: &nowhere})
			},
			func(err error) bool { return errors.Is(err, ErrZoneUnavailable) }, ""},
		{"a host the caller may not name", etcdschema.Instance{Status: etcdschema.StatusShelvedOffloaded},
			func(s *Store) error {
				return s.Unshelve(context.Background(), id, UnshelveRequest{Host: "h1", AuthorizeHost: func() error { return denied }})
			},
			func(err error) bool { return errors.Is(err, denied) }, ""},
		{"an unknown host", etcdschema.Instance{Status: etcdschema.StatusShelvedOffloaded},
			func(s *Store) error { return s.Unshelve(context.Background(), id, UnshelveRequest{Host: "h9"}) },
			func(err error) bool { return errors.As(err, &he) }, ""},
		{"a host outside the server's zone", etcdschema.Instance{Status: etcdschema.StatusShelvedOffloaded, RequestedAZ: "az1"},
			func(s *Store) error { return s.Unshelve(context.Background(), id, UnshelveRequest{Host: "h1"}) },
			func(err error) bool { return errors.As(err, &hz) }, "Host \"h1\" is not in the availability zone \"az1\"."},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			s := newStore(t)
			in := tc.inst
			in.UUID = id
			placeInstance(t, s, in)
			err := tc.do(s)
			if err == nil || !tc.is(err) || (tc.text != "" && err.Error() != tc.text) {
				t.Fatalf("got %v, want %q", err, tc.text)
			}
			v, _ := s.Lookup(context.Background(), id)
			if v.Instance.TaskState != tc.inst.TaskState {
				t.Errorf("a refused action changed the task to %q", v.Instance.TaskState)
			}
		})
	}
}
