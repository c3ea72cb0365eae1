package servers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/etcdschema/records"
	"github.com/berth-project/berth/quotas"
)

// The cold moves' API side (nova/compute/api.py resize, confirm_resize,
// revert_resize): each checks the server's state, then writes in one
// transaction guarded by the instance's revision. A resize or migrate
// creates the Migration (pre-migrating) and the MoveRequest the
// superconductors schedule; confirm and revert cast the next step to the
// host that works it. The rest of the flow is the superconductor's and
// the agents' (docs/flows.md, "Resize and cold migration").

// StateError is an action refused because of the server's state, as
// Nova's InstanceInvalidState (409 "Cannot 'resize' instance X while it
// is in vm_state building").
type StateError struct {
	Action, ID string
	// Attr is "vm_state" or "task_state", State its value (Nova's).
	Attr, State string
}

func (e *StateError) Error() string {
	return fmt.Sprintf("Cannot '%s' instance %s while it is in %s %s", e.Action, e.ID, e.Attr, e.State)
}

// Errors of the move operations, each one of Nova's (its API words it
// as Nova does).
var (
	// ErrSameFlavor is Nova's CannotResizeToSameFlavor.
	ErrSameFlavor = errors.New("a resize needs a flavor other than the server's")
	// ErrSameHost is Nova's CannotMigrateToSameHost.
	ErrSameHost = errors.New("the requested host is the server's own")
	// ErrZeroDisk is Nova's CannotResizeDisk for a flavor without a root
	// disk while the server has one.
	ErrZeroDisk = errors.New("the new flavor has no root disk while the server has one")
)

// NoMigrationError is Nova's MigrationNotFoundByStatus: the server has
// no migration in the status the action needs.
type NoMigrationError struct{ ID, Status string }

func (e *NoMigrationError) Error() string {
	return fmt.Sprintf("Migration not found for instance %s with status %s.", e.ID, e.Status)
}

// Nova's vm_state of a Berth instance, for StateError.
func vmStateOf(in *etcdschema.Instance) string {
	switch in.Status {
	case etcdschema.StatusActive:
		return "active"
	case etcdschema.StatusVerifyResize:
		return "resized"
	case etcdschema.StatusError:
		return "error"
	case etcdschema.StatusDeleted:
		return "deleted"
	case etcdschema.StatusShelved:
		return "shelved"
	case etcdschema.StatusShelvedOffloaded:
		return "shelved_offloaded"
	}
	return "building"
}

// MoveRequest is a resize (NewFlavor set) or a cold migration (nil: the
// server's own flavor, to another host), checked by its API.
type MoveRequest struct {
	NewFlavor *etcdschema.Flavor
	// Host is the destination a migrate asked for (2.56), "" for any.
	Host string
	// AllowSameHost is allow_resize_to_same_host (resizes only; Nova
	// never migrates to the same host with a libvirt-like driver).
	AllowSameHost bool
	RequestID     string
}

