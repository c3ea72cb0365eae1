package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"time"

	"github.com/gorilla/mux"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/servers"
)

// ServerView is a server as the API shows it, with Nova's status words.
type ServerView struct {
	ID        string               `json:"id"`
	Name      string               `json:"name"`
	Status    string               `json:"status"`
	TaskState string               `json:"task_state,omitempty"`
	Host      string               `json:"host,omitempty"`
	Cell      string               `json:"cell,omitempty"`
	Flavor    FlavorView           `json:"flavor"`
	Fault     *FaultView           `json:"fault,omitempty"`
	Attempts  int                  `json:"attempts,omitempty"`
	ProjectID string               `json:"tenant_id"`
	UserID    string               `json:"user_id"`
	Created   time.Time            `json:"created"`
	Updated   time.Time            `json:"updated"`
	AZ        string               `json:"availability_zone,omitempty"`
	extra     *etcdschema.Instance // the instance record, for /v1/servers/{id}/selection
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

// view is the /v1 view of a server wherever servers.Store found it.
func view(v *servers.Server) ServerView {
	if v.BuildRequest != nil {
		return viewFromBuildRequest(v.BuildRequest)
	}
	return viewFromInstance(v.Instance)
}

// lookup finds a server wherever it is (servers.Store.Lookup), as /v1
// shows it.
func (s *Server) lookup(ctx context.Context, id string) (ServerView, error) {
	v, err := s.servers.Lookup(ctx, id)
	if err != nil {
		return ServerView{}, err
	}
	return view(v), nil
}

func (s *Server) showServer(w http.ResponseWriter, r *http.Request) {
	id := mux.Vars(r)["id"]
	v, err := s.lookup(r.Context(), id)
	if err != nil {
		s.writeStoreError(w, err, fmt.Sprintf("Instance %s could not be found.", id))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"server": v})
}

func (s *Server) listServers(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	all, err := s.servers.List(ctx)
	if err != nil {
		s.writeStoreError(w, err, "")
		return
	}
	out := make([]ServerView, 0, len(all))
	for _, v := range all {
		out = append(out, view(v))
	}
	sort.Slice(out, func(a, b int) bool {
		if !out[a].Created.Equal(out[b].Created) {
			return out[a].Created.Before(out[b].Created)
		}
		return out[a].Name < out[b].Name
	})
	writeJSON(w, http.StatusOK, map[string]any{"servers": out})
}

// deleteServer deletes wherever the server is (servers.Store.Delete).
func (s *Server) deleteServer(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	id := mux.Vars(r)["id"]
	err := s.servers.Delete(ctx, id, requestID(ctx))
	switch {
	case err == nil:
		w.WriteHeader(http.StatusNoContent)
	case errors.Is(err, servers.ErrFreeAllocations):
		s.log.Error("free allocations of deleted server", "instance", id, "error", err)
		writeError(w, http.StatusServiceUnavailable, "Could not free the server's resources; try again.")
	case errors.Is(err, servers.ErrNotFound):
		writeError(w, http.StatusNotFound, fmt.Sprintf("Instance %s could not be found.", id))
	case errors.Is(err, servers.ErrKeptChanging):
		writeError(w, http.StatusConflict, fmt.Sprintf("Instance %s kept changing; try the delete again.", id))
	default:
		s.writeStoreError(w, err, "")
	}
}
