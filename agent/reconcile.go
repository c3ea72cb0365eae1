package agent

import (
	"context"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
)

// hostInstance is an instance record etcd places on this host.
type hostInstance struct {
	inst etcdschema.Instance
	rev  int64
}

// instancesOnHost reads the instance records of this host. With
// track_instance_changes the host's instance info keys index them (one
// read per instance, not per cell); without it the cell is listed.
func (a *Agent) instancesOnHost(ctx context.Context) (map[string]hostInstance, error) {
	var uuids []string
	if a.cfg.TrackInstanceChanges {
		var err error
		if uuids, err = a.infoUUIDs(ctx); err != nil {
			return nil, err
		}
	}
	return a.instancesOf(ctx, uuids)
}

// instancesOf is instancesOnHost with the host's instance info uuids
// already read (providerTick's one read): with track_instance_changes
// only their records are read; without it the cell is listed.
func (a *Agent) instancesOf(ctx context.Context, uuids []string) (map[string]hostInstance, error) {
	if a.cfg.TrackInstanceChanges {
		return a.instanceRecords(ctx, uuids, true)
	}
	out := map[string]hostInstance{}
	resp, err := a.cli.Get(ctx, a.keys.CellInstances(a.cfg.Cell), clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("list instances of cell %s: %w", a.cfg.Cell, err)
	}
	for _, kv := range resp.Kvs {
		a.addInstance(out, string(kv.Key), kv.Value, kv.ModRevision, true)
	}
	return out, nil
}

// infoUUIDs lists the instances this host's instance info keys name
// (opts: the instance sync's clientv3.WithSerializable).
func (a *Agent) infoUUIDs(ctx context.Context, opts ...clientv3.OpOption) ([]string, error) {
	resp, err := a.cli.Get(ctx, a.own.instances, append(opts, clientv3.WithPrefix(), clientv3.WithKeysOnly())...)
	if err != nil {
		return nil, fmt.Errorf("list instance info of %s: %w", a.cfg.Host, err)
	}
	return a.infoUUIDsOf(resp.Kvs), nil
}

// infoUUIDsOf are the instance uuids this host's instance info keys kvs
// name.
func (a *Agent) infoUUIDsOf(kvs []*mvccpb.KeyValue) []string {
	uuids := make([]string, 0, len(kvs))
	for _, kv := range kvs {
		if u, ok := etcdschema.LastSegment(string(kv.Key), a.own.instances); ok {
			uuids = append(uuids, u)
		}
	}
	return uuids
}

// instanceRecords reads the cell's records of uuids, 64 a transaction;
// onlyHere keeps only those that place the instance on this host.
func (a *Agent) instanceRecords(ctx context.Context, uuids []string, onlyHere bool) (map[string]hostInstance, error) {
	out := map[string]hostInstance{}
	for start := 0; start < len(uuids); start += 64 {
		var ops []clientv3.Op
		for _, u := range uuids[start:min(start+64, len(uuids))] {
			ops = append(ops, clientv3.OpGet(a.keys.CellInstance(a.cfg.Cell, u)))
		}
		resp, err := a.cli.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			return nil, fmt.Errorf("read instances of %s: %w", a.cfg.Host, err)
		}
		for _, r := range resp.Responses {
			for _, kv := range r.GetResponseRange().Kvs {
				a.addInstance(out, string(kv.Key), kv.Value, kv.ModRevision, onlyHere)
			}
		}
	}
	return out, nil
}

func (a *Agent) addInstance(out map[string]hostInstance, key string, val []byte, rev int64, onlyHere bool) {
	var in etcdschema.Instance
	if err := etcdschema.Decode(key, val, &in); err != nil {
		a.log.Warn("skipping unreadable instance", "key", key, "error", err)
		return
	}
	if !onlyHere || in.Host == a.cfg.Host {
		out[in.UUID] = hostInstance{inst: in, rev: rev}
	}
}

