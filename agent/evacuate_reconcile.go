package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/informer"
	"github.com/berth-project/berth/placement"
)

// The source's side of an evacuation (Nova's _destroy_evacuated_instances
// at init_host). While this host was down its servers may have been
// evacuated: their migrations (type evacuation, source this host) are the
// tombstones. An agent that comes back, at start (reconcile, and once
// more as soon as the host is up) or when its liveness lease is granted
// again after it was lost, destroys the local
// guest of every server evacuated from it whose evacuation is accepted,
// pre-migrating or done, so no server runs twice, and removes this
// host's instance info for it (the schedulers' view of this host). A
// done evacuation also gets its source allocation freed, should the
// destination have failed to, and ends completed, as Nova's does; one
// still in flight is left to its destination, which settles it. A
// source whose agent kept running (forced down, not dead) is told by a
// cleanup cast (MoveEvacuateCleanup) from the cell conductor instead.

// evacuatedFrom reads the evacuations from this host that may still
// have a guest here, keyed by instance, with their revisions.
func (a *Agent) evacuatedFrom(ctx context.Context) (map[string]*etcdschema.Migration, map[string]int64, error) {
	resp, err := a.cli.Get(ctx, a.keys.Migrations(a.cfg.Cell), clientv3.WithPrefix())
	if err != nil {
		return nil, nil, fmt.Errorf("agent %s: list migrations of cell %s: %w", a.cfg.Host, a.cfg.Cell, err)
	}
	migs, revs := map[string]*etcdschema.Migration{}, map[string]int64{}
	for _, kv := range resp.Kvs {
		var m etcdschema.Migration
		if err := etcdschema.Decode(string(kv.Key), kv.Value, &m); err != nil {
			a.log.Warn("evacuations: skipping unreadable migration", "key", string(kv.Key), "error", err)
			continue
		}
		if m.MigrationType != etcdschema.MigrationTypeEvacuation || m.SourceHost != a.cfg.Host ||
			!etcdschema.EvacuationHoldsSource(m.Status) {
			continue
		}
		if prev, ok := migs[m.InstanceUUID]; ok && prev.CreatedAt.After(m.CreatedAt) {
			continue // the newest evacuation of a server speaks for it
		}
		migs[m.InstanceUUID], revs[m.InstanceUUID] = &m, kv.ModRevision
	}
	return migs, revs, nil
}

// destroyEvacuated destroys the stale copies of the servers evacuated
// from this host (running is what the driver runs) and returns their
// uuids, which the rest of the reconcile leaves alone. handled, when not
// nil, is the evacuation revisions by server already worked: one still
// at that revision is skipped (its clean-up is done and the guest was
// listed after it), and each worked now is added.
func (a *Agent) destroyEvacuated(ctx context.Context, running []string, handled map[string]int64) (map[string]bool, error) {
	migs, revs, err := a.evacuatedFrom(ctx)
	if err != nil || len(migs) == 0 {
		return nil, err
	}
	gone := map[string]bool{}
	for uuid, m := range migs {
		if rev, ok := handled[uuid]; ok && rev == revs[uuid] {
			continue
		}
		left, err := a.cleanEvacuation(ctx, m, revs[uuid], slices.Contains(running, uuid), nil)
		if err != nil {
			return nil, err
		}
		if left {
			gone[uuid] = true
		}
		if handled != nil {
			handled[uuid] = revs[uuid]
		}
	}
	return gone, nil
}

