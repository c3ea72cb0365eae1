package drain

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/leader"
	"github.com/berth-project/berth/servers"
)

// work advances one drain and writes what changed, fenced and compared
// with the revision it read. A write refused because the API changed
// the record meanwhile (a cancel) is merged into the fresh record and
// tried again, so a move started by this sweep is never forgotten.
func (d *duty) work(ctx context.Context, f leader.Fence, key string, rev int64, rec *etcdschema.HostDrain) error {
	next := cloneDrain(rec)
	if err := d.advance(ctx, next); err != nil {
		return err
	}
	for try := 0; try < 10; try++ {
		if reflect.DeepEqual(next, rec) {
			return nil
		}
		next.UpdatedAt = d.Now().UTC()
		ok, err := f.Txn(ctx, d.Client, []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(key), "=", rev)},
			clientv3.OpPut(key, etcdschema.MustEncode(next)))
		if err != nil {
			return fmt.Errorf("record the drain of %s: %w", rec.Host, err)
		}
		if ok {
			d.logChanges(rec, next)
			*rec = *next
			return nil
		}
		resp, err := d.Client.Get(ctx, key)
		if err != nil {
			return fmt.Errorf("read the drain of %s: %w", rec.Host, err)
		}
		if len(resp.Kvs) == 0 {
			return nil // deleted by hand: nothing to record into
		}
		var fresh etcdschema.HostDrain
		if err := etcdschema.Decode(key, resp.Kvs[0].Value, &fresh); err != nil {
			return err
		}
		if fresh.RequestID != rec.RequestID {
			return nil // a new drain of the host replaced this one
		}
		merged := merge(rec, next, &fresh)
		rec, next, rev = &fresh, merged, resp.Kvs[0].ModRevision
	}
	return fmt.Errorf("drain %s: %w", rec.Host, ErrKeptChanging)
}

// merge applies the changes from old to next onto fresh: each server's
// progress, the servers found, and the overall state unless fresh has
// ended meanwhile (a cancel wins over a completion found at once).
func merge(old, next, fresh *etcdschema.HostDrain) *etcdschema.HostDrain {
	out := cloneDrain(fresh)
	was := map[string]etcdschema.DrainedServer{}
	for _, s := range old.Instances {
		was[s.UUID] = s
	}
	at := map[string]int{}
	for i, s := range out.Instances {
		at[s.UUID] = i
	}
	for _, s := range next.Instances {
		if prev, ok := was[s.UUID]; ok && reflect.DeepEqual(prev, s) {
			continue
		}
		if i, ok := at[s.UUID]; ok {
			out.Instances[i] = s
		} else {
			out.Instances = append(out.Instances, s)
		}
	}
	if out.State == etcdschema.DrainDraining && next.State != old.State {
		out.State, out.Error, out.FinishedAt = next.State, next.Error, next.FinishedAt
	}
	return out
}

func cloneDrain(d *etcdschema.HostDrain) *etcdschema.HostDrain {
	out := *d
	out.Instances = slices.Clone(d.Instances)
	return &out
}

