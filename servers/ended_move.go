package servers

import (
	"context"
	"errors"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/placement"
)

// A cold move whose destination failed to start the guest leaves the
// server ERROR there, still naming its migration (in error), whose
// consumer holds the source's allocation for a revert an ERROR server
// cannot ask for. Nova keeps that allocation too, and it leaks once the
// server moves on. The actions that take such a server on (os-resetState,
// evacuate) settle that move first: its consumer's allocation freed, its
// mapping (which keeps the leader's orphan duty off it) dropped and the
// server no longer naming it, in the action's own transaction. A move
// still in flight is refused instead (MoveInFlightError): its steps
// settle it.

// namedMove is the migration a server names, as read.
type namedMove struct {
	uuid string
	// cmps guard the action's transaction: the migration unchanged.
	cmps []clientv3.Cmp
}

// readNamedMove reads the migration in names (nil when it names none)
// and refuses, for action, one still in flight.
func (s *Store) readNamedMove(ctx context.Context, action string, in *etcdschema.Instance) (*namedMove, error) {
	if in.MigrationUUID == "" {
		return nil, nil
	}
	mkey := s.keys.Migration(in.Cell, in.MigrationUUID)
	resp, err := s.cli.Get(ctx, mkey)
	if err != nil {
		return nil, fmt.Errorf("%s %s: read its migration: %w", action, in.UUID, err)
	}
	nm := &namedMove{uuid: in.MigrationUUID}
	if len(resp.Kvs) == 1 {
		var m etcdschema.Migration
		if err := etcdschema.Decode(mkey, resp.Kvs[0].Value, &m); err != nil {
			return nil, err
		}
		if etcdschema.MigrationInFlight(m.Status) {
			return nil, &MoveInFlightError{Action: action, ID: in.UUID, Migration: m.UUID}
		}
		nm.cmps = []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(mkey), "=", resp.Kvs[0].ModRevision)}
	}
	return nm, nil
}

// settle frees the ended move's allocation (idempotent, so an action
// whose transaction then loses leaves the server naming a migration
// that holds nothing, which the next try or a delete settles), clears
// in's reference to it, and returns the guards and ops for the
// action's transaction.
func (nm *namedMove) settle(ctx context.Context, s *Store, action string, in *etcdschema.Instance) ([]clientv3.Cmp, []clientv3.Op, error) {
	if nm == nil {
		return nil, nil, nil
	}
	if s.placement == nil {
		return nil, nil, fmt.Errorf("%s %s: free the allocation of its ended migration: %w", action, in.UUID, ErrFreeAllocations)
	}
	if err := s.placement.DeleteAllocations(ctx, nm.uuid); err != nil && !errors.Is(err, placement.ErrNotFound) {
		return nil, nil, fmt.Errorf("%s %s: free the allocation of its ended migration %s: %w", action, in.UUID, nm.uuid, err)
	}
	s.log.Info("the server's ended move settled", "action", action, "instance", in.UUID, "migration", nm.uuid)
	in.MigrationUUID = ""
	return nm.cmps, []clientv3.Op{clientv3.OpDelete(s.keys.MigrationMapping(nm.uuid))}, nil
}
