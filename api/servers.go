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
func (s *Server) deleteServer(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	id := mux.Vars(r)["id"]
	k := s.keys
	for try := 0; try < 10; try++ {
		v, m, rev, err := s.lookup(ctx, id)
		if err != nil {
			s.writeStoreError(w, err, fmt.Sprintf("Instance %s could not be found.", id))
			return
		}
		var ok bool
		switch {
		case m.Cell == "":
			resp, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(k.BuildRequest(id)), ">", 0)).
				Then(clientv3.OpDelete(k.BuildRequest(id)), clientv3.OpDelete(k.InstanceMapping(id))).Commit()
			if err != nil {
				s.writeStoreError(w, err, "")
				return
			}
			ok = resp.Succeeded
		case v.Host != "":
			in := *v.extra
			in.TaskState = etcdschema.TaskDeleting
			in.UpdatedAt = time.Now().UTC()
			cast := &etcdschema.Build{Op: etcdschema.OpDelete, InstanceUUID: id, Name: in.Name, Cell: in.Cell,
				Flavor: in.Flavor, ProjectID: in.ProjectID, UserID: in.UserID, RequestID: requestID(ctx), CastAt: in.UpdatedAt}
			ikey := k.CellInstance(m.Cell, id)
			resp, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(ikey), "=", rev)).
				Then(clientv3.OpPut(ikey, etcdschema.MustEncode(&in)),
					clientv3.OpPut(k.Build(v.Host, id), etcdschema.MustEncode(cast))).Commit()
			if err != nil {
				s.writeStoreError(w, err, "")
				return
			}
			ok = resp.Succeeded
		default:
			if err := s.placement.DeleteAllocations(ctx, id); err != nil && !errors.Is(err, placement.ErrNotFound) {
				s.log.Error("free allocations of deleted server", "instance", id, "error", err)
				writeError(w, http.StatusServiceUnavailable, "Could not free the server's resources; try again.")
				return
			}
			ikey := k.CellInstance(m.Cell, id)
			resp, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(ikey), "=", rev)).
				Then(clientv3.OpDelete(ikey), clientv3.OpDelete(k.InstanceMapping(id)),
					clientv3.OpDelete(k.Alternates(id)), clientv3.OpDelete(k.Retry(m.Cell, id))).Commit()
			if err != nil {
				s.writeStoreError(w, err, "")
				return
			}
			ok = resp.Succeeded
		}
		if ok {
			s.log.Info("server delete accepted", "instance", id, "request_id", requestID(ctx))
			w.WriteHeader(http.StatusNoContent)
			return
		}
	}
	writeError(w, http.StatusConflict, fmt.Sprintf("Instance %s kept changing; try the delete again.", id))
}
