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

// newPlacedStore is a Store over real etcd and placement, with provider
// rp-h1 of 8 VCPU.
func newPlacedStore(t *testing.T) (*Store, *placement.Service) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
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
	return New(cli, keys, place, nil), place
}

// putNamedMove records migration mig of server id in status, with its
// mapping and its consumer holding 1 VCPU on rp-h1 (the source's part).
func putNamedMove(t *testing.T, s *Store, place *placement.Service, id, mig, status string) {
	t.Helper()
	ctx := context.Background()
	m := &etcdschema.Migration{UUID: mig, InstanceUUID: id, Cell: "cell1", Status: status,
		MigrationType: etcdschema.MigrationTypeMigration, SourceHost: "h0", DestHost: "h1"}
	if _, err := s.cli.Txn(ctx).Then(
		clientv3.OpPut(s.keys.Migration("cell1", mig), etcdschema.MustEncode(m)),
		clientv3.OpPut(s.keys.MigrationMapping(mig), etcdschema.MustEncode(&etcdschema.InstanceMapping{InstanceUUID: id, Cell: "cell1"})),
	).Commit(); err != nil {
		t.Fatal(err)
	}
	if err := place.DeleteAllocations(ctx, mig); err != nil && !errors.Is(err, placement.ErrNotFound) {
		t.Fatal(err)
	}
	if err := place.PutAllocations(ctx, mig, placement.AllocationWrite{ProjectID: "p", UserID: "u",
		Allocations: map[string]placement.ProviderAllocation{"rp-h1": {Resources: map[string]int64{placement.VCPU: 1}}}}); err != nil {
		t.Fatal(err)
	}
}

// checkSettled fails unless mig's consumer holds nothing and its
// mapping is gone.
func checkSettled(t *testing.T, s *Store, place *placement.Service, mig string) {
	t.Helper()
	ctx := context.Background()
	_, aerr := place.GetAllocations(ctx, mig)
	resp, err := s.cli.Get(ctx, s.keys.MigrationMapping(mig), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(aerr, placement.ErrNotFound) || resp.Count != 0 {
		t.Errorf("ended move %s not settled: allocation read %v, mapping %d", mig, aerr, resp.Count)
	}
}

// TestEvacuateSettlesAnEndedMove: an ERROR server still naming a move
// that ended in error (its destination failed to start it) is
// evacuable from its down host, as in Nova; the evacuation frees the
// old move's hold on its source and drops its mapping, so the server's
// new migration leaves nothing behind. A move in flight is refused.
func TestEvacuateSettlesAnEndedMove(t *testing.T) {
	const id = "11111111-2222-4333-8444-555555555555"
	ctx := context.Background()
	s, place := newPlacedStore(t)
	// h1 has a service record and no liveness key: down.
	placeInstance(t, s, etcdschema.Instance{UUID: id, Status: etcdschema.StatusError, Host: "h1", MigrationUUID: "m1"})
	putNamedMove(t, s, place, id, "m1", etcdschema.MigrationPreMigrating)
	var inFlight *MoveInFlightError
	if _, err := s.Evacuate(ctx, id, EvacuateRequest{RequestID: "req-evac"}); !errors.As(err, &inFlight) {
		t.Fatalf("evacuate during a move: %v, want MoveInFlightError", err)
	}
	putNamedMove(t, s, place, id, "m1", etcdschema.MigrationError)
	mig, err := s.Evacuate(ctx, id, EvacuateRequest{RequestID: "req-evac"})
	if err != nil {
		t.Fatalf("evacuate an ERROR server naming an ended move: %v", err)
	}
	v, err := s.Lookup(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if v.Instance.MigrationUUID != mig.UUID || v.Instance.TaskState != etcdschema.TaskRebuilding {
		t.Errorf("server names %q (task %q), want the evacuation %s rebuilding", v.Instance.MigrationUUID, v.Instance.TaskState, mig.UUID)
	}
	checkSettled(t, s, place, "m1")
}
