package identity

import (
	"net/http"
	"sort"
)

// Keystone's projects API, reads only: what a client resolving a
// project by id or name needs (the openstack CLI's `quota show/set
// PROJECT` looks the project up here before asking the compute API).
// Berth's projects are its config, so they are never written here.

// projectDoc is Keystone's project view.
func projectDoc(r *http.Request, p *project) map[string]any {
	return map[string]any{"id": p.id, "name": p.name, "domain_id": DefaultDomainID, "description": "",
		"enabled": true, "parent_id": DefaultDomainID, "is_domain": false, "tags": []string{}, "options": map[string]any{},
		"links": map[string]any{"self": baseURL(r) + "/v3/projects/" + p.id}}
}

// canReadProjects is Keystone's ADMIN_OR_SYSTEM_READER: an admin, or a
// reader on the system scope.
func canReadProjects(c Credentials) bool {
	return c.HasRole(RoleAdmin) || (c.System && c.HasRole(RoleReader))
}

// getProject is identity:get_project: an admin, a system reader, or a
// token scoped to that project.
func (a *API) getProject(w http.ResponseWriter, r *http.Request, auth *Token) error {
	id := r.PathValue("id")
	// Keystone loads the project (404) before its policy sees it as the
	// target (403): a client resolving a name by trying it as an id
	// first, as the openstack CLI does, then falls back to the list.
	p := a.svc.dir.projectsByID[id]
	if p == nil {
		return &httpError{code: http.StatusNotFound, msg: "Could not find project: " + id + "."}
	}
	if c := auth.Credentials; !canReadProjects(c) && c.ProjectID != id {
		return &httpError{code: http.StatusForbidden,
			msg: "You are not authorized to perform the requested action: identity:get_project."}
	}
	writeJSON(w, http.StatusOK, map[string]any{"project": projectDoc(r, p)})
	return nil
}

// listProjects is identity:list_projects (an admin's or a system
// reader's), filtered by ?name= as Keystone filters.
func (a *API) listProjects(w http.ResponseWriter, r *http.Request, auth *Token) error {
	if !canReadProjects(auth.Credentials) {
		return &httpError{code: http.StatusForbidden,
			msg: "You are not authorized to perform the requested action: identity:list_projects."}
	}
	name, byName := r.URL.Query()["name"]
	var out []map[string]any
	ids := make([]string, 0, len(a.svc.dir.projectsByID))
	for id := range a.svc.dir.projectsByID {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		p := a.svc.dir.projectsByID[id]
		if byName && p.name != name[len(name)-1] {
			continue
		}
		out = append(out, projectDoc(r, p))
	}
	if out == nil {
		out = []map[string]any{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"projects": out,
		"links": map[string]any{"self": baseURL(r) + "/v3/projects", "previous": nil, "next": nil}})
	return nil
}
