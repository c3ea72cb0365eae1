package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/gorilla/mux"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/etcdschema/records"
	"github.com/berth-project/berth/internal/etcdretry"
	"github.com/berth-project/berth/placement"
)

// ServerView is a server as the API shows it, with Nova's status words.
type ServerView struct {
	ID        string     `json:"id"`
	Name      string     `json:"name"`
	Status    string     `json:"status"`
	TaskState string     `json:"task_state,omitempty"`
	Host      string     `json:"host,omitempty"`
	Cell      string     `json:"cell,omitempty"`
	Flavor    FlavorView `json:"flavor"`
	Fault     *FaultView `json:"fault,omitempty"`
	Attempts  int        `json:"attempts,omitempty"`
	ProjectID string     `json:"tenant_id"`
	UserID    string     `json:"user_id"`
	Created   time.Time  `json:"created"`
	Updated   time.Time  `json:"updated"`
	AZ        string     `json:"availability_zone,omitempty"`
	extra     *etcdschema.Instance
}

// FlavorView is the flavor embedded in a server.
type FlavorView struct {
	Name  string `json:"original_name"`
	VCPUs int    `json:"vcpus"`
	RAM   int    `json:"ram"`
	Disk  int    `json:"disk"`
}

// FaultView explains an ERROR.
type FaultView struct {
	Code    int       `json:"code"`
	Message string    `json:"message"`
	Details string    `json:"details,omitempty"`
	Created time.Time `json:"created"`
}

func flavorView(f etcdschema.Flavor) FlavorView {
	return FlavorView{Name: f.Name, VCPUs: f.VCPUs, RAM: f.RAMMB, Disk: f.DiskGB}
}

func viewFromBuildRequest(br *etcdschema.BuildRequest) ServerView {
	return ServerView{ID: br.InstanceUUID, Name: br.Name, Status: etcdschema.StatusBuild,
		TaskState: etcdschema.TaskScheduling, Flavor: flavorView(br.Flavor), ProjectID: br.ProjectID,
		UserID: br.UserID, Created: br.CreatedAt, Updated: br.CreatedAt, AZ: br.AvailabilityZone}
}

func viewFromInstance(in *etcdschema.Instance) ServerView {
	v := ServerView{ID: in.UUID, Name: in.Name, Status: in.Status, TaskState: in.TaskState, Host: in.Host,
		Cell: in.Cell, Flavor: flavorView(in.Flavor), Attempts: in.Attempts, ProjectID: in.ProjectID,
		UserID: in.UserID, Created: in.CreatedAt, Updated: in.UpdatedAt, AZ: in.AvailabilityZone, extra: in}
	if in.Fault != nil {
		v.Fault = &FaultView{Code: in.Fault.Code, Message: in.Fault.Message, Details: in.Fault.Details, Created: in.Fault.Created}
	}
	return v
}

// lookup finds a server wherever it is: still a BuildRequest, or an
// instance in the cell its mapping names.
func (s *Server) lookup(ctx context.Context, id string) (ServerView, *etcdschema.InstanceMapping, int64, error) {
	k := s.keys
	resp, err := s.cli.Txn(ctx).Then(clientv3.OpGet(k.InstanceMapping(id)), clientv3.OpGet(k.BuildRequest(id))).Commit()
	if err != nil {
		return ServerView{}, nil, 0, fmt.Errorf("look up %s: %w", id, err)
	}
	mkv := resp.Responses[0].GetResponseRange().Kvs
	bkv := resp.Responses[1].GetResponseRange().Kvs
	if len(mkv) == 0 {
		return ServerView{}, nil, 0, errNotFound
	}
	var m etcdschema.InstanceMapping
	if err := etcdschema.Decode(k.InstanceMapping(id), mkv[0].Value, &m); err != nil {
		return ServerView{}, nil, 0, err
	}
	if m.Cell == "" {
		if len(bkv) == 0 {
			// Between the BuildRequest's deletion and the mapping's update:
			// both happen in one transaction, so this is a deletion race.
			return ServerView{}, nil, 0, errNotFound
		}
		var br etcdschema.BuildRequest
		if err := etcdschema.Decode(k.BuildRequest(id), bkv[0].Value, &br); err != nil {
			return ServerView{}, nil, 0, err
		}
		return viewFromBuildRequest(&br), &m, mkv[0].ModRevision, nil
	}
	ikey := k.CellInstance(m.Cell, id)
	ir, err := s.cli.Get(ctx, ikey)
	if err != nil {
		return ServerView{}, nil, 0, fmt.Errorf("read %s: %w", ikey, err)
	}
	if len(ir.Kvs) == 0 {
		return ServerView{}, nil, 0, errNotFound
	}
	var in etcdschema.Instance
	if err := etcdschema.Decode(ikey, ir.Kvs[0].Value, &in); err != nil {
		return ServerView{}, nil, 0, err
	}
	return viewFromInstance(&in), &m, ir.Kvs[0].ModRevision, nil
}

func (s *Server) showServer(w http.ResponseWriter, r *http.Request) {
	id := mux.Vars(r)["id"]
	v, _, _, err := s.lookup(r.Context(), id)
	if err != nil {
		s.writeStoreError(w, err, fmt.Sprintf("Instance %s could not be found.", id))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"server": v})
}