// advance is one look at a drain: follow the moves in flight; while
// draining, find servers that arrived, end at the deadline, start moves
// up to the parallelism, and end when nothing is left to move.
func (d *duty) advance(ctx context.Context, rec *etcdschema.HostDrain) error {
	now := d.Now().UTC()
	if rec.State == etcdschema.DrainDraining && rec.Live && d.Live == nil {
		d.finish(rec, etcdschema.DrainIncomplete, ErrLiveUnavailable.Error(), now)
		return d.giveUpWaiting(ctx, rec, now)
	}
	if err := d.followMoves(ctx, rec, now); err != nil {
		return err
	}
	if rec.State != etcdschema.DrainDraining {
		return d.giveUpWaiting(ctx, rec, now)
	}
	if err := d.findServers(ctx, rec); err != nil {
		return err
	}
	counts := rec.Counts()
	if rec.Deadline != nil && !now.Before(*rec.Deadline) {
		d.finish(rec, etcdschema.DrainIncomplete,
			fmt.Sprintf("the deadline passed with %d servers not moved", counts[etcdschema.DrainWaiting]+counts[etcdschema.DrainMoving]), now)
		return d.giveUpWaiting(ctx, rec, now)
	}
	slots := rec.Parallel - counts[etcdschema.DrainMoving]
	for i := range rec.Instances {
		if slots <= 0 {
			break
		}
		s := &rec.Instances[i]
		if s.State != etcdschema.DrainWaiting {
			continue
		}
		if err := d.start(ctx, rec, s, now); err != nil {
			return err
		}
		if s.State == etcdschema.DrainMoving {
			slots--
		}
	}
	counts = rec.Counts()
	if counts[etcdschema.DrainWaiting]+counts[etcdschema.DrainMoving] > 0 {
		return nil
	}
	if counts[etcdschema.DrainFailed] > 0 {
		d.finish(rec, etcdschema.DrainIncomplete, fmt.Sprintf("%d servers could not move", counts[etcdschema.DrainFailed]), now)
	} else {
		d.finish(rec, etcdschema.DrainComplete, "", now)
	}
	return nil
}

func (d *duty) finish(rec *etcdschema.HostDrain, state, why string, now time.Time) {
	rec.State, rec.Error, rec.FinishedAt = state, why, &now
}

// findServers adds the servers the host reports that the drain does not
// list yet (a build cast to it before it was disabled) as waiting.
func (d *duty) findServers(ctx context.Context, rec *etcdschema.HostDrain) error {
	uuids, err := hostServers(ctx, d.Client, d.Keys, rec.Host)
	if err != nil {
		return err
	}
	known := map[string]bool{}
	for _, s := range rec.Instances {
		known[s.UUID] = true
	}
	for _, id := range uuids {
		if !known[id] {
			rec.Instances = append(rec.Instances, etcdschema.DrainedServer{UUID: id, State: etcdschema.DrainWaiting})
		}
	}
	return nil
}

// followMoves reads the migrations of the moving servers (in read
// transactions within etcd's 128 operations) and takes each a step.
func (d *duty) followMoves(ctx context.Context, rec *etcdschema.HostDrain, now time.Time) error {
	var moving []int
	for i, s := range rec.Instances {
		if s.State == etcdschema.DrainMoving {
			moving = append(moving, i)
		}
	}
	const batch = 100
	for start := 0; start < len(moving); start += batch {
		part := moving[start:min(start+batch, len(moving))]
		ops := make([]clientv3.Op, 0, len(part))
		for _, i := range part {
			s := rec.Instances[i]
			ops = append(ops, clientv3.OpGet(d.Keys.Migration(s.Cell, s.MigrationUUID)))
		}
		resp, err := d.Client.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			return fmt.Errorf("read the migrations of the drain of %s: %w", rec.Host, err)
		}
		for j, i := range part {
			s := &rec.Instances[i]
			kvs := resp.Responses[j].GetResponseRange().Kvs
			if len(kvs) == 0 {
				if err := d.migrationGone(ctx, s, now); err != nil {
					return err
				}
				continue
			}
			var mig etcdschema.Migration
			if err := etcdschema.Decode(string(kvs[0].Key), kvs[0].Value, &mig); err != nil {
				return err
			}
			d.followMove(ctx, rec, s, &mig, now)
		}
	}
	return nil
}

