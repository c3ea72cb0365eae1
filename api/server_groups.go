package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/gorilla/mux"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
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
	project, user := identity(r)
	rec := &etcdschema.ServerGroup{UUID: uuid.NewString(), Name: g.Name, Policy: g.Policy, Rules: rules,
		ProjectID: project, UserID: user, CreatedAt: time.Now().UTC()}
	key := s.keys.ServerGroup(rec.UUID)
	// Put if absent: the uuid is fresh, so the compare fails only on a
	// retry whose earlier attempt landed (etcd lost its answer): created.
	// Retried while etcd cannot commit, as a server create is.
	retry := false
	err := s.retryStore(r.Context(), "store server group", func(ctx context.Context) error {
		resp, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
			Then(clientv3.OpPut(key, etcdschema.MustEncode(rec))).Commit()
		switch {
		case err != nil:
			retry = true
			return err
		case !resp.Succeeded && !retry:
			return fmt.Errorf("server group %s exists before it was created", rec.UUID)
		}
		return nil
	}, "group", rec.UUID)
	if err != nil {
		s.log.Error("store server group", "error", err)
		writeError(w, http.StatusServiceUnavailable, "Could not store the server group; try again.")
		return
	}
	s.log.Info("server group created", "group", rec.UUID, "policy", rec.Policy, "request_id", requestID(r.Context()))
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

// readGroups reads every group record and the member keys of all of them
// in one snapshot, keeping only members whose server still exists: a
// deleted server leaves the group, as Nova's instance destroy removes it.
func (s *Server) readGroups(ctx context.Context, only string) ([]ServerGroupView, error) {
	k := s.keys
	prefix, opts := k.ServerGroups(), []clientv3.OpOption{clientv3.WithPrefix()}
	if only != "" {
		prefix = k.ServerGroup(only) // the record and, by prefix, its sub-keys
	}
	resp, err := s.cli.Get(ctx, prefix, opts...)
	if err != nil {
		return nil, fmt.Errorf("read server groups: %w", err)
	}
	groups := map[string]*etcdschema.ServerGroup{}
	members := map[string][]string{}
	for _, kv := range resp.Kvs {
		key := string(kv.Key)
		id, rest, sub := strings.Cut(strings.TrimPrefix(key, k.ServerGroups()), "/")
		if only != "" && id != only {
			continue // a longer uuid sharing the prefix
		}
		switch {
		case !sub:
			var g etcdschema.ServerGroup
			if err := etcdschema.Decode(key, kv.Value, &g); err != nil {
				s.log.Warn("skipping unreadable server group", "error", err)
				continue
			}
			groups[id] = &g
		case strings.HasPrefix(rest, "members/"):
			members[id] = append(members[id], strings.TrimPrefix(rest, "members/"))
		}
	}
	var all []string
	for _, ms := range members {
		all = append(all, ms...)
	}
	live, err := s.existing(ctx, all)
	if err != nil {
		return nil, err
	}
	out := []ServerGroupView{}
	for _, id := range sortedKeys(groups) {
		var ms []string
		for _, m := range members[id] {
			if live[m] {
				ms = append(ms, m)
			}
		}
		sort.Strings(ms)
		out = append(out, groupView(groups[id], ms))
	}
	return out, nil
}

// existing reports which instances still have an instance mapping.
func (s *Server) existing(ctx context.Context, uuids []string) (map[string]bool, error) {
	out := map[string]bool{}
	const batch = 128
	for start := 0; start < len(uuids); start += batch {
		part := uuids[start:min(start+batch, len(uuids))]
		ops := make([]clientv3.Op, len(part))
		for i, u := range part {
			ops[i] = clientv3.OpGet(s.keys.InstanceMapping(u), clientv3.WithCountOnly())
		}
		resp, err := s.cli.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			return nil, fmt.Errorf("read instance mappings: %w", err)
		}
		for i, r := range resp.Responses {
			if r.GetResponseRange().Count > 0 {
				out[part[i]] = true
			}
		}
	}
	return out, nil
}

func (s *Server) listServerGroups(w http.ResponseWriter, r *http.Request) {
	groups, err := s.readGroups(r.Context(), "")
	if err != nil {
		s.writeStoreError(w, err, "")
		return
	}
	project, _ := identity(r)
	all := r.URL.Query().Get("all_projects")
	out := []ServerGroupView{}
	for _, g := range groups {
		if all == "true" || all == "1" || g.ProjectID == project {
			out = append(out, g)
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"server_groups": out})
}

func (s *Server) showServerGroup(w http.ResponseWriter, r *http.Request) {
	id := mux.Vars(r)["id"]
	groups, err := s.readGroups(r.Context(), id)
	if err != nil {
		s.writeStoreError(w, err, "")
		return
	}
	if len(groups) == 0 {
		writeError(w, http.StatusNotFound, fmt.Sprintf("Server group %s could not be found.", id))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"server_group": groups[0]})
}

// deleteServerGroup deletes the group with its members and guards. Nova
// lets a group with members be deleted; the servers keep running.
func (s *Server) deleteServerGroup(w http.ResponseWriter, r *http.Request) {
	id := mux.Vars(r)["id"]
	k := s.keys
	// Delete if present, retried while etcd cannot commit; after an
	// attempt whose answer etcd lost, a group found gone is the one this
	// request deleted.
	sent, gone := false, false
	err := s.retryStore(r.Context(), "delete server group", func(ctx context.Context) error {
		resp, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(k.ServerGroup(id)), ">", 0)).
			Then(clientv3.OpDelete(k.ServerGroup(id)), clientv3.OpDelete(k.ServerGroupPrefix(id), clientv3.WithPrefix())).Commit()
		if err != nil {
			sent = true
			return err
		}
		gone = !resp.Succeeded && !sent
		return nil
	}, "group", id)
	if err != nil {
		s.writeStoreError(w, err, "")
		return
	}
	if gone {
		writeError(w, http.StatusNotFound, fmt.Sprintf("Server group %s could not be found.", id))
		return
	}
	s.log.Info("server group deleted", "group", id, "request_id", requestID(r.Context()))
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

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
