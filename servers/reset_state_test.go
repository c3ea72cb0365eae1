package servers

import (
	"context"
	"errors"
	"testing"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/placement"
)

// TestResetState: the status set and the task cleared with a resetState
// action; a move in flight refused with nothing changed; a move that
// ended in error while the server still names it (a destination whose
// start failed) settled: its consumer's hold on the source freed, its
// mapping gone, the server no longer naming it.
func TestResetState(t *testing.T) {
	const id = "11111111-2222-4333-8444-555555555555"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cli := etcdtest.Client(t)
	keys := etcdschema.New("/t")
	place := placement.New(cli, keys, hclog.NewNullLogger())
	if err := place.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := place.EnsureProvider(ctx, "rp-h1", "h1", ""); err != nil {
		t.Fatal(err)
	}
	if err := place.UpdateProvider(ctx, "rp-h1", func(p *etcdschema.Provider) error {
		p.Inventories = map[string]etcdschema.Inventory{
			placement.VCPU: {Total: 8, MinUnit: 1, MaxUnit: 8, StepSize: 1, AllocationRatio: 1}}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	s := New(cli, keys, place, nil)

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
				m := &etcdschema.Migration{UUID: "m1", InstanceUUID: id, Cell: "cell1", Status: tc.migStatus,
					MigrationType: etcdschema.MigrationTypeMigration, SourceHost: "h0", DestHost: "h1"}
				if _, err := cli.Txn(ctx).Then(
					clientv3.OpPut(keys.Migration("cell1", "m1"), etcdschema.MustEncode(m)),
					clientv3.OpPut(keys.MigrationMapping("m1"), etcdschema.MustEncode(&etcdschema.InstanceMapping{InstanceUUID: id, Cell: "cell1"})),
				).Commit(); err != nil {
					t.Fatal(err)
				}
				if err := place.DeleteAllocations(ctx, "m1"); err != nil && !errors.Is(err, placement.ErrNotFound) {
					t.Fatal(err)
				}
				if err := place.PutAllocations(ctx, "m1", placement.AllocationWrite{ProjectID: "p", UserID: "u",
					Allocations: map[string]placement.ProviderAllocation{"rp-h1": {Resources: map[string]int64{placement.VCPU: 1}}}}); err != nil {
					t.Fatal(err)
				}
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
			_, aerr := place.GetAllocations(ctx, "m1")
			resp, err := cli.Get(ctx, keys.MigrationMapping("m1"), clientv3.WithCountOnly())
			if err != nil {
				t.Fatal(err)
			}
			if got.MigrationUUID != "" || !errors.Is(aerr, placement.ErrNotFound) || resp.Count != 0 {
				t.Errorf("ended move not settled: server names %q, allocation read %v, mapping %d", got.MigrationUUID, aerr, resp.Count)
			}
		})
	}
}