// followMove takes one move a step: confirm a finished cold move (the
// drain's to confirm), and record a move that ended.
func (d *duty) followMove(ctx context.Context, rec *etcdschema.HostDrain, s *etcdschema.DrainedServer, mig *etcdschema.Migration, now time.Time) {
	s.DestHost = mig.DestHost
	switch mig.Status {
	case etcdschema.MigrationFinished:
		if mig.MigrationType == etcdschema.MigrationTypeLiveMigration {
			return
		}
		err := d.Servers.ConfirmResize(ctx, s.UUID, rec.RequestID)
		var se *servers.StateError
		var nm *servers.NoMigrationError
		switch {
		case err == nil:
			d.Log.Debug("drain confirmed a move", "host", rec.Host, "instance", s.UUID, "migration", mig.UUID)
		case errors.As(err, &se), errors.As(err, &nm), errors.Is(err, servers.ErrKeptChanging):
			// Its state moved on (confirmed by someone else, or not yet
			// VERIFY_RESIZE): the next look sees where it went.
		default:
			d.Log.Warn("drain could not confirm a move; trying again", "host", rec.Host, "instance", s.UUID, "error", err)
		}
	case etcdschema.MigrationConfirmed, etcdschema.MigrationCompleted, etcdschema.MigrationDone:
		s.State, s.Reason, s.FinishedAt = etcdschema.DrainMoved, "", &now
	case etcdschema.MigrationError, etcdschema.MigrationFailed, etcdschema.MigrationCancelled, etcdschema.MigrationReverted:
		s.State, s.Reason, s.FinishedAt = etcdschema.DrainFailed, migrationReason(mig), &now
	}
}

// migrationReason is why mig did not move its server: its error, else
// its last attempt's reason, else its status.
func migrationReason(mig *etcdschema.Migration) string {
	if mig.Error != "" {
		return mig.Error
	}
	for i := len(mig.Attempts) - 1; i >= 0; i-- {
		if r := mig.Attempts[i].Reason; r != "" {
			return r
		}
	}
	return "migration " + mig.Status
}

// migrationGone handles a moving server whose migration record is gone:
// deleted with its server (moved: nothing is left on the host), or lost.
func (d *duty) migrationGone(ctx context.Context, s *etcdschema.DrainedServer, now time.Time) error {
	_, err := d.Servers.Lookup(ctx, s.UUID)
	switch {
	case errors.Is(err, servers.ErrNotFound):
		s.State, s.Reason, s.FinishedAt = etcdschema.DrainMoved, "the server was deleted", &now
	case err != nil:
		return err
	default:
		s.State, s.Reason, s.FinishedAt = etcdschema.DrainFailed, "its migration record "+s.MigrationUUID+" is gone", &now
	}
	return nil
}

// giveUpWaiting settles the waiting servers of a drain that ended
// (cancelled, past its deadline, unable to move live). A server still
// waiting in the record may have a move a leader started and died
// before recording (doc.go): it is the drain's, so it is adopted and
// followed to its end like any other (a cold one confirmed); with a
// cancel or a deadline inside a leader failover it would otherwise stay
// in VERIFY_RESIZE with no one to confirm it. Every other waiting server
// is given up: not moved, with why (the reason it was waiting, if any),
// and a FinishedAt, so an ended drain's servers are looked up once
// (active), not at every sweep.
func (d *duty) giveUpWaiting(ctx context.Context, rec *etcdschema.HostDrain, now time.Time) error {
	for i := range rec.Instances {
		s := &rec.Instances[i]
		if s.State != etcdschema.DrainWaiting || s.FinishedAt != nil {
			continue
		}
		if err := d.adopt(ctx, rec, s, now); err != nil {
			return err
		}
		if s.State != etcdschema.DrainWaiting {
			continue
		}
		// Why it was still waiting (busy, say) is why it never moved.
		if s.Reason == "" {
			s.Reason = "not moved: the drain ended " + rec.State
		}
		s.FinishedAt = &now
	}
	return nil
}

// adopt settles a waiting server without moving it, when it needs no
// move of the drain's: deleted (moved), already moving with the drain's
// request id (a move its predecessor started but did not record, see
// doc.go: adopted), or off the host by another request (moved). It
// leaves the server waiting otherwise.
func (d *duty) adopt(ctx context.Context, rec *etcdschema.HostDrain, s *etcdschema.DrainedServer, now time.Time) error {
	v, err := d.Servers.Lookup(ctx, s.UUID)
	if errors.Is(err, servers.ErrNotFound) {
		s.State, s.Reason, s.FinishedAt = etcdschema.DrainMoved, "the server was deleted", &now
		return nil
	}
	if err != nil {
		return err
	}
	in := v.Instance
	if in == nil {
		return nil
	}
	s.Cell = in.Cell
	if in.MigrationUUID != "" {
		mig, err := d.readMigration(ctx, in.Cell, in.MigrationUUID)
		if err != nil {
			return err
		}
		if mig != nil && mig.RequestID == rec.RequestID {
			s.State, s.MigrationUUID, s.Reason, s.StartedAt = etcdschema.DrainMoving, mig.UUID, "", &mig.CreatedAt
			d.Log.Info("drain adopted a move it had started", "host", rec.Host, "instance", s.UUID, "migration", mig.UUID)
			return nil
		}
	}
	if in.Host != "" && in.Host != rec.Host && in.TaskState == "" {
		s.State, s.DestHost, s.Reason, s.FinishedAt = etcdschema.DrainMoved, in.Host, "moved off the host by another request", &now
	}
	return nil
}

