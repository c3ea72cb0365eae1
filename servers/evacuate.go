package servers

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/quotas"
)

// Evacuate's API side (nova/compute/api.py evacuate): the server must be
// ACTIVE or ERROR with no task, and its host's compute service down (its
// liveness lease gone) or forced down; then, in one transaction guarded
// by the instance and by the source service's state as read, the
// server's task goes rebuilding and the Migration (type evacuation,
// status accepted: Nova's tombstone the source's agent finds when it
// comes back) and the MoveRequest the superconductors schedule are
// written. The rest is conductor/evacuate.go and agent/evacuate*.go.

// ServiceInUseError is Nova's ComputeServiceInUse: the server's host is
// up, so evacuating it could run the server twice.
type ServiceInUseError struct{ Host string }

func (e *ServiceInUseError) Error() string {
	return fmt.Sprintf("Compute service of %s is still in use.", e.Host)
}

// ErrEvacuateSameHost is evacuate's "The target host can't be the same
// one."
var ErrEvacuateSameHost = errors.New("the requested host is the server's own")

// MoveInFlightError refuses to evacuate a server whose earlier move is
// still in flight: its allocations are that move's to settle first.
// Nova has no such case (it evacuates and leaves the old migration's
// allocations behind). A move that ended in error but is still named
// (an ERROR left by a failed resize finish) is settled by the
// evacuation instead (ended_move.go). ResetState refuses a move in
// flight with it too (Action "resetState"; "" is evacuate).
type MoveInFlightError struct{ Action, ID, Migration string }

func (e *MoveInFlightError) Error() string {
	action := e.Action
	if action == "" {
		action = "evacuate"
	}
	return fmt.Sprintf("Cannot '%s' instance %s while its migration %s is in progress", action, e.ID, e.Migration)
}

// EvacuateRequest is a checked evacuate: Host is the destination asked
// for ("" for any), Force skips the scheduler's filters (2.29-2.67).
type EvacuateRequest struct {
	Host      string
	Force     bool
	RequestID string
}

// evacuableStatus is evacuate's check_instance_state vm_state list
// (Berth has no STOPPED).
func evacuable(in *etcdschema.Instance) error {
	if in.Status != etcdschema.StatusActive && in.Status != etcdschema.StatusError {
		return &StateError{Action: "evacuate", ID: in.UUID, Attr: "vm_state", State: vmStateOf(in)}
	}
	if in.TaskState != "" {
		return &StateError{Action: "evacuate", ID: in.UUID, Attr: "task_state", State: in.TaskState}
	}
	return nil
}