// Move starts a resize or cold migration of server id and returns the
// migration it created: Nova's check_instance_state(vm_state=[ACTIVE],
// task_state=[None]), then task_state resize_prep, the Migration in the
// instance's cell and the MoveRequest, in one transaction.
func (s *Store) Move(ctx context.Context, id string, r MoveRequest) (*etcdschema.Migration, error) {
	action := "migrate"
	if r.NewFlavor != nil {
		action = "resize"
	}
	v, err := s.Lookup(ctx, id)
	if err != nil {
		return nil, err
	}
	if v.Instance == nil {
		return nil, &StateError{Action: action, ID: id, Attr: "vm_state", State: "building"}
	}
	in := *v.Instance
	if err := movable(action, &in, etcdschema.StatusActive); err != nil {
		return nil, err
	}
	newFlavor := in.Flavor
	mtype := etcdschema.MigrationTypeMigration
	if r.NewFlavor != nil {
		if r.NewFlavor.ID == in.Flavor.ID {
			return nil, ErrSameFlavor
		}
		if in.Flavor.DiskGB > 0 && r.NewFlavor.DiskGB == 0 {
			return nil, ErrZeroDisk
		}
		newFlavor, mtype = r.NewFlavor.Embedded(), etcdschema.MigrationTypeResize
	}
	if r.Host != "" {
		if r.Host == in.Host {
			return nil, ErrSameHost
		}
		if err := s.CheckRequestedHost(ctx, r.Host, ""); err != nil {
			return nil, err
		}
	}
	now := time.Now().UTC()
	node := in.Node
	if node == "" {
		node = in.Host
	}
	mig := &etcdschema.Migration{UUID: uuid.NewString(), InstanceUUID: id, Cell: in.Cell,
		ProjectID: in.ProjectID, UserID: in.UserID, MigrationType: mtype, Status: etcdschema.MigrationPreMigrating,
		SourceHost: in.Host, SourceNode: node, OldFlavor: in.Flavor, NewFlavor: newFlavor,
		RequestedHost: r.Host, AllowSameHost: r.AllowSameHost && r.NewFlavor != nil,
		RequestID: r.RequestID, CreatedAt: now, UpdatedAt: now}
	req := &etcdschema.MoveRequest{InstanceUUID: id, Cell: in.Cell, MigrationUUID: mig.UUID,
		RequestID: r.RequestID, CreatedAt: now}
	in.TaskState, in.MigrationUUID, in.UpdatedAt = etcdschema.TaskResizePrep, mig.UUID, now
	k := s.keys
	ikey := k.CellInstance(in.Cell, id)
	moveOps := []clientv3.Op{clientv3.OpPut(ikey, etcdschema.MustEncode(&in)),
		clientv3.OpPut(k.Migration(in.Cell, mig.UUID), etcdschema.MustEncode(mig)),
		clientv3.OpPut(k.MoveRequest(id), etcdschema.MustEncode(req)),
		clientv3.OpPut(k.MigrationMapping(mig.UUID), etcdschema.MustEncode(&etcdschema.InstanceMapping{
			InstanceUUID: id, Cell: in.Cell, ProjectID: in.ProjectID, CreatedAt: now}))}
	if in.Group != "" {
		// The server keeps its group place on the source until the move
		// is confirmed (its destinations' claims add theirs).
		moveOps = append(moveOps, records.GroupMemberMoving(k, in.Group, id, in.Host))
	}
	// An upsize is checked against the project's (and user's) cores and
	// ram as Nova's _check_quota_for_upsize does, and committed under the
	// quota fence as creates are, so a resize and a create (or two
	// resizes) checked against the same count cannot both go in.
	// While in flight the move holds the new flavor beside the old one
	// (a count adds it), which the project's usage record must cover.
	upsize := quotas.MoveRequest{Project: in.ProjectID, User: in.UserID, RequestID: r.RequestID,
		Cores: max(0, int64(newFlavor.VCPUs-in.Flavor.VCPUs)), RAMMB: max(0, int64(newFlavor.RAMMB-in.Flavor.RAMMB)),
		HeldCores: int64(newFlavor.VCPUs), HeldRAMMB: int64(newFlavor.RAMMB)}
	for try := 0; ; try++ {
		var guard quotas.Guard
		if s.quotas != nil {
			if guard, err = s.quotas.ReserveMove(ctx, upsize); err != nil {
				return nil, err
			}
		}
		resp, err := s.cli.Txn(ctx).If(append([]clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(ikey), "=", v.Rev),
			clientv3.Compare(clientv3.CreateRevision(k.MoveRequest(id)), "=", 0)}, guard.Cmps...)...).
			Then(append(slices.Clip(moveOps), guard.Ops...)...).
			Else(clientv3.OpGet(k.MoveRequest(id), clientv3.WithCountOnly())).Commit()
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", action, id, err)
		}
		if resp.Succeeded {
			break
		}
		// Only the quota fence moving (another create or resize in the
		// project) is worth counting again; the server's own change is
		// the caller's to see.
		if len(guard.Cmps) == 0 || resp.Responses[0].GetResponseRange().Count > 0 || try >= maxQuotaTries ||
			s.instanceChanged(ctx, ikey, v.Rev) {
			return nil, fmt.Errorf("%s %s: %w", action, id, ErrKeptChanging)
		}
	}
	s.log.Info("move accepted", "action", action, "instance", id, "migration", mig.UUID,
		"flavor", newFlavor.Name, "host", r.Host, "request_id", r.RequestID)
	return mig, nil
}