// reconcile runs once at start, before any cast is worked: it compares
// what etcd says this host runs with what the driver runs (Nova's
// init_host). A process the driver runs that etcd does not place here is
// an orphan and is destroyed, unless its server is moving here (its
// migration in flight names this host as destination: arriving.go). An
// ACTIVE instance the driver lost is brought back by a GuestResumer driver, or else put in ERROR with the
// reason, keeping its allocation until the user deletes it, as Nova keeps
// an errored instance's resources. Instances with a pending cast are left
// to that cast, and so are those whose move is in flight: a cold move's
// source stops its guest before the destination starts one, so between
// the two the server is ACTIVE here, with no cast here, and runs nowhere
// (resuming it would run it twice, setting ERROR would break the move).
//
// The evacuations it cleans up after are recorded in handled (see
// destroyEvacuated).
func (a *Agent) reconcile(ctx context.Context, handled map[string]int64) error {
	running, err := a.driver.List(ctx)
	if err != nil {
		return fmt.Errorf("agent %s: list driver instances: %w", a.cfg.Host, err)
	}
	// Servers evacuated while this host was down first: their copies
	// here go, and the checks below must not take them for lost.
	evacuated, err := a.destroyEvacuated(ctx, running, handled)
	if err != nil {
		return err
	}
	onHost, err := a.instancesOnHost(ctx)
	if err != nil {
		return err
	}
	castResp, err := a.cli.Get(ctx, a.own.builds, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return fmt.Errorf("agent %s: list casts: %w", a.cfg.Host, err)
	}
	casts := map[string]bool{}
	for _, kv := range castResp.Kvs {
		if u, ok := etcdschema.LastSegment(string(kv.Key), a.own.builds); ok {
			casts[u] = true
		}
	}
	runs := map[string]bool{}
	var unplaced []string
	for _, u := range running {
		if evacuated[u] {
			continue
		}
		runs[u] = true
		if _, known := onHost[u]; !known && !casts[u] {
			unplaced = append(unplaced, u)
		}
	}
	// A server moving here runs its guest here before etcd places it
	// here (arriving.go): its move, not this reconcile, settles it.
	arriving, err := a.arrivingGuests(ctx, unplaced)
	if err != nil {
		return err
	}
	for _, u := range unplaced {
		if arriving[u] {
			a.log.Info("reconcile: leaving the guest of a server moving to this host to its move", "instance", u)
			continue
		}
		a.log.Warn("reconcile: destroying an instance etcd does not place on this host", "instance", u)
		if err := a.driver.Destroy(ctx, u); err != nil {
			return fmt.Errorf("agent %s: destroy orphan %s: %w", a.cfg.Host, u, err)
		}
	}
	resumer, resumes := a.driver.(GuestResumer)
	var resumed, errored int
	for u, hi := range onHost {
		if runs[u] || casts[u] || evacuated[u] || hi.inst.Status != etcdschema.StatusActive || movingAway(&hi.inst) {
			continue
		}
		reason := fmt.Sprintf("instance was not running on %s when its agent started", a.cfg.Host)
		if resumes {
			b := buildFromInstance(&hi.inst)
			if err := resumer.Resume(ctx, b); err == nil {
				a.log.Info("reconcile: resumed an instance the driver lost", "instance", u)
				resumed++
				continue
			} else {
				reason = fmt.Sprintf("%s, and resuming it failed: %v", reason, err)
			}
		}
		ok, err := a.setError(ctx, hi.inst, hi.rev, reason)
		if err != nil {
			return err
		}
		if ok {
			a.log.Warn("reconcile: instance lost by the driver set to ERROR", "instance", u, "reason", reason)
			errored++
		}
	}
	a.log.Info("reconciled with the driver", "driver_instances", len(running), "etcd_instances", len(onHost),
		"resumed", resumed, "errored", errored)
	return nil
}

// movingAway says whether in has a move in flight: its steps are cast
// to whichever host works them, and its record names the source until
// the destination finishes.
func movingAway(in *etcdschema.Instance) bool {
	return in.MigrationUUID != "" && in.TaskState != ""
}

// buildFromInstance rebuilds the cast a resumed instance was built from.
func buildFromInstance(in *etcdschema.Instance) *etcdschema.Build {
	return &etcdschema.Build{Op: etcdschema.OpBuild, InstanceUUID: in.UUID, Name: in.Name, Cell: in.Cell,
		Flavor: in.Flavor, ProjectID: in.ProjectID, UserID: in.UserID, Attempt: in.Attempts,
		CastAt: time.Now().UTC(), Image: in.Image}
}

// setError puts an instance in ERROR with reason if its record is still
// the one read at rev.
func (a *Agent) setError(ctx context.Context, in etcdschema.Instance, rev int64, reason string) (bool, error) {
	key := a.keys.CellInstance(in.Cell, in.UUID)
	now := time.Now().UTC()
	in.Status, in.TaskState, in.UpdatedAt = etcdschema.StatusError, "", now
	in.Fault = &etcdschema.Fault{Code: 500, Message: reason, Created: now}
	resp, err := a.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).
		Then(clientv3.OpPut(key, etcdschema.MustEncode(&in))).Commit()
	if err != nil {
		return false, fmt.Errorf("set %s ERROR: %w", in.UUID, err)
	}
	return resp.Succeeded, nil
}

// instanceExited is told by an ExitNotifier driver that an instance
// stopped on its own: the instance goes to ERROR with the reason (the exit
// status). An exit during the build's final transaction is retried until
// the build has recorded ACTIVE; a delete in progress wins.
func (a *Agent) instanceExited(ctx context.Context, uuid, reason string) {
	log := a.log.With("instance", uuid)
	key := a.keys.CellInstance(a.cfg.Cell, uuid)
	deadline := time.Now().Add(time.Minute)
	for ctx.Err() == nil && time.Now().Before(deadline) {
		in, rev, err := a.readInstance(ctx, key)
		switch {
		case err != nil:
			log.Warn("instance exited; could not read it, retrying", "error", err)
		case in == nil || in.Host != a.cfg.Host || in.TaskState == etcdschema.TaskDeleting ||
			movingAway(in):
			return // deleted, moved, being deleted or moved: the exit is expected
		case in.Status == etcdschema.StatusActive:
			ok, err := a.setError(ctx, *in, rev, reason)
			if err == nil && ok {
				log.Warn("instance exited unexpectedly, set to ERROR", "reason", reason)
				return
			}
			if err != nil {
				log.Warn("instance exited; could not record it, retrying", "error", err)
			}
		case in.Status == etcdschema.StatusBuild:
			// Spawn returned and the build's final transaction is on its
			// way; record the exit after it.
		default:
			return // already ERROR
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
	if ctx.Err() == nil {
		log.Error("instance exited but could not be set to ERROR", "reason", reason)
	}
}

// watchExits connects an ExitNotifier driver to instanceExited.
func (a *Agent) watchExits(ctx context.Context) {
	n, ok := a.driver.(ExitNotifier)
	if !ok {
		return
	}
	n.NotifyExit(func(uuid, reason string) { go a.instanceExited(ctx, uuid, reason) })
}
