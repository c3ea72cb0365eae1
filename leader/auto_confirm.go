package leader

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/informer"
	"github.com/berth-project/berth/servers"
)

// ResizeConfirmer confirms a resize on the system's behalf
// (servers.Store.AutoConfirmResize).
type ResizeConfirmer interface {
	AutoConfirmResize(ctx context.Context, id, migration, requestID string) error
}

var _ ResizeConfirmer = (*servers.Store)(nil)

// autoConfirm is Nova's _poll_unconfirmed_resizes, run by the leader
// instead of every compute host: a migration 'finished' (its server
// VERIFY_RESIZE) for longer than ResizeConfirmWindow is confirmed as its
// owner would confirm it, under a request id of its own. As in Nova, a
// migration whose server is gone or in ERROR, or in any other state than
// VERIFY_RESIZE with no task, is set to 'error' instead, and a server
// being deleted is left alone.
//
// The migrations in flight are the ones with a migration mapping, so the
// sweep reads those (few) rather than every cell's history. The confirm
// itself is not fenced: it is guarded by the server's and the migration's
// revisions like a user's confirm, so a deposed leader racing the new one
// (or the owner) confirms at most once; the writes only the leader makes
// (a migration set to error) carry the fence.
func (d *duties) autoConfirm(ctx context.Context, f Fence) error {
	due, err := d.unconfirmedMigrations(ctx)
	if err != nil {
		return err
	}
	if len(due) > 0 {
		d.Log.Info("found unconfirmed migrations older than the confirm window",
			"count", len(due), "window", d.ResizeConfirmWindow)
	}
	for _, m := range due {
		if err := d.autoConfirmOne(ctx, f, m); err != nil {
			return err
		}
	}
	return nil
}

// migrationAt is a migration with the revision it was read at.
type migrationAt struct {
	mig    etcdschema.Migration
	modRev int64
}