// movable is check_instance_state: the server must be in status with no
// task and no move in flight.
func movable(action string, in *etcdschema.Instance, status string) error {
	if in.Status != status {
		return &StateError{Action: action, ID: in.UUID, Attr: "vm_state", State: vmStateOf(in)}
	}
	if in.TaskState != "" {
		return &StateError{Action: action, ID: in.UUID, Attr: "task_state", State: in.TaskState}
	}
	if in.Host == "" {
		return &StateError{Action: action, ID: in.UUID, Attr: "vm_state", State: vmStateOf(in)}
	}
	return nil
}

// ConfirmResize is compute.API.confirm_resize: the server must be
// VERIFY_RESIZE with its migration finished; the migration goes
// confirming and the source host's agent is cast the confirm, which
// drops the stopped guest, frees the source's allocation (the
// migration's consumer) and makes the server ACTIVE.
func (s *Store) ConfirmResize(ctx context.Context, id, requestID string) error {
	return s.finishMove(ctx, id, requestID, "confirmResize", etcdschema.MigrationConfirming, "")
}

// AutoConfirmResize is ConfirmResize done by the system once Nova's
// resize_confirm_window is over (the compute manager's
// _poll_unconfirmed_resizes): it confirms only migration, which must
// still be the server's (a later move is not the one whose window ran
// out), and marks it AutoConfirmed.
func (s *Store) AutoConfirmResize(ctx context.Context, id, migration, requestID string) error {
	return s.finishMove(ctx, id, requestID, "confirmResize", etcdschema.MigrationConfirming, migration)
}

// RevertResize is compute.API.revert_resize: the migration goes
// reverting, the server REVERT_RESIZE, and the destination's agent is
// cast the revert: it destroys the new guest, then the source's agent
// gives the instance its source allocation back and starts it there.
func (s *Store) RevertResize(ctx context.Context, id, requestID string) error {
	return s.finishMove(ctx, id, requestID, "revertResize", etcdschema.MigrationReverting, "")
}

// finishMove starts a confirm or revert; onlyMigration, when set, is the
// migration an automatic confirm was meant for.
func (s *Store) finishMove(ctx context.Context, id, requestID, action, status, onlyMigration string) error {
	k := s.keys
	v, err := s.Lookup(ctx, id)
	if err != nil {
		return err
	}
	if v.Instance == nil {
		return &StateError{Action: action, ID: id, Attr: "vm_state", State: "building"}
	}
	in := *v.Instance
	if err := movable(action, &in, etcdschema.StatusVerifyResize); err != nil {
		return err
	}
	if onlyMigration != "" && in.MigrationUUID != onlyMigration {
		return &NoMigrationError{ID: id, Status: etcdschema.MigrationFinished}
	}
	mkey := k.Migration(in.Cell, in.MigrationUUID)
	mig, mrev, err := s.readMigration(ctx, mkey)
	if err != nil {
		return err
	}
	if mig == nil || mig.Status != etcdschema.MigrationFinished {
		return &NoMigrationError{ID: id, Status: etcdschema.MigrationFinished}
	}
	now := time.Now().UTC()
	mig.Status, mig.UpdatedAt = status, now
	host, step := mig.SourceHost, etcdschema.MoveConfirm
	if status == etcdschema.MigrationReverting {
		mig.RevertRequestID, mig.RevertedAt = requestID, &now
		host, step = mig.DestHost, etcdschema.MoveRevert
		in.TaskState = etcdschema.TaskResizeReverting
	} else {
		mig.ConfirmRequestID, mig.ConfirmedAt = requestID, &now
		mig.AutoConfirmed = onlyMigration != ""
	}
	in.UpdatedAt = now
	cast := records.MoveCast(&in, mig, step, requestID, now)
	ikey := k.CellInstance(in.Cell, id)
	ops := []clientv3.Op{clientv3.OpPut(ikey, etcdschema.MustEncode(&in)),
		clientv3.OpPut(mkey, etcdschema.MustEncode(mig)),
		clientv3.OpPut(k.Build(host, id), etcdschema.MustEncode(cast))}
	// Nova's revert_resize checks the way back as an upsize ("If this is
	// a resize down, a revert might go over quota"): the old flavor's
	// cores and ram beyond the new one's, under the quota fence.
	var back quotas.MoveRequest
	if status == etcdschema.MigrationReverting {
		back = quotas.MoveRequest{Project: in.ProjectID, User: in.UserID, RequestID: requestID,
			Cores: max(0, int64(mig.OldFlavor.VCPUs-mig.NewFlavor.VCPUs)), RAMMB: max(0, int64(mig.OldFlavor.RAMMB-mig.NewFlavor.RAMMB))}
		if in.Group != "" {
			// The server's group place goes back to the source with it
			// (the move's claim put it on the destination).
			ops = append(ops, records.GroupMemberOn(k, in.Group, id, mig.SourceHost))
		}
	}
	for try := 0; ; try++ {
		var guard quotas.Guard
		if s.quotas != nil {
			if guard, err = s.quotas.ReserveMove(ctx, back); err != nil {
				return err
			}
		}
		resp, err := s.cli.Txn(ctx).If(append([]clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(ikey), "=", v.Rev),
			clientv3.Compare(clientv3.ModRevision(mkey), "=", mrev)}, guard.Cmps...)...).
			Then(append(slices.Clip(ops), guard.Ops...)...).Commit()
		if err != nil {
			return fmt.Errorf("%s %s: %w", action, id, err)
		}
		if resp.Succeeded {
			break
		}
		if len(guard.Cmps) == 0 || try >= maxQuotaTries || s.instanceChanged(ctx, ikey, v.Rev) ||
			s.instanceChanged(ctx, mkey, mrev) {
			return fmt.Errorf("%s %s: %w", action, id, ErrKeptChanging)
		}
	}
	s.log.Info("move "+status, "instance", id, "migration", mig.UUID, "host", host, "request_id", requestID)
	return nil
}

