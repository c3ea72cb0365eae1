package compute

import (
	"errors"
	"net/http"
	"time"

	"github.com/google/uuid"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/quotas"
	"github.com/berth-project/berth/servergroups"
)

// The os-server-groups resource: nova/api/openstack/compute/
// server_groups.py over package servergroups (which /v1 shares).

// Microversions that change server groups.
const (
	mvGroupOwner  = 13 // project_id and user_id in the view
	mvSoftPolicy  = 15 // soft-affinity and soft-anti-affinity
	mvGroupPolicy = 64 // policy and rules instead of policies and metadata
)

// Policy rules of nova/policies/server_groups.py.
var (
	policyGroupCreate      = projectMemberOrAdmin("os_compute_api:os-server-groups:create")
	policyGroupDelete      = projectMemberOrAdmin("os_compute_api:os-server-groups:delete")
	policyGroupIndex       = projectReaderOrAdmin("os_compute_api:os-server-groups:index")
	policyGroupIndexAll    = adminOnly("os_compute_api:os-server-groups:index:all_projects")
	policyGroupShow        = projectReaderOrAdmin("os_compute_api:os-server-groups:show")
	schemaServerGroupsList = since(75, serverGroupsQuery(false), serverGroupsQuery(true))
)

// groupView is _format_server_group: policies and an empty metadata
// before 2.64, policy and rules from it; the owner from 2.13.
func groupView(c *reqCtx, g *etcdschema.ServerGroup, members []string) obj {
	o := obj{{"id", g.UUID}, {"name", g.Name}}
	if c.v.atLeast(mvGroupPolicy) {
		rules := obj{}
		if g.Rules.MaxServerPerHost > 0 {
			rules = obj{{"max_server_per_host", g.Rules.MaxServerPerHost}}
		}
		o = append(o, member{"policy", g.Policy}, member{"rules", rules})
	} else {
		o = append(o, member{"policies", []string{g.Policy}}, member{"metadata", obj{}})
	}
	if members == nil {
		members = []string{}
	}
	o = append(o, member{"members", members})
	if c.v.atLeast(mvGroupOwner) {
		o = append(o, member{"project_id", g.ProjectID}, member{"user_id", g.UserID})
	}
	return o
}

func groupNotFound(id string) *fault {
	return errNotFound("Instance group " + id + " could not be found.")
}

// createServerGroup is ServerGroupController.create. The group belongs
// to the caller's project and user. Berth has no quotas yet, so no
// "Quota exceeded, too many server groups." 403.
func (a *API) createServerGroup(c *reqCtx) (int, any, error) {
	b, _ := c.body.(obj).get("server_group")
	body := b.(obj)
	name, _ := body.get("name")
	g := &etcdschema.ServerGroup{UUID: uuid.NewString(), Name: name.(string),
		ProjectID: c.creds.ProjectID, UserID: c.creds.UserID, CreatedAt: time.Now().UTC()}
	if c.v.atLeast(mvGroupPolicy) {
		p, _ := body.get("policy")
		g.Policy = p.(string)
		if r, ok := body.get("rules"); ok {
			rules := r.(obj)
			if len(rules) > 0 && g.Policy != etcdschema.PolicyAntiAffinity {
				return 0, nil, errBadRequest("Only anti-affinity policy supports rules.")
			}
			if m, ok := rules.get("max_server_per_host"); ok {
				n, _ := pyInt(pyStr(m)) // the schema let only digits through
				g.Rules.MaxServerPerHost = int(n.Int64())
			}
		}
	} else {
		p, _ := body.get("policies")
		g.Policy = p.([]any)[0].(string)
	}
	var over *quotas.OverQuotaError
	if err := a.groups.Create(c.r.Context(), g); errors.As(err, &over) {
		return 0, nil, &fault{status: http.StatusForbidden, message: over.Message}
	} else if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, obj{{"server_group", groupView(c, g, nil)}}, nil
}

// groupsFilter is whose groups index lists: every project's for an
// admin asking all_projects (Nova looks at the parameter's presence, not
// its value), else the caller's project's only.
type groupsFilter struct {
	all     bool
	project string
}

