package servers

import (
	"context"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/etcdschema/records"
	"github.com/berth-project/berth/internal/etcdretry"
	"github.com/berth-project/berth/placement"
)

// Errors of Delete besides ErrNotFound and the store's own.
var (
	// ErrFreeAllocations marks a failure to free a hostless server's claim.
	ErrFreeAllocations = errors.New("free the server's allocations")
	// ErrKeptChanging is a server that changed under every one of the
	// delete's optimistic tries: the client may ask again.
	ErrKeptChanging = errors.New("the server kept changing")
)

// Delete deletes wherever the server is: a BuildRequest is removed with
// its mapping (the superconductor frees any claim it made); an instance
// on a host gets a delete cast its agent works; an instance with no host
// (ERROR, or waiting for a retry) is removed here with its claim. While
// etcd cannot commit (an election) it tries again for StorePatience, as
// a create does. It returns nil once the delete is accepted, ErrNotFound
// for no such server.
func (s *Store) Delete(ctx context.Context, id, requestID string) error {
	var outcome deleteOutcome
	sent := false // a delete of ours whose answer etcd may have lost
	err := s.RetryStore(ctx, "delete server", func(ctx context.Context) error {
		// Up to 10 optimistic tries against a server that keeps changing.
		for try := 0; try < 10; try++ {
			var wrote bool
			var err error
			outcome, wrote, err = s.deleteAttempt(ctx, id, requestID, sent)
			if err != nil {
				sent = sent || (wrote && etcdretry.Transient(err))
				return err
			}
			if outcome != deleteChanged {
				return nil
			}
		}
		return nil
	}, "instance", id, "request_id", requestID)
	switch {
	case err != nil:
		return err
	case outcome == deleteGone:
		return ErrNotFound
	case outcome == deleteDone:
		s.log.Info("server delete accepted", "instance", id, "request_id", requestID)
		return nil
	default:
		return fmt.Errorf("delete %s: %w", id, ErrKeptChanging)
	}
}

// deleteOutcome is what one deleteAttempt found.
type deleteOutcome int

const (
	deleteDone    deleteOutcome = iota // removed, or its delete cast written
	deleteGone                         // no such server
	deleteChanged                      // it changed since it was read: read again
)

// deleteAttempt reads the server and deletes it with one transaction
// guarded by what it read. wrote says an error came from that
// transaction (etcd may have applied it). After such an error (sent), a
// server found gone is one this request deleted: done, not 404. A delete
// cast written twice is the same cast; a removal guarded by the read
// revision cannot remove anything else.
func (s *Store) deleteAttempt(ctx context.Context, id, requestID string, sent bool) (outcome deleteOutcome, wrote bool, err error) {
	k := s.keys
	v, err := s.Lookup(ctx, id)
	switch {
	case errors.Is(err, ErrNotFound) && sent:
		return deleteDone, false, nil
	case errors.Is(err, ErrNotFound):
		return deleteGone, false, nil
	case err != nil:
		return 0, false, err
	}
	var resp *clientv3.TxnResponse
	switch {
	case v.BuildRequest != nil:
		resp, err = s.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(k.BuildRequest(id)), ">", 0)).
			Then(deleteBuildRequest(k, id, v.Mapping.ProjectID)...).Commit()
	case v.Instance.Host != "":
		in := *v.Instance
		in.TaskState = etcdschema.TaskDeleting
		in.UpdatedAt = time.Now().UTC()
		in.DeleteRequestID = requestID
		cast := &etcdschema.Build{Op: etcdschema.OpDelete, InstanceUUID: id, Name: in.Name, Cell: in.Cell,
			Flavor: in.Flavor, ProjectID: in.ProjectID, UserID: in.UserID, RequestID: requestID, CastAt: in.UpdatedAt}
		if in.MigrationUUID != "" {
			// A move in flight: the host frees its migration's consumer (the
			// source's allocation) with the instance's.
			cast.Move = &etcdschema.MoveStep{MigrationUUID: in.MigrationUUID}
		}
		ikey := k.CellInstance(v.Mapping.Cell, id)
		resp, err = s.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(ikey), "=", v.Rev)).
			Then(clientv3.OpPut(ikey, etcdschema.MustEncode(&in)),
				clientv3.OpPut(k.Build(in.Host, id), etcdschema.MustEncode(cast))).Commit()
	default:
		if s.placement == nil {
			return 0, false, fmt.Errorf("%w of %s: no placement configured", ErrFreeAllocations, id)
		}
		if err := s.placement.DeleteAllocations(ctx, id); err != nil && !errors.Is(err, placement.ErrNotFound) {
			if etcdretry.Transient(err) {
				return 0, false, err
			}
			return 0, false, fmt.Errorf("%w of %s: %w", ErrFreeAllocations, id, err)
		}
		ikey := k.CellInstance(v.Mapping.Cell, id)
		resp, err = s.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(ikey), "=", v.Rev)).
			Then(records.DeleteInstance(k, v.Mapping.Cell, "", id, v.Mapping.ProjectID)...).Commit()
	}
	if err != nil {
		return 0, true, fmt.Errorf("delete %s: %w", id, err)
	}
	if !resp.Succeeded {
		return deleteChanged, false, nil
	}
	return deleteDone, false, nil
}

// deleteBuildRequest is every record of a server that is still a
// BuildRequest of project, deleted: the request, its mapping and its
// entry in the project's quota index (none to delete for an unknown
// project: an older Berth's mapping).
func deleteBuildRequest(k etcdschema.Keys, id, project string) []clientv3.Op {
	ops := []clientv3.Op{clientv3.OpDelete(k.BuildRequest(id)), clientv3.OpDelete(k.InstanceMapping(id))}
	if project != "" {
		ops = append(ops, clientv3.OpDelete(k.QuotaInstance(project, id)))
	}
	return ops
}
