package servers

import (
	"context"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/etcdschema/records"
)

// Shelving's API side (nova/compute/api.py shelve, shelve_offload,
// unshelve): each checks the server's state as check_instance_state
// does, then in one transaction guarded by the instance's revision sets
// the task, records the action and casts the first step to the server's
// host, or (unshelve of an offloaded server) files the MoveRequest the
// superconductors schedule. The rest is the agents' (agent/shelve.go),
// the superconductor's and the cell conductor's (conductor/unshelve.go).

// UnshelveStateError is Nova's UnshelveInstanceInvalidState: a zone or
// host given for a server that is not SHELVED_OFFLOADED.
type UnshelveStateError struct{ ID, State string }

func (e *UnshelveStateError) Error() string {
	return fmt.Sprintf("Specifying an availability zone or a host when unshelving server \"%s\" with status \"%s\" is not supported. The server status must be SHELVED_OFFLOADED.", e.ID, e.State)
}

// HostNotInZoneError is Nova's UnshelveHostNotInAZ.
type HostNotInZoneError struct{ Host, Zone string }

func (e *HostNotInZoneError) Error() string {
	return fmt.Sprintf("Host \"%s\" is not in the availability zone \"%s\".", e.Host, e.Zone)
}

// ErrZoneUnavailable is Nova's InvalidRequest of an unshelve into a zone
// that does not exist.
var ErrZoneUnavailable = errors.New("the requested availability zone is not available")

// ShelveOffloadNever is shelved_offload_time -1: a shelved server stays
// on its host until shelveOffload.
const ShelveOffloadNever = time.Duration(-1)

// Shelve is compute.API.shelve: the server must be ACTIVE with no task
// (Berth has no STOPPED, PAUSED or SUSPENDED, which Nova also shelves);
// its task goes shelving and its host is cast StepShelve. offloadAfter
// is shelved_offload_time: 0 offloads as soon as the guest has stopped,
// ShelveOffloadNever (any negative) never, else the leader offloads it
// that long after.
func (s *Store) Shelve(ctx context.Context, id, requestID string, offloadAfter time.Duration) error {
	return s.shelveStep(ctx, id, "shelve", etcdschema.StatusActive, func(in *etcdschema.Instance, now time.Time) (string, error) {
		st := &etcdschema.ShelveState{OffloadNow: offloadAfter == 0}
		if offloadAfter > 0 {
			st.OffloadAfter = offloadAfter
		}
		in.Shelve, in.TaskState = st, etcdschema.TaskShelving
		in.StartAction(etcdschema.ActionShelve, requestID, now)
		return etcdschema.StepShelve, nil
	}, requestID)
}

// ShelveOffload is compute.API.shelve_offload: the server must be
// SHELVED with no task; its task goes shelving_offloading and its host
// is cast StepShelveOffload.
func (s *Store) ShelveOffload(ctx context.Context, id, requestID string) error {
	return s.shelveStep(ctx, id, "shelveOffload", etcdschema.StatusShelved, func(in *etcdschema.Instance, now time.Time) (string, error) {
		in.TaskState = etcdschema.TaskShelvingOffloading
		in.StartAction(etcdschema.ActionShelveOffload, requestID, now)
		return etcdschema.StepShelveOffload, nil
	}, requestID)
}

// shelveStep checks the server is in status with no task and on a
// host, lets change set the task (and returns the step), then writes the
// instance and casts the step to its host, guarded by the revision read.
func (s *Store) shelveStep(ctx context.Context, id, action, status string,
	change func(in *etcdschema.Instance, now time.Time) (string, error), requestID string) error {
	v, err := s.Lookup(ctx, id)
	if err != nil {
		return err
	}
	if v.Instance == nil {
		return &StateError{Action: action, ID: id, Attr: "vm_state", State: "building"}
	}
	in := *v.Instance
	if err := movable(action, &in, status); err != nil {
		return err
	}
	now := time.Now().UTC()
	step, err := change(&in, now)
	if err != nil {
		return err
	}
	in.UpdatedAt = now
	k := s.keys
	ikey := k.CellInstance(in.Cell, id)
	resp, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(ikey), "=", v.Rev)).
		Then(clientv3.OpPut(ikey, etcdschema.MustEncode(&in)),
			clientv3.OpPut(k.Build(in.Host, id), etcdschema.MustEncode(records.ShelveCast(&in, step, requestID, now))),
			clientv3.OpDelete(k.ShelvedOffload(id))).Commit()
	if err != nil {
		return fmt.Errorf("%s %s: %w", action, id, err)
	}
	if !resp.Succeeded {
		return fmt.Errorf("%s %s: %w", action, id, ErrKeptChanging)
	}
	s.log.Info("shelve step cast", "action", action, "instance", id, "host", in.Host, "step", step, "request_id", requestID)
	return nil
}