func (s *Server) listServers(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	k := s.keys
	// One consistent snapshot of both prefixes.
	resp, err := s.cli.Txn(ctx).Then(
		clientv3.OpGet(k.BuildRequests(), clientv3.WithPrefix()),
		clientv3.OpGet(k.CellsPrefix(), clientv3.WithPrefix()),
	).Commit()
	if err != nil {
		s.writeStoreError(w, err, "")
		return
	}
	out := []ServerView{}
	for _, kv := range resp.Responses[0].GetResponseRange().Kvs {
		var br etcdschema.BuildRequest
		if err := etcdschema.Decode(string(kv.Key), kv.Value, &br); err != nil {
			s.log.Warn("skipping unreadable build request", "error", err)
			continue
		}
		out = append(out, viewFromBuildRequest(&br))
	}
	for _, kv := range resp.Responses[1].GetResponseRange().Kvs {
		key := string(kv.Key)
		if !strings.Contains(strings.TrimPrefix(key, k.CellsPrefix()), "/instances/") {
			continue
		}
		var in etcdschema.Instance
		if err := etcdschema.Decode(key, kv.Value, &in); err != nil {
			s.log.Warn("skipping unreadable instance", "error", err)
			continue
		}
		out = append(out, viewFromInstance(&in))
	}
	sort.Slice(out, func(a, b int) bool {
		if !out[a].Created.Equal(out[b].Created) {
			return out[a].Created.Before(out[b].Created)
		}
		return out[a].Name < out[b].Name
	})
	writeJSON(w, http.StatusOK, map[string]any{"servers": out})
}

// deleteServer deletes wherever the server is: a BuildRequest is removed
// with its mapping (the superconductor frees any claim it made); an
// instance on a host gets a delete cast its agent works; an instance with
// no host (ERROR, or waiting for a retry) is removed here with its claim.
// While etcd cannot commit (an election) it tries again for
// storePatience, as a create does.
func (s *Server) deleteServer(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	id := mux.Vars(r)["id"]
	var outcome deleteOutcome
	sent := false // a delete of ours whose answer etcd may have lost
	err := s.retryStore(ctx, "delete server", func(ctx context.Context) error {
		// Up to 10 optimistic tries against a server that keeps changing.
		for try := 0; try < 10; try++ {
			var wrote bool
			var err error
			outcome, wrote, err = s.deleteAttempt(ctx, id, sent)
			if err != nil {
				sent = sent || (wrote && etcdretry.Transient(err))
				return err
			}
			if outcome != deleteChanged {
				return nil
			}
		}
		return nil
	}, "instance", id, "request_id", requestID(ctx))
	switch {
	case errors.Is(err, errFreeAllocations):
		s.log.Error("free allocations of deleted server", "instance", id, "error", err)
		writeError(w, http.StatusServiceUnavailable, "Could not free the server's resources; try again.")
	case err != nil:
		s.writeStoreError(w, err, "")
	case outcome == deleteGone:
		writeError(w, http.StatusNotFound, fmt.Sprintf("Instance %s could not be found.", id))
	case outcome == deleteDone:
		s.log.Info("server delete accepted", "instance", id, "request_id", requestID(ctx))
		w.WriteHeader(http.StatusNoContent)
	default:
		writeError(w, http.StatusConflict, fmt.Sprintf("Instance %s kept changing; try the delete again.", id))
	}
}

// deleteOutcome is what one deleteAttempt found.
type deleteOutcome int

const (
	deleteDone    deleteOutcome = iota // removed, or its delete cast written
	deleteGone                         // no such server
	deleteChanged                      // it changed since it was read: read again
)

// errFreeAllocations marks a failure to free a hostless server's claim.
var errFreeAllocations = errors.New("free the server's allocations")

// deleteAttempt reads the server and deletes it with one transaction
// guarded by what it read. wrote says an error came from that
// transaction (etcd may have applied it). After such an error (sent), a
// server found gone is one this request deleted: done, not 404. A delete
// cast written twice is the same cast; a removal guarded by the read
// revision cannot remove anything else.
func (s *Server) deleteAttempt(ctx context.Context, id string, sent bool) (outcome deleteOutcome, wrote bool, err error) {
	k := s.keys
	v, m, rev, err := s.lookup(ctx, id)
	switch {
	case errors.Is(err, errNotFound) && sent:
		return deleteDone, false, nil
	case errors.Is(err, errNotFound):
		return deleteGone, false, nil
	case err != nil:
		return 0, false, err
	}
	var resp *clientv3.TxnResponse
	switch {
	case m.Cell == "":
		resp, err = s.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(k.BuildRequest(id)), ">", 0)).
			Then(clientv3.OpDelete(k.BuildRequest(id)), clientv3.OpDelete(k.InstanceMapping(id))).Commit()
	case v.Host != "":
		in := *v.extra
		in.TaskState = etcdschema.TaskDeleting
		in.UpdatedAt = time.Now().UTC()
		cast := &etcdschema.Build{Op: etcdschema.OpDelete, InstanceUUID: id, Name: in.Name, Cell: in.Cell,
			Flavor: in.Flavor, ProjectID: in.ProjectID, UserID: in.UserID, RequestID: requestID(ctx), CastAt: in.UpdatedAt}
		ikey := k.CellInstance(m.Cell, id)
		resp, err = s.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(ikey), "=", rev)).
			Then(clientv3.OpPut(ikey, etcdschema.MustEncode(&in)),
				clientv3.OpPut(k.Build(v.Host, id), etcdschema.MustEncode(cast))).Commit()
	default:
		if err := s.placement.DeleteAllocations(ctx, id); err != nil && !errors.Is(err, placement.ErrNotFound) {
			if etcdretry.Transient(err) {
				return 0, false, err
			}
			return 0, false, fmt.Errorf("%w of %s: %w", errFreeAllocations, id, err)
		}
		ikey := k.CellInstance(m.Cell, id)
		resp, err = s.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(ikey), "=", rev)).
			Then(records.DeleteInstance(k, m.Cell, "", id)...).Commit()
	}
	if err != nil {
		return 0, true, fmt.Errorf("delete %s: %w", id, err)
	}
	if !resp.Succeeded {
		return deleteChanged, false, nil
	}
	return deleteDone, false, nil
}
