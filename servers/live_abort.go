package servers

import (
	"context"
	"fmt"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
)

// Aborting a live migration (nova/compute/api.py live_migrate_abort,
// DELETE /servers/{id}/migrations/{mid}): the server must be migrating
// and the migration running (from 2.65 also queued or preparing). The
// abort is recorded on the migration (AbortRequestID) in one
// transaction guarded by both records' revisions; whoever works the
// migration next (the superconductor or the agent of its current step,
// which re-reads when its own write loses to the abort) rolls it back
// and ends it cancelled, the server ACTIVE on its source. A migration
// whose source already stopped its guest completes instead: the abort
// came too late, as in Nova.

// MigrationNotFoundError is Nova's MigrationNotFoundForInstance.
type MigrationNotFoundError struct{ ID, Instance string }

func (e *MigrationNotFoundError) Error() string {
	return fmt.Sprintf("Migration %s not found for instance %s", e.ID, e.Instance)
}

// MigrationStateError is Nova's InvalidMigrationState.
type MigrationStateError struct{ ID, Instance, State, Method string }

func (e *MigrationStateError) Error() string {
	return fmt.Sprintf("Migration %s state of instance %s is %s. Cannot %s while the migration is in this state.",
		e.ID, e.Instance, e.State, e.Method)
}

// AbortLiveMigration asks to abort server id's live migration
// migrationID (its Nova integer id); queuedToo is microversion 2.65's
// abort of a migration not yet running.
func (s *Store) AbortLiveMigration(ctx context.Context, id, migrationID string, queuedToo bool, requestID string) error {
	const action = "abort live migration"
	v, err := s.Lookup(ctx, id)
	if err != nil {
		return err
	}
	if v.Instance == nil {
		return &StateError{Action: action, ID: id, Attr: "task_state", State: "None"}
	}
	in := *v.Instance
	if in.TaskState != etcdschema.TaskMigrating {
		return &StateError{Action: action, ID: id, Attr: "task_state", State: taskStateOrNone(in.TaskState)}
	}
	found, err := s.findInstanceMigration(ctx, in.Cell, id, migrationID)
	if err != nil {
		return err
	}
	mig := found.Migration
	if mig.MigrationType != etcdschema.MigrationTypeLiveMigration || !etcdschema.LiveAbortable(mig.Status, queuedToo) ||
		mig.AbortRequestID != "" {
		return &MigrationStateError{ID: migrationID, Instance: id, State: mig.Status, Method: action}
	}
	mkey := s.keys.Migration(in.Cell, mig.UUID)
	cur, mrev, err := s.readMigration(ctx, mkey)
	if err != nil {
		return err
	}
	if cur == nil || cur.Status != mig.Status {
		return fmt.Errorf("%s %s: %w", action, id, ErrKeptChanging)
	}
	cur.AbortRequestID, cur.UpdatedAt = requestID, time.Now().UTC()
	if requestID == "" {
		cur.AbortRequestID = "abort"
	}
	if err := s.putMigrationIfUnchanged(ctx, action, id, in.Cell, v.Rev, mkey, mrev, cur); err != nil {
		return err
	}
	s.log.Info("live migration abort requested", "instance", id, "migration", mig.UUID, "status", mig.Status,
		"request_id", requestID)
	return nil
}

// ForceCompleteLiveMigration asks server id's running live migration
// migrationID to complete now (nova/compute/api.py
// live_migrate_force_complete, 2.22): recorded on the migration, which
// the destination's agent watches while its driver brings the guest
// over.
func (s *Store) ForceCompleteLiveMigration(ctx context.Context, id, migrationID, requestID string) error {
	const action = "force_complete"
	v, err := s.Lookup(ctx, id)
	if err != nil {
		return err
	}
	if v.Instance == nil {
		return &StateError{Action: action, ID: id, Attr: "vm_state", State: "building"}
	}
	in := *v.Instance
	if in.Status != etcdschema.StatusActive {
		return &StateError{Action: action, ID: id, Attr: "vm_state", State: vmStateOf(&in)}
	}
	if in.TaskState != etcdschema.TaskMigrating {
		return &StateError{Action: action, ID: id, Attr: "task_state", State: taskStateOrNone(in.TaskState)}
	}
	found, err := s.findInstanceMigration(ctx, in.Cell, id, migrationID)
	if err != nil {
		return err
	}
	if found.Status != etcdschema.MigrationRunning || found.MigrationType != etcdschema.MigrationTypeLiveMigration {
		return &MigrationStateError{ID: migrationID, Instance: id, State: found.Status, Method: "force complete"}
	}
	mkey := s.keys.Migration(in.Cell, found.UUID)
	cur, mrev, err := s.readMigration(ctx, mkey)
	if err != nil {
		return err
	}
	if cur == nil || cur.Status != etcdschema.MigrationRunning {
		return fmt.Errorf("%s %s: %w", action, id, ErrKeptChanging)
	}
	if cur.ForceCompleteRequestID != "" {
		return nil // asked already: the destination is completing it
	}
	cur.ForceCompleteRequestID, cur.UpdatedAt = requestID, time.Now().UTC()
	if requestID == "" {
		cur.ForceCompleteRequestID = "force-complete"
	}
	if err := s.putMigrationIfUnchanged(ctx, action, id, in.Cell, v.Rev, mkey, mrev, cur); err != nil {
		return err
	}
	s.log.Info("live migration force complete requested", "instance", id, "migration", found.UUID, "request_id", requestID)
	return nil
}

// taskStateOrNone is a task state as Nova's messages print it: Python's
// None when there is none.
func taskStateOrNone(state string) string {
	if state == "" {
		return "None"
	}
	return state
}

// findInstanceMigration is server id's migration whose Nova integer id
// is migrationID, or Nova's MigrationNotFoundForInstance.
func (s *Store) findInstanceMigration(ctx context.Context, cell, id, migrationID string) (*MigrationRecord, error) {
	migs, err := s.InstanceMigrations(ctx, cell, id)
	if err != nil {
		return nil, err
	}
	for i := range migs {
		if strconv.FormatInt(migs[i].ID, 10) == migrationID {
			return &migs[i], nil
		}
	}
	return nil, &MigrationNotFoundError{ID: migrationID, Instance: id}
}

// putMigrationIfUnchanged writes a request onto a running migration,
// only if neither server id (read at instRev) nor the migration (at
// migRev) changed since the checks above read them: the agent or the
// superconductor working it may have moved it on meanwhile.
func (s *Store) putMigrationIfUnchanged(ctx context.Context, action, id, cell string, instRev int64,
	mkey string, migRev int64, cur *etcdschema.Migration) error {
	resp, err := s.cli.Txn(ctx).If(
		clientv3.Compare(clientv3.ModRevision(s.keys.CellInstance(cell, id)), "=", instRev),
		clientv3.Compare(clientv3.ModRevision(mkey), "=", migRev)).
		Then(clientv3.OpPut(mkey, etcdschema.MustEncode(cur))).Commit()
	if err != nil {
		return fmt.Errorf("%s %s: %w", action, id, err)
	}
	if !resp.Succeeded {
		return fmt.Errorf("%s %s: %w", action, id, ErrKeptChanging)
	}
	return nil
}