// UnshelveRequest is an unshelve's body: the zone (2.77; ZoneGiven with
// Zone nil is 2.91's null, which unpins the server) and the host (2.91).
type UnshelveRequest struct {
	ZoneGiven bool
	Zone      *string
	Host      string
	// AuthorizeHost checks the caller may name a host (Nova's
	// os-shelve:unshelve_to_host), called where Nova checks it: after
	// the state and zone checks.
	AuthorizeHost func() error
	RequestID     string
}

// Unshelve is compute.API.unshelve: the server must be SHELVED or
// SHELVED_OFFLOADED with no task, a zone or host only for an offloaded
// one. A SHELVED server's host is cast StepUnshelveStart; an offloaded
// one's unshelve is a MoveRequest (kind unshelve) the superconductors
// schedule with the server's flavor, group, zone and requested host.
func (s *Store) Unshelve(ctx context.Context, id string, r UnshelveRequest) error {
	const action = "unshelve"
	v, err := s.Lookup(ctx, id)
	if err != nil {
		return err
	}
	if v.Instance == nil {
		return &StateError{Action: action, ID: id, Attr: "vm_state", State: "building"}
	}
	in := *v.Instance
	if in.Status != etcdschema.StatusShelved && in.Status != etcdschema.StatusShelvedOffloaded {
		return &StateError{Action: action, ID: id, Attr: "vm_state", State: vmStateOf(&in)}
	}
	if in.TaskState != "" {
		return &StateError{Action: action, ID: id, Attr: "task_state", State: in.TaskState}
	}
	offloaded := in.Status == etcdschema.StatusShelvedOffloaded
	if (r.ZoneGiven || r.Host != "") && !offloaded {
		return &UnshelveStateError{ID: id, State: vmStateOf(&in)}
	}
	zone := in.RequestedAZ
	if r.ZoneGiven {
		zone = ""
		if r.Zone != nil {
			zone = *r.Zone
		}
	}
	if r.ZoneGiven && zone != "" {
		zones, err := s.AvailabilityZones(ctx)
		if err != nil {
			return err
		}
		if !zones[zone] {
			return ErrZoneUnavailable
		}
	}
	if r.Host != "" {
		if r.AuthorizeHost != nil {
			if err := r.AuthorizeHost(); err != nil {
				return err
			}
		}
		if err := s.CheckRequestedHost(ctx, r.Host, ""); err != nil {
			return err
		}
		if zone != "" {
			hz, _, err := s.HostZone(ctx, r.Host)
			if err != nil {
				return err
			}
			if hz == "" {
				hz = s.DefaultZone()
			}
			if hz != zone {
				return &HostNotInZoneError{Host: r.Host, Zone: zone}
			}
		}
	}
	now := time.Now().UTC()
	in.TaskState, in.UpdatedAt = etcdschema.TaskUnshelving, now
	in.StartAction(etcdschema.ActionUnshelve, r.RequestID, now)
	k := s.keys
	ikey := k.CellInstance(in.Cell, id)
	cmps := []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(ikey), "=", v.Rev)}
	var ops []clientv3.Op
	if offloaded {
		// Nova saves the request spec's zone before scheduling, so a
		// failed unshelve keeps it too.
		in.RequestedAZ = zone
		st := etcdschema.ShelveState{}
		if in.Shelve != nil {
			st = *in.Shelve
		}
		st.RequestedHost, st.Remaining, st.Attempts, st.MaxAttempts = r.Host, nil, nil, 0
		in.Shelve = &st
		req := &etcdschema.MoveRequest{InstanceUUID: id, Cell: in.Cell, RequestID: r.RequestID, CreatedAt: now,
			Kind: etcdschema.MoveKindUnshelve}
		cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(k.MoveRequest(id)), "=", 0))
		ops = append(ops, clientv3.OpPut(k.MoveRequest(id), etcdschema.MustEncode(req)))
	} else {
		ops = append(ops, clientv3.OpPut(k.Build(in.Host, id),
			etcdschema.MustEncode(records.ShelveCast(&in, etcdschema.StepUnshelveStart, r.RequestID, now))))
	}
	ops = append(ops, clientv3.OpPut(ikey, etcdschema.MustEncode(&in)), clientv3.OpDelete(k.ShelvedOffload(id)))
	resp, err := s.cli.Txn(ctx).If(cmps...).Then(ops...).Commit()
	if err != nil {
		return fmt.Errorf("%s %s: %w", action, id, err)
	}
	if !resp.Succeeded {
		return fmt.Errorf("%s %s: %w", action, id, ErrKeptChanging)
	}
	s.log.Info("unshelve accepted", "instance", id, "offloaded", offloaded, "zone", zone, "host", r.Host,
		"request_id", r.RequestID)
	return nil
}
