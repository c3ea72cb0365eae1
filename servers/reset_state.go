package servers

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
)

// ResetState is os-resetState (nova/api/openstack/compute/
// admin_actions.py _reset_state): an operator's way out of a state no
// action leads from, such as a server left ERROR on a source that came
// back after a failed evacuation, whose retry (a migration) needs it
// ACTIVE. The server's vm_state becomes active or error and its task is
// cleared, whatever they were, with a resetState instance action; the
// fault and everything else stay. Nova touches nothing else either, so a
// server whose guest is not running stays so until it is moved or
// deleted.
//
// Berth refuses one case Nova allows: a server whose move is in flight
// (it names a migration not yet in a final state). Each of the move's
// steps checks the instance unchanged, so a reset would stop the chain
// with the migration unfinished and the source's allocation held by its
// consumer; the move is to be settled first (confirm, revert, abort).
// And it settles one Nova leaves: a server still naming a move that
// ended in error (ended_move.go), so a move it then starts does not
// leave the old one's hold on its source behind for ever.

// ResetStates maps os-resetState's states to the instance's status.
var ResetStates = map[string]string{"active": etcdschema.StatusActive, "error": etcdschema.StatusError}

// ActionResetState is Nova's instance_actions.RESET_STATE.
const ActionResetState = "resetState"

// ResetState sets server id's status to ResetStates[state] and clears
// its task.
func (s *Store) ResetState(ctx context.Context, id, state, requestID string) error {
	status, ok := ResetStates[state]
	if !ok {
		return fmt.Errorf("reset state of %s: unknown state %q", id, state)
	}
	v, err := s.Lookup(ctx, id)
	if err != nil {
		return err
	}
	if v.Instance == nil {
		// Still a BuildRequest: nothing on a host to reset yet.
		return &StateError{Action: ActionResetState, ID: id, Attr: "vm_state", State: "building"}
	}
	in := *v.Instance
	k := s.keys
	ikey := k.CellInstance(in.Cell, id)
	nm, err := s.readNamedMove(ctx, ActionResetState, &in)
	if err != nil {
		return err
	}
	cmps, ops, err := nm.settle(ctx, s, ActionResetState, &in)
	if err != nil {
		return err
	}
	cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(ikey), "=", v.Rev))
	now := time.Now().UTC()
	in.Status, in.TaskState, in.UpdatedAt = status, "", now
	in.StartAction(ActionResetState, requestID, now)
	ops = append(ops, clientv3.OpPut(ikey, etcdschema.MustEncode(&in)))
	resp, err := s.cli.Txn(ctx).If(cmps...).Then(ops...).Commit()
	if err != nil {
		return fmt.Errorf("reset state of %s: %w", id, err)
	}
	if !resp.Succeeded {
		return fmt.Errorf("reset state of %s: %w", id, ErrKeptChanging)
	}
	s.log.Info("server state reset", "instance", id, "status", status, "host", in.Host, "request_id", requestID)
	return nil
}
