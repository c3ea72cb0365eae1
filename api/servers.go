package api

import (
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/gorilla/mux"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/servers"
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
		UserID: in.UserID, Created: in.CreatedAt, Updated: in.UpdatedAt, AZ: in.AvailabilityZone}
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

// loadServer finds the path's server wherever it is, as Nova's
// lookup does for the caller (compute/servers.go's lookupServer): a
// placed server of another project does not exist for a caller who is
// not an admin (404, Nova reads the cell with project_only), a server
// still a build request is read unscoped and p refuses it (403). It has
// answered when it returns nil.
func (s *Server) loadServer(w http.ResponseWriter, r *http.Request, p policy) *servers.Server {
	id := mux.Vars(r)["id"]
	v, err := s.servers.Lookup(r.Context(), id)
	if err == nil && v.Instance != nil && !isAdmin(r) && v.ProjectID() != caller(r).ProjectID {
		err = servers.ErrNotFound
	}
	if err != nil {
		s.writeStoreError(w, err, fmt.Sprintf("Instance %s could not be found.", id))
		return nil
	}
	if !can(w, r, p, v.ProjectID()) {
		return nil
	}
	return v
}

func (s *Server) showServer(w http.ResponseWriter, r *http.Request) {
	if v := s.loadServer(w, r, policyServerShow); v != nil {
		writeJSON(w, http.StatusOK, map[string]any{"server": view(v)})
	}
}

// allProjects reads all_projects or Nova's all_tenants as Nova's
// is_all_tenants does: present and not a false word.
func allProjects(r *http.Request) bool {
	q := r.URL.Query()
	for _, k := range []string{"all_projects", "all_tenants"} {
		if !q.Has(k) {
			continue
		}
		switch strings.ToLower(q.Get(k)) {
		case "0", "f", "false", "n", "no", "off":
		default:
			return true
		}
	}
	return false
}

// listServers lists the caller's project's servers; all_projects (or
// all_tenants) lists every project's, an admin's only (403 otherwise,
// as Nova's servers:index:get_all_tenants).
func (s *Server) listServers(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	all := allProjects(r)
	if all && !can(w, r, policyServerAll, caller(r).ProjectID) {
		return
	}
	list, err := s.servers.List(ctx)
	if err != nil {
		s.writeStoreError(w, err, "")
		return
	}
	project := caller(r).ProjectID
	out := make([]ServerView, 0, len(list))
	for _, v := range list {
		if all || v.ProjectID() == project {
			out = append(out, view(v))
		}
	}
	sort.Slice(out, func(a, b int) bool {
		if !out[a].Created.Equal(out[b].Created) {
			return out[a].Created.Before(out[b].Created)
		}
		return out[a].Name < out[b].Name
	})
	writeJSON(w, http.StatusOK, map[string]any{"servers": out})
}

// deleteServer deletes wherever the server is (servers.Store.Delete),
// once the caller may.
func (s *Server) deleteServer(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	id := mux.Vars(r)["id"]
	// An admin passes the policy for any project's server, and a server
	// that does not exist is Delete's 404 too: only another caller's
	// delete reads the server first, so an admin's rides out a lost
	// quorum in Delete's retries instead of failing its first read.
	if !isAdmin(r) && s.loadServer(w, r, policyServerDelete) == nil {
		return
	}
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