// lists says whether f lists g. A caller without a project (a
// system-scoped token) owns no group, so its filter lists none, not
// every group or the ownerless ones.
func (f groupsFilter) lists(g *etcdschema.ServerGroup) bool {
	return f.all || f.project != "" && g.ProjectID == f.project
}

// groupsProjectFilter is ServerGroupController.index's choice: the
// caller's project, or every project for an admin asking all_projects
// (checked against index:all_projects too). A non-admin asking is
// answered its own groups, not refused, as Nova keeps its old behaviour.
func groupsProjectFilter(c *reqCtx, allProjects bool) (groupsFilter, *fault) {
	if allProjects && c.isAdmin() {
		if f := c.can(policyGroupIndexAll, c.creds.ProjectID); f != nil {
			return groupsFilter{}, f
		}
		return groupsFilter{all: true}, nil
	}
	return groupsFilter{project: c.creds.ProjectID}, nil
}

// listServerGroups is ServerGroupController.index, paged by limit and
// offset (common.limited).
func (a *API) listServerGroups(c *reqCtx) (int, any, error) {
	q := queryObj(c.r.URL.RawQuery)
	if e := schemaServerGroupsList(c.v).check(q, nil); e != nil {
		return 0, nil, errBadRequest(e.queryError())
	}
	_, all := q.get("all_projects")
	filter, f := groupsProjectFilter(c, all)
	if f != nil {
		return 0, nil, f
	}
	groups, err := a.groups.List(c.r.Context())
	if err != nil {
		return 0, nil, err
	}
	var visible []servergroups.Group
	for _, g := range groups {
		if filter.lists(g.ServerGroup) {
			visible = append(visible, g)
		}
	}
	offset, limit := 0, maxLimit
	if v, ok := param(q, "offset"); ok {
		if n, ok := pyInt(v); ok && n.IsInt64() {
			offset = int(min(n.Int64(), int64(len(visible))))
		}
	}
	if v, ok := param(q, "limit"); ok {
		if n, ok := pyInt(v); ok && n.IsInt64() && n.Int64() > 0 && n.Int64() < maxLimit {
			limit = int(n.Int64())
		}
	}
	visible = visible[offset:min(offset+limit, len(visible))]
	out := []obj{}
	for _, g := range visible {
		out = append(out, groupView(c, g.ServerGroup, g.Members))
	}
	return http.StatusOK, obj{{"server_groups", out}}, nil
}

// loadGroup reads the group of the path and checks p against its
// project, as Nova's show and delete do (404 before 403). Nova's lookup
// (_instance_group_get_query) filters by the caller's project unless
// the caller is an admin, so another project's group is not found, not
// forbidden: only a caller of the group's project can be refused by p.
func (a *API) loadGroup(c *reqCtx, p policy) (*servergroups.Group, error) {
	id := c.vars["id"]
	g, err := a.groups.Get(c.r.Context(), id)
	if errors.Is(err, servergroups.ErrNotFound) {
		return nil, groupNotFound(id)
	}
	if err != nil {
		return nil, err
	}
	if !c.isAdmin() && g.ProjectID != c.creds.ProjectID {
		return nil, groupNotFound(id)
	}
	if f := c.can(p, g.ProjectID); f != nil {
		return nil, f
	}
	return g, nil
}

// showServerGroup is ServerGroupController.show, with the members whose
// servers still exist.
func (a *API) showServerGroup(c *reqCtx) (int, any, error) {
	g, err := a.loadGroup(c, policyGroupShow)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, obj{{"server_group", groupView(c, g.ServerGroup, g.Members)}}, nil
}

// deleteServerGroup is ServerGroupController.delete (204). The members
// keep running, as in Nova.
func (a *API) deleteServerGroup(c *reqCtx) (int, any, error) {
	if _, err := a.loadGroup(c, policyGroupDelete); err != nil {
		return 0, nil, err
	}
	err := a.groups.Delete(c.r.Context(), c.vars["id"])
	if errors.Is(err, servergroups.ErrNotFound) {
		return 0, nil, groupNotFound(c.vars["id"])
	}
	if err != nil {
		return 0, nil, err
	}
	return http.StatusNoContent, nil, nil
}