// instanceChanged reports whether the record at key is no longer at
// revision rev (an error reading it counts as changed).
func (s *Store) instanceChanged(ctx context.Context, key string, rev int64) bool {
	resp, err := s.cli.Get(ctx, key, clientv3.WithKeysOnly())
	return err != nil || len(resp.Kvs) == 0 || resp.Kvs[0].ModRevision != rev
}

func (s *Store) readMigration(ctx context.Context, key string) (*etcdschema.Migration, int64, error) {
	resp, err := s.cli.Get(ctx, key)
	if err != nil {
		return nil, 0, fmt.Errorf("read %s: %w", key, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, 0, nil
	}
	var m etcdschema.Migration
	if err := etcdschema.Decode(key, resp.Kvs[0].Value, &m); err != nil {
		return nil, 0, err
	}
	return &m, resp.Kvs[0].ModRevision, nil
}

// MigrationRecord is a migration with its Nova integer id (the create
// revision of its key).
type MigrationRecord struct {
	etcdschema.Migration
	ID int64
}

// Migrations reads every cell's migrations at one revision.
func (s *Store) Migrations(ctx context.Context) ([]MigrationRecord, error) {
	resp, err := s.cli.Get(ctx, s.keys.CellsPrefix(), clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("list migrations: %w", err)
	}
	var out []MigrationRecord
	for _, kv := range resp.Kvs {
		p, err := s.keys.ParseKey(string(kv.Key))
		if err != nil || p.Kind != etcdschema.KindMigration {
			continue
		}
		var m etcdschema.Migration
		if err := etcdschema.Decode(string(kv.Key), kv.Value, &m); err != nil {
			s.log.Warn("skipping unreadable migration", "key", string(kv.Key), "error", err)
			continue
		}
		out = append(out, MigrationRecord{Migration: m, ID: kv.CreateRevision})
	}
	return out, nil
}

// InstanceMigrations reads the migrations of server id in cell, oldest
// first.
func (s *Store) InstanceMigrations(ctx context.Context, cell, id string) ([]MigrationRecord, error) {
	if cell == "" {
		return nil, nil
	}
	resp, err := s.cli.Get(ctx, s.keys.Migrations(cell), clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("list migrations of %s: %w", id, err)
	}
	var out []MigrationRecord
	for _, kv := range resp.Kvs {
		var m etcdschema.Migration
		if err := etcdschema.Decode(string(kv.Key), kv.Value, &m); err != nil {
			s.log.Warn("skipping unreadable migration", "key", string(kv.Key), "error", err)
			continue
		}
		if m.InstanceUUID == id {
			out = append(out, MigrationRecord{Migration: m, ID: kv.CreateRevision})
		}
	}
	slices.SortFunc(out, func(x, y MigrationRecord) int { return int(x.ID - y.ID) })
	return out, nil
}
