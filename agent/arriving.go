package agent

import (
	"context"
	"fmt"

	"github.com/berth-project/berth/etcdschema"
)

// A move's destination may run its server's guest before etcd places
// the server there: a live migration's live_start starts the guest on
// the destination and casts live_out to the source, and the instance
// record names the destination only when live_out completes. An agent
// that restarts in between (or whose lease is granted again, or that
// works an old evacuation's clean-up) finds a guest etcd places
// elsewhere, with no cast here. It is not an orphan: the move settles
// it (live_out completes onto it; live_rollback, cast here, destroys
// it), so the agent leaves it alone. The cold moves and the other kinds
// start their guest inside a step whose cast stays here until the
// transaction that moves the server (and reconcile leaves a guest with a
// cast to that cast), but the same rule covers them. What tells such a
// guest from a stale one is the server's own record: it names a
// migration (its move in flight) whose record is in flight with this
// host as destination. A stale copy fails that: a server evacuated or
// moved away (it names no migration, or one to elsewhere), a migration
// in a final state (failed, reverted, completed, done), a server
// deleted.

// arrivingHere says whether in is moving to this host: its migration
// is in flight with this host as destination.
func (a *Agent) arrivingHere(ctx context.Context, in *etcdschema.Instance) (bool, error) {
	if in == nil || in.MigrationUUID == "" || in.Host == a.cfg.Host {
		return false, nil
	}
	key := a.keys.Migration(in.Cell, in.MigrationUUID)
	resp, err := a.cli.Get(ctx, key)
	if err != nil {
		return false, fmt.Errorf("agent %s: read migration %s of %s: %w", a.cfg.Host, in.MigrationUUID, in.UUID, err)
	}
	if len(resp.Kvs) == 0 {
		return false, nil
	}
	var m etcdschema.Migration
	if err := etcdschema.Decode(key, resp.Kvs[0].Value, &m); err != nil {
		return false, err
	}
	return m.InstanceUUID == in.UUID && m.DestHost == a.cfg.Host && etcdschema.MigrationInFlight(m.Status), nil
}

// arrivingGuests reads which of uuids (guests the driver runs that etcd
// does not place here) belong to servers moving to this host.
func (a *Agent) arrivingGuests(ctx context.Context, uuids []string) (map[string]bool, error) {
	if len(uuids) == 0 {
		return nil, nil
	}
	recs, err := a.instanceRecords(ctx, uuids, false)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for u, hi := range recs {
		ok, err := a.arrivingHere(ctx, &hi.inst)
		if err != nil {
			return nil, err
		}
		if ok {
			out[u] = true
		}
	}
	return out, nil
}