// unconfirmedMigrations reads the migrations in flight (those with a
// mapping) and returns the ones finished longer than the window ago.
func (d *duties) unconfirmedMigrations(ctx context.Context) ([]migrationAt, error) {
	k := d.Keys
	var keys []string
	_, err := informer.List(ctx, d.Client, k.MigrationMappings(), 0, decodeMapping, func(page []informer.Event) error {
		for _, ev := range page {
			if ev.DecodeErr != nil {
				d.Log.Warn("leaving an unreadable migration mapping", "key", ev.Key, "error", ev.DecodeErr)
				continue
			}
			pk, err := k.ParseKey(ev.Key)
			if err != nil || pk.Kind != etcdschema.KindMigrationMapping {
				continue
			}
			keys = append(keys, k.Migration(ev.Decoded.(*etcdschema.InstanceMapping).Cell, pk.UUID))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list migrations in flight: %w", err)
	}
	cutoff := d.Now().Add(-d.ResizeConfirmWindow)
	var due []migrationAt
	const batch = 100 // reads a transaction, within etcd's 128 operations
	for start := 0; start < len(keys); start += batch {
		ops := make([]clientv3.Op, 0, batch)
		for _, key := range keys[start:min(start+batch, len(keys))] {
			ops = append(ops, clientv3.OpGet(key))
		}
		resp, err := d.Client.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			return nil, fmt.Errorf("read migrations in flight: %w", err)
		}
		for _, r := range resp.Responses {
			for _, kv := range r.GetResponseRange().Kvs {
				var m etcdschema.Migration
				if err := etcdschema.Decode(string(kv.Key), kv.Value, &m); err != nil {
					d.Log.Warn("leaving an unreadable migration", "key", string(kv.Key), "error", err)
					continue
				}
				if m.Status == etcdschema.MigrationFinished && !m.UpdatedAt.After(cutoff) {
					due = append(due, migrationAt{m, kv.ModRevision})
				}
			}
		}
	}
	return due, nil
}

// decodeMapping is the list's decoder of migration mappings.
func decodeMapping(key string, val []byte) (any, error) {
	var m etcdschema.InstanceMapping
	if err := etcdschema.Decode(key, val, &m); err != nil {
		return nil, err
	}
	return &m, nil
}

// autoConfirmOne checks one due migration's server as Nova does, then
// confirms it or sets it to error.
func (d *duties) autoConfirmOne(ctx context.Context, f Fence, m migrationAt) error {
	k := d.Keys
	mig := m.mig
	ikey := k.CellInstance(mig.Cell, mig.InstanceUUID)
	resp, err := d.Client.Get(ctx, ikey)
	if err != nil {
		return fmt.Errorf("read %s: %w", ikey, err)
	}
	if len(resp.Kvs) == 0 {
		// The server is gone: nothing will confirm this migration. Its
		// mapping goes with it, so the orphan duty may free what its
		// consumer still holds.
		return d.migrationToError(ctx, f, m, fmt.Sprintf("Instance %s not found", mig.InstanceUUID),
			[]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(ikey), "=", 0)},
			clientv3.OpDelete(k.MigrationMapping(mig.UUID)))
	}
	var inst etcdschema.Instance
	if err := etcdschema.Decode(ikey, resp.Kvs[0].Value, &inst); err != nil {
		d.Log.Warn("leaving a migration whose server is unreadable", "migration", mig.UUID, "error", err)
		return nil
	}
	instSame := clientv3.Compare(clientv3.ModRevision(ikey), "=", resp.Kvs[0].ModRevision)
	switch {
	case inst.Status == etcdschema.StatusError:
		// The server keeps the migration (a delete frees its consumer).
		return d.migrationToError(ctx, f, m, "In ERROR state", []clientv3.Cmp{instSame})
	case inst.TaskState == etcdschema.TaskDeleting:
		d.Log.Debug("server being deleted during resize confirmation; skipping", "instance", inst.UUID, "migration", mig.UUID)
		return nil
	case inst.Status != etcdschema.StatusVerifyResize || inst.TaskState != "" || inst.MigrationUUID != mig.UUID:
		reason := fmt.Sprintf("In states %s/%s, not %s/None", inst.Status, taskOrNone(inst.TaskState), etcdschema.StatusVerifyResize)
		if inst.MigrationUUID != mig.UUID {
			reason = fmt.Sprintf("Instance %s is no longer in this migration", inst.UUID)
		}
		return d.migrationToError(ctx, f, m, reason, []clientv3.Cmp{instSame})
	}
	rid := "req-" + uuid.NewString()
	d.Log.Info("automatically confirming migration", "migration", mig.UUID, "instance", inst.UUID, "request_id", rid)
	err = d.Confirmer.AutoConfirmResize(ctx, inst.UUID, mig.UUID, rid)
	var stateErr *servers.StateError
	var noMig *servers.NoMigrationError
	switch {
	case err == nil:
	case errors.As(err, &stateErr), errors.As(err, &noMig), errors.Is(err, servers.ErrKeptChanging), errors.Is(err, servers.ErrNotFound):
		// The server changed since it was read (its owner confirmed,
		// reverted or deleted it): the next sweep looks again.
		d.Log.Info("error auto-confirming resize; will retry later", "instance", inst.UUID, "migration", mig.UUID, "error", err)
	default:
		return fmt.Errorf("auto-confirm resize of %s: %w", inst.UUID, err)
	}
	return nil
}

// migrationToError sets a due migration to error with reason, fenced and
// guarded by its revision and cmps, with ops in the same transaction.
func (d *duties) migrationToError(ctx context.Context, f Fence, m migrationAt, reason string, cmps []clientv3.Cmp, ops ...clientv3.Op) error {
	mig := m.mig
	mig.Status, mig.Error, mig.UpdatedAt = etcdschema.MigrationError, reason, d.Now().UTC()
	mkey := d.Keys.Migration(mig.Cell, mig.UUID)
	ok, err := f.Txn(ctx, d.Client, append(cmps, clientv3.Compare(clientv3.ModRevision(mkey), "=", m.modRev)),
		append(ops, clientv3.OpPut(mkey, etcdschema.MustEncode(&mig)))...)
	if err != nil {
		return fmt.Errorf("set migration %s to error: %w", mig.UUID, err)
	}
	if ok {
		d.Log.Warn("setting migration to error", "migration", mig.UUID, "instance", mig.InstanceUUID, "reason", reason)
	}
	return nil
}

// taskOrNone is a task state as Nova prints it.
func taskOrNone(task string) string {
	if task == "" {
		return "None"
	}
	return task
}

// autoConfirmDuty is the duty when a window is set (Nova's default, 0,
// confirms nothing) and a Confirmer is given.
func autoConfirmDuty(d *duties) []Duty {
	if d.ResizeConfirmWindow <= 0 || d.Confirmer == nil {
		return nil
	}
	return []Duty{{Name: "auto_confirm_resizes", Interval: d.Interval, Run: d.autoConfirm}}
}
