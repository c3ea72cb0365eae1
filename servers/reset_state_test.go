package servers

import (
	"context"
	"errors"
	"testing"

	"github.com/berth-project/berth/etcdschema"
)

// TestResetState: the status set and the task cleared with a resetState
// action; a move in flight refused with nothing changed; a move that
// ended in error while the server still names it (a destination whose
// start failed) settled: its consumer's hold on the source freed, its
// mapping gone, the server no longer naming it.
func TestResetState(t *testing.T) {
	const id = "11111111-2222-4333-8444-555555555555"
	ctx := context.Background()
	s, place := newPlacedStore(t)

	for _, tc := range []struct {
		desc, state, migStatus string
		inst                   etcdschema.Instance
		wantErr                bool
		wantStatus             string
		settled                bool // the migration's hold and mapping gone, the server not naming it
	}{
		{"ERROR to active", "active", "", etcdschema.Instance{Status: etcdschema.StatusError, Host: "h1",
			Fault: &etcdschema.Fault{Code: 500, Message: "rebuild failed"}}, false, etcdschema.StatusActive, false},
		{"a stuck task cleared, to error", "error", "", etcdschema.Instance{Status: etcdschema.StatusActive, Host: "h1",
			TaskState: etcdschema.TaskShelving}, false, etcdschema.StatusError, false},
		{"a move in flight", "active", etcdschema.MigrationFinished, etcdschema.Instance{Status: etcdschema.StatusVerifyResize,
			Host: "h1", MigrationUUID: "m1"}, true, etcdschema.StatusVerifyResize, false},
		{"a move ended in error, still named", "active", etcdschema.MigrationError, etcdschema.Instance{Status: etcdschema.StatusError,
			Host: "h1", MigrationUUID: "m1"}, false, etcdschema.StatusActive, true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			in := tc.inst // over the last case's records
			in.UUID = id
			placeInstance(t, s, in)
			if tc.migStatus != "" {
				putNamedMove(t, s, place, id, "m1", tc.migStatus)
			}
			err := s.ResetState(ctx, id, tc.state, "req-reset")
			var inFlight *MoveInFlightError
			if tc.wantErr != (err != nil) || (tc.wantErr && !errors.As(err, &inFlight)) {
				t.Fatalf("reset: %v, want an error: %v", err, tc.wantErr)
			}
			v, err := s.Lookup(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			got := v.Instance
			if got.Status != tc.wantStatus {
				t.Errorf("status %s, want %s", got.Status, tc.wantStatus)
			}
			if tc.wantErr {
				if got.MigrationUUID != "m1" || len(got.ShelveActions) != 0 {
					t.Errorf("a refused reset changed the server: %+v", got)
				}
				return
			}
			if got.TaskState != "" || len(got.ShelveActions) != 1 || got.ShelveActions[0].Action != ActionResetState ||
				got.ShelveActions[0].RequestID != "req-reset" {
				t.Errorf("task %q, actions %+v: want no task and one resetState action", got.TaskState, got.ShelveActions)
			}
			if tc.inst.Fault != nil && (got.Fault == nil || got.Fault.Message != tc.inst.Fault.Message) {
				t.Errorf("fault %+v, want it kept", got.Fault)
			}
			if !tc.settled {
				return
			}
			if got.MigrationUUID != "" {
				t.Errorf("the server still names its ended move")
			}
			checkSettled(t, s, place, "m1")
		})
	}
}