// start moves one waiting server, unless adopt settles it.
func (d *duty) start(ctx context.Context, rec *etcdschema.HostDrain, s *etcdschema.DrainedServer, now time.Time) error {
	if err := d.adopt(ctx, rec, s, now); err != nil || s.State != etcdschema.DrainWaiting {
		return err
	}
	var mig *etcdschema.Migration
	var err error
	if rec.Live {
		mig, err = d.Live.LiveMigrate(ctx, s.UUID, rec.RequestID)
	} else {
		mig, err = d.Servers.Move(ctx, s.UUID, servers.MoveRequest{RequestID: rec.RequestID})
	}
	var se *servers.StateError
	switch {
	case err == nil:
		s.State, s.Cell, s.MigrationUUID, s.Reason, s.StartedAt = etcdschema.DrainMoving, mig.Cell, mig.UUID, "", &now
	case errors.Is(err, servers.ErrNotFound):
		s.State, s.Reason, s.FinishedAt = etcdschema.DrainMoved, "the server was deleted", &now
	case errors.As(err, &se) && se.Attr == "vm_state" && se.State == "error":
		// An ERROR server cannot be migrated (Nova refuses it too).
		s.State, s.Reason, s.FinishedAt = etcdschema.DrainFailed, err.Error(), &now
	case errors.As(err, &se), errors.Is(err, servers.ErrKeptChanging):
		// Busy (building, another task, a resize awaiting its confirm):
		// it waits, with the reason shown, until it can move or the
		// deadline passes.
		s.Reason = "waiting: " + err.Error()
	case ctx.Err() != nil:
		return ctx.Err()
	case rec.Live:
		// The live API's refusals (no live-capable driver, no host)
		// are this server's, not the drain's.
		s.State, s.Reason, s.FinishedAt = etcdschema.DrainFailed, err.Error(), &now
	default:
		return fmt.Errorf("migrate %s: %w", s.UUID, err)
	}
	return nil
}

func (d *duty) readMigration(ctx context.Context, cell, id string) (*etcdschema.Migration, error) {
	key := d.Keys.Migration(cell, id)
	resp, err := d.Client.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", key, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, nil
	}
	var m etcdschema.Migration
	if err := etcdschema.Decode(key, resp.Kvs[0].Value, &m); err != nil {
		return nil, err
	}
	return &m, nil
}

// logChanges logs each server that finished and the drain's end.
func (d *duty) logChanges(old, next *etcdschema.HostDrain) {
	was := map[string]string{}
	for _, s := range old.Instances {
		was[s.UUID] = s.State
	}
	for _, s := range next.Instances {
		if was[s.UUID] == s.State {
			continue
		}
		switch s.State {
		case etcdschema.DrainMoving:
			d.Log.Info("drain moving a server", "host", next.Host, "instance", s.UUID, "migration", s.MigrationUUID)
		case etcdschema.DrainMoved:
			d.Log.Info("drain moved a server", "host", next.Host, "instance", s.UUID, "dest", s.DestHost, "reason", s.Reason)
		case etcdschema.DrainFailed:
			d.Log.Warn("drain could not move a server", "host", next.Host, "instance", s.UUID, "reason", s.Reason)
		}
	}
	if old.State != next.State {
		d.Log.Info("host drain ended", "host", next.Host, "state", next.State, "reason", next.Error, "counts", next.Counts())
	}
}