// cleanEvacuation cleans this host up after evacuation m (at revision
// rev) of a server: its guest destroyed when runs, its instance info
// dropped, and, once done, the source's allocation freed (normally by
// the cell conductor already; idempotent) and the evacuation completed,
// with more in the same transaction. A done evacuation whose server is
// back on this host (evacuated or moved here again while this agent ran
// on), or on its way back (a move in flight to this host), leaves the
// guest, the server's own, alone. It says whether the server left this
// host for good (a server on its way back is checked again by the
// reconcile, which leaves it to its move too).
func (a *Agent) cleanEvacuation(ctx context.Context, m *etcdschema.Migration, rev int64, runs bool, more []clientv3.Op) (bool, error) {
	uuid := m.InstanceUUID
	log := a.log.With("instance", uuid, "migration", m.UUID, "status", m.Status)
	back, arriving := false, false
	if m.Status == etcdschema.MigrationDone {
		in, _, err := a.readInstance(ctx, a.keys.CellInstance(m.Cell, uuid))
		if err != nil {
			return false, err
		}
		back = in != nil && in.Host == a.cfg.Host
		if arriving, err = a.arrivingHere(ctx, in); err != nil {
			return false, err
		}
	}
	ops := more
	if back {
		log.Info("server evacuated from this host is back on it; only ending the old evacuation")
	} else {
		if arriving {
			// Moving back here (arriving.go): the guest is the move's,
			// and so is the instance info it writes when done.
			log.Info("server evacuated from this host is moving back to it; leaving its guest to the move")
		} else if runs {
			log.Warn("destroying the local copy of a server evacuated from this host")
			if err := a.driver.Destroy(context.WithoutCancel(ctx), uuid); err != nil {
				return false, fmt.Errorf("agent %s: destroy evacuated %s: %w", a.cfg.Host, uuid, err)
			}
		}
		ops = append(ops, clientv3.OpDelete(a.keys.HostInstance(a.cfg.Host, uuid)))
	}
	if m.Status == etcdschema.MigrationDone {
		if err := a.placement.DeleteAllocations(ctx, m.UUID); err != nil && !errors.Is(err, placement.ErrNotFound) {
			return false, fmt.Errorf("agent %s: free the source allocation of evacuated %s: %w", a.cfg.Host, uuid, err)
		}
		done := *m
		done.Status, done.UpdatedAt = etcdschema.MigrationCompleted, time.Now().UTC()
		mkey := a.keys.Migration(m.Cell, m.UUID)
		ops = append(ops, clientv3.OpTxn(
			[]clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(mkey), "=", rev)},
			[]clientv3.Op{clientv3.OpPut(mkey, etcdschema.MustEncode(&done)),
				clientv3.OpDelete(a.keys.MigrationMapping(m.UUID))}, nil))
	}
	if _, err := a.cli.Txn(ctx).Then(ops...).Commit(); err != nil {
		return false, fmt.Errorf("agent %s: record evacuated %s cleaned up: %w", a.cfg.Host, uuid, err)
	}
	log.Info("evacuated server cleaned up on its old host")
	return !back && !arriving, nil
}

// evacuateCleanup works the cleanup cast the cell conductor sends a
// source whose agent is running when its server's evacuation is done (a
// host forced down with its agent alive): the same clean-up as at start,
// and the cast ended with it.
func (a *Agent) evacuateCleanup(ctx context.Context, ev informer.Event, b *etcdschema.Build, rd *moveRead) error {
	endCast := clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(ev.Key), "=", ev.Revision)},
		[]clientv3.Op{clientv3.OpDelete(ev.Key)}, nil)
	_, err := a.cleanEvacuation(ctx, rd.mig, rd.mgRev, true, []clientv3.Op{endCast})
	return err
}

// cleanEvacuated is destroyEvacuated outside the start-up reconcile:
// when the host's liveness lease was granted again after it was lost
// (the host read down meanwhile and may have been evacuated), and right
// after the start-up goUp (handled: what the reconcile worked).
//
// The second closes the start's window: from the reconcile's clean-up
// to goUp the host still reads down, so an operator can evacuate one of
// its servers then. Without it the copy here would run on, the server
// twice (here and rebuilt on its destination), until the evacuation is
// done and the cell conductor's clean-up cast reaches this host: the
// copy of an evacuation accepted before the host is up goes before the
// host works casts, as at start (Nova's init_host destroys accepted and
// pre-migrating evacuations' guests, and its service joins its group,
// reading up, only after; an evacuation accepted in between is left
// running there until the next start). Once goUp has committed no
// evacuation from this host can be accepted (the API compares the alive
// key's absence and the service record's revision when it writes one),
// so one read of the evacuations after it sees every one the window let
// through.
func (a *Agent) cleanEvacuated(ctx context.Context, handled map[string]int64) {
	running, err := a.driver.List(ctx)
	if err == nil {
		_, err = a.destroyEvacuated(ctx, running, handled)
	}
	if err != nil && ctx.Err() == nil {
		a.log.Error("could not clean up servers evacuated while this host was down", "error", err)
	}
}