// Evacuate starts the evacuation of server id and returns its migration.
func (s *Store) Evacuate(ctx context.Context, id string, r EvacuateRequest) (*etcdschema.Migration, error) {
	v, err := s.Lookup(ctx, id)
	if err != nil {
		return nil, err
	}
	if v.Instance == nil {
		return nil, &StateError{Action: "evacuate", ID: id, Attr: "vm_state", State: "building"}
	}
	in := *v.Instance
	if r.Host != "" {
		if r.Host == in.Host {
			return nil, ErrEvacuateSameHost
		}
		if err := s.CheckRequestedHost(ctx, r.Host, ""); err != nil {
			return nil, err
		}
	}
	// Nova checks the vm_state first (check_instance_state, any task),
	// then that the source is down, and the task only when it saves the
	// instance: a server migrating off a host that is up is refused as
	// ComputeServiceInUse, as nova_live.json recorded.
	if in.Status != etcdschema.StatusActive && in.Status != etcdschema.StatusError {
		return nil, &StateError{Action: "evacuate", ID: in.UUID, Attr: "vm_state", State: vmStateOf(&in)}
	}
	if in.Host == "" {
		// Never built: Nova's Service.get_by_compute_host(None).
		return nil, &HostError{Host: "None"}
	}
	k := s.keys
	src, err := s.cli.Txn(ctx).Then(clientv3.OpGet(k.Service(in.Host)), clientv3.OpGet(k.Alive(in.Host))).Commit()
	if err != nil {
		return nil, fmt.Errorf("read the service of %s: %w", in.Host, err)
	}
	svcKVs, aliveKVs := src.Responses[0].GetResponseRange().Kvs, src.Responses[1].GetResponseRange().Kvs
	if len(svcKVs) == 0 {
		return nil, &HostError{Host: in.Host}
	}
	var svc etcdschema.Service
	if err := etcdschema.Decode(k.Service(in.Host), svcKVs[0].Value, &svc); err != nil {
		return nil, err
	}
	if len(aliveKVs) > 0 && !svc.ForcedDown {
		return nil, &ServiceInUseError{Host: in.Host}
	}
	// A move in flight (or one ended in error, to settle) only after the
	// source reads down, as Nova checks the task only when it saves.
	ended, err := s.readNamedMove(ctx, "evacuate", &in)
	if err != nil {
		return nil, err
	}
	if err := evacuable(&in); err != nil {
		return nil, err
	}
	// The source must still read down when the evacuation is written: a
	// host that came back (or was un-forced) meanwhile runs the server.
	aliveRev := int64(0)
	if len(aliveKVs) > 0 {
		aliveRev = aliveKVs[0].CreateRevision
	}
	sourceDown := []clientv3.Cmp{
		clientv3.Compare(clientv3.CreateRevision(k.Alive(in.Host)), "=", aliveRev),
		clientv3.Compare(clientv3.ModRevision(k.Service(in.Host)), "=", svcKVs[0].ModRevision),
	}

	// Only now that the evacuation will be written: the ended move's
	// hold on its source, which the server's new migration would
	// otherwise leave behind.
	endedCmps, endedOps, err := ended.settle(ctx, s, "evacuate", &in)
	if err != nil {
		return nil, err
	}
	now := time.Now().UTC()
	node := in.Node
	if node == "" {
		node = in.Host
	}
	mig := &etcdschema.Migration{UUID: uuid.NewString(), InstanceUUID: id, Cell: in.Cell,
		ProjectID: in.ProjectID, UserID: in.UserID, MigrationType: etcdschema.MigrationTypeEvacuation,
		Status: etcdschema.MigrationAccepted, SourceHost: in.Host, SourceNode: node,
		OldFlavor: in.Flavor, NewFlavor: in.Flavor, RequestedHost: r.Host, ForceHost: r.Force && r.Host != "",
		RequestID: r.RequestID, CreatedAt: now, UpdatedAt: now}
	if r.Host != "" {
		// Nova's API records the host asked for as dest_compute.
		mig.DestHost = r.Host
	}
	req := &etcdschema.MoveRequest{InstanceUUID: id, Cell: in.Cell, MigrationUUID: mig.UUID,
		RequestID: r.RequestID, CreatedAt: now, Kind: etcdschema.MigrationTypeEvacuation}
	in.TaskState, in.MigrationUUID, in.UpdatedAt = etcdschema.TaskRebuilding, mig.UUID, now
	ikey := k.CellInstance(in.Cell, id)
	cmps := append([]clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(ikey), "=", v.Rev),
		clientv3.Compare(clientv3.CreateRevision(k.MoveRequest(id)), "=", 0)}, sourceDown...)
	// The destination's claim will hold the flavor beside the source's
	// (the migration's): the project's quota usage record covers it.
	held := quotas.MoveRequest{Project: in.ProjectID, User: in.UserID, RequestID: r.RequestID,
		HeldCores: int64(in.Flavor.VCPUs), HeldRAMMB: int64(in.Flavor.RAMMB)}
	stored, err := s.commitHeld(ctx, held, append(cmps, endedCmps...),
		append(endedOps, clientv3.OpPut(ikey, etcdschema.MustEncode(&in)),
			clientv3.OpPut(k.Migration(in.Cell, mig.UUID), etcdschema.MustEncode(mig)),
			clientv3.OpPut(k.MoveRequest(id), etcdschema.MustEncode(req)),
			clientv3.OpPut(k.MigrationMapping(mig.UUID), etcdschema.MustEncode(&etcdschema.InstanceMapping{
				InstanceUUID: id, Cell: in.Cell, ProjectID: in.ProjectID, CreatedAt: now}))))
	if err != nil {
		return nil, fmt.Errorf("evacuate %s: %w", id, err)
	}
	if !stored {
		return nil, fmt.Errorf("evacuate %s: %w", id, ErrKeptChanging)
	}
	s.log.Info("evacuation accepted", "instance", id, "migration", mig.UUID, "source", in.Host,
		"host", r.Host, "force", mig.ForceHost, "request_id", r.RequestID)
	return mig, nil
}
