package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/gorilla/mux"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/servergroups"
)

// ServerGroupView is a server group as the API shows it (Nova 2.64 shape).
type ServerGroupView struct {
	ID        string         `json:"id"`
	Name      string         `json:"name"`
	Policy    string         `json:"policy"`
	Rules     map[string]int `json:"rules"`
	Members   []string       `json:"members"`
	ProjectID string         `json:"project_id"`
	UserID    string         `json:"user_id"`
	Created   time.Time      `json:"created_at"`
}

var groupPolicies = []string{etcdschema.PolicyAffinity, etcdschema.PolicyAntiAffinity,
	etcdschema.PolicySoftAffinity, etcdschema.PolicySoftAntiAffinity}

type createGroupRequest struct {
	ServerGroup *struct {
		Name   string                     `json:"name"`
		Policy string                     `json:"policy"`
		Rules  map[string]json.RawMessage `json:"rules"`
	} `json:"server_group"`
}

func (s *Server) createServerGroup(w http.ResponseWriter, r *http.Request) {
	var req createGroupRequest
	if err := decodeBody(w, r, &req); err != nil {
		writeBodyError(w, err)
		return
	}
	g := req.ServerGroup
	switch {
	case g == nil:
		writeError(w, http.StatusBadRequest, "Invalid input: 'server_group' is required.")
		return
	case strings.TrimSpace(g.Name) == "" || len(g.Name) > 255:
		writeError(w, http.StatusBadRequest, "Invalid input: 'name' must be 1 to 255 characters.")
		return
	case !contains(groupPolicies, g.Policy):
		writeError(w, http.StatusBadRequest, fmt.Sprintf("Invalid input: 'policy' must be one of %s.", strings.Join(groupPolicies, ", ")))
		return
	}
	var rules etcdschema.ServerGroupRules
	for k, raw := range g.Rules {
		if k != "max_server_per_host" {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("Invalid input: unknown rule %q; only max_server_per_host exists.", k))
			return
		}
		if g.Policy != etcdschema.PolicyAntiAffinity {
			writeError(w, http.StatusBadRequest, "Invalid input: rules are only allowed with policy anti-affinity.")
			return
		}
		var n int
		if err := json.Unmarshal(raw, &n); err != nil || n < 1 {
			writeError(w, http.StatusBadRequest, "Invalid input: 'max_server_per_host' must be a positive integer.")
			return
		}
		rules.MaxServerPerHost = n
	}
	who := caller(r)
	rec := &etcdschema.ServerGroup{UUID: uuid.NewString(), Name: g.Name, Policy: g.Policy, Rules: rules,
		ProjectID: who.ProjectID, UserID: who.UserID, CreatedAt: time.Now().UTC()}
	if err := s.groups.Create(r.Context(), rec); err != nil {
		s.log.Error("store server group", "error", err)
		writeError(w, http.StatusServiceUnavailable, "Could not store the server group; try again.")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"server_group": groupView(rec, nil)})
}

func groupView(g *etcdschema.ServerGroup, members []string) ServerGroupView {
	rules := map[string]int{}
	if g.Policy == etcdschema.PolicyAntiAffinity && g.Rules.MaxServerPerHost > 0 {
		rules["max_server_per_host"] = g.Rules.MaxServerPerHost
	}
	if members == nil {
		members = []string{}
	}
	return ServerGroupView{ID: g.UUID, Name: g.Name, Policy: g.Policy, Rules: rules, Members: members,
		ProjectID: g.ProjectID, UserID: g.UserID, Created: g.CreatedAt}
}

// listServerGroups lists the caller's project's groups; all_projects
// lists every project's for an admin, and a non-admin asking is answered
// its own, not refused, as Nova's index does.
func (s *Server) listServerGroups(w http.ResponseWriter, r *http.Request) {
	groups, err := s.groups.List(r.Context())
	if err != nil {
		s.writeStoreError(w, err, "")
		return
	}
	all := allProjects(r) && isAdmin(r)
	project := caller(r).ProjectID
	out := []ServerGroupView{}
	for _, g := range groups {
		if all || g.ProjectID == project {
			out = append(out, groupView(g.ServerGroup, g.Members))
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"server_groups": out})
}

// loadGroup reads the group of the path's id as Nova's controller does:
// for a caller who is not an admin, another project's group does not
// exist (404); then p against the group's project (403). It has answered
// when it returns nil.
func (s *Server) loadGroup(w http.ResponseWriter, r *http.Request, p policy) *servergroups.Group {
	id := mux.Vars(r)["id"]
	g, err := s.groups.Get(r.Context(), id)
	if errors.Is(err, servergroups.ErrNotFound) || err == nil && !isAdmin(r) && g.ProjectID != caller(r).ProjectID {
		writeError(w, http.StatusNotFound, fmt.Sprintf("Server group %s could not be found.", id))
		return nil
	}
	if err != nil {
		s.writeStoreError(w, err, "")
		return nil
	}
	if !can(w, r, p, g.ProjectID) {
		return nil
	}
	return g
}

func (s *Server) showServerGroup(w http.ResponseWriter, r *http.Request) {
	if g := s.loadGroup(w, r, policyGroupShow); g != nil {
		writeJSON(w, http.StatusOK, map[string]any{"server_group": groupView(g.ServerGroup, g.Members)})
	}
}

// deleteServerGroup deletes the group with its members and guards. Nova
// lets a group with members be deleted; the servers keep running.
func (s *Server) deleteServerGroup(w http.ResponseWriter, r *http.Request) {
	// As deleteServer: an admin's delete needs no read first.
	if !isAdmin(r) && s.loadGroup(w, r, policyGroupDelete) == nil {
		return
	}
	id := mux.Vars(r)["id"]
	err := s.groups.Delete(r.Context(), id)
	if errors.Is(err, servergroups.ErrNotFound) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("Server group %s could not be found.", id))
		return
	}
	if err != nil {
		s.writeStoreError(w, err, "")
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// decodeBody reads a JSON body of at most maxBodyBytes; its error is
// answered with writeBodyError.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) error {
	return json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBodyBytes)).Decode(v)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
