package compute

import (
	"net/http"
	"strings"
)

// route is one method of one path below /v2.1, as Nova's ROUTE_LIST
// (nova/api/openstack/compute/routes.py) and the controller's decorators
// declare it: the microversions it serves (@api_version; outside them
// Nova answers 404), the body's schema for a version (@validation.schema;
// nil: none), the policy rule the handler checks (context.can), and the
// handler. A POST .../action route instead names its actions by the
// body's one key (@wsgi.action), each a route of its own.
type route struct {
	method, path string
	// segs is path split at "/", once (New), for match.
	segs []string
	// minMinor and maxMinor bound the microversions 2.minMinor to
	// 2.maxMinor served; 0 means no bound.
	minMinor, maxMinor int
	schema             func(version) schema
	policy             policy
	handle             func(*reqCtx) (status int, body any, err error)
	actions            map[string]*route
}

// policy is the name of one of Nova's policy rules (nova/policies) with
// its default check_str under the new defaults (enforce_new_defaults):
// ADMIN, PROJECT_READER_OR_ADMIN or PROJECT_MEMBER_OR_ADMIN. The zero
// policy is a route whose handler checks no rule (flavors' index, detail
// and show: anyone with a valid token may list flavors).
//
// A route's policy is checked by serveV21 against the caller's own
// project (Nova's default target, {'project_id': context.project_id});
// a handler that loads a resource owned by a project checks again with
// reqCtx.can and the owner, as Nova's handlers pass target=instance.
type policy struct {
	rule string
	kind policyKind
}

// policyKind is a default check_str of nova/policies/base.py.
type policyKind uint8

const (
	anyone        policyKind = iota // no rule: any authenticated caller
	admin                           // ADMIN: role:admin
	projectReader                   // PROJECT_READER_OR_ADMIN
	projectMember                   // PROJECT_MEMBER_OR_ADMIN
)

func adminOnly(rule string) policy            { return policy{rule: rule, kind: admin} }
func projectReaderOrAdmin(rule string) policy { return policy{rule: rule, kind: projectReader} }
func projectMemberOrAdmin(rule string) policy { return policy{rule: rule, kind: projectMember} }

func (rt *route) serves(v version) bool {
	return (rt.minMinor == 0 || v.minor >= rt.minMinor) && (rt.maxMinor == 0 || v.minor <= rt.maxMinor)
}

// since returns the schema from 2.minor on, before with earlier
// versions; either may be nil.
func since(minor int, before, after schema) func(version) schema {
	return func(v version) schema {
		if v.atLeast(minor) {
			return after
		}
		return before
	}
}

func always(s schema) func(version) schema { return func(version) schema { return s } }

// routeTable is the API, in ROUTE_LIST's order: a path matches the first
// row whose template fits (so /flavors/detail before /flavors/{id}).
func (a *API) routeTable() []route {
	return []route{
		{method: "GET", path: "/", handle: a.showVersion},
		{method: "GET", path: "/versions/{id}", handle: a.showVersion},

		{method: "GET", path: "/flavors", handle: a.listFlavors},
		{method: "POST", path: "/flavors", schema: since(55, schemaFlavorCreate, schemaFlavorCreate2_55),
			policy: adminOnly("os_compute_api:os-flavor-manage:create"), handle: a.createFlavor},
		{method: "GET", path: "/flavors/detail", handle: a.listFlavorsDetail},
		{method: "GET", path: "/flavors/{id}", handle: a.showFlavor},
		{method: "PUT", path: "/flavors/{id}", minMinor: 55, schema: always(schemaFlavorUpdate2_55),
			policy: adminOnly("os_compute_api:os-flavor-manage:update"), handle: a.updateFlavor},
		{method: "DELETE", path: "/flavors/{id}", policy: adminOnly("os_compute_api:os-flavor-manage:delete"), handle: a.deleteFlavor},
		{method: "POST", path: "/flavors/{id}/action", actions: map[string]*route{
			"addTenantAccess": {schema: always(schemaAddTenantAccess),
				policy: adminOnly("os_compute_api:os-flavor-access:add_tenant_access"), handle: a.addTenantAccess},
			"removeTenantAccess": {schema: always(schemaRemoveTenantAccess),
				policy: adminOnly("os_compute_api:os-flavor-access:remove_tenant_access"), handle: a.removeTenantAccess},
		}},
		{method: "GET", path: "/flavors/{flavor_id}/os-extra_specs", policy: projectReaderOrAdmin("os_compute_api:os-flavor-extra-specs:index"), handle: a.listExtraSpecs},
		{method: "POST", path: "/flavors/{flavor_id}/os-extra_specs", schema: always(schemaExtraSpecsCreate),
			policy: adminOnly("os_compute_api:os-flavor-extra-specs:create"), handle: a.createExtraSpecs},
		{method: "GET", path: "/flavors/{flavor_id}/os-extra_specs/{id}", policy: projectReaderOrAdmin("os_compute_api:os-flavor-extra-specs:show"), handle: a.showExtraSpec},
		{method: "PUT", path: "/flavors/{flavor_id}/os-extra_specs/{id}", schema: always(schemaExtraSpecsUpdate),
			policy: adminOnly("os_compute_api:os-flavor-extra-specs:update"), handle: a.updateExtraSpec},
		{method: "DELETE", path: "/flavors/{flavor_id}/os-extra_specs/{id}", policy: adminOnly("os_compute_api:os-flavor-extra-specs:delete"), handle: a.deleteExtraSpec},
		{method: "GET", path: "/flavors/{flavor_id}/os-flavor-access", policy: adminOnly("os_compute_api:os-flavor-access"), handle: a.listFlavorAccess},

		// limits, os-aggregates, os-server-groups (aggregates.go,
		// server_groups.go, limits.go).
		{method: "GET", path: "/limits", handle: a.showLimits},
		{method: "GET", path: "/os-aggregates", policy: adminOnly("os_compute_api:os-aggregates:index"), handle: a.listAggregates},
		{method: "POST", path: "/os-aggregates", schema: always(schemaAggregateCreate),
			policy: adminOnly("os_compute_api:os-aggregates:create"), handle: a.createAggregate},
		{method: "GET", path: "/os-aggregates/{id}", policy: adminOnly("os_compute_api:os-aggregates:show"), handle: a.showAggregate},
		{method: "PUT", path: "/os-aggregates/{id}", schema: always(schemaAggregateUpdate),
			policy: adminOnly("os_compute_api:os-aggregates:update"), handle: a.updateAggregate},
		{method: "DELETE", path: "/os-aggregates/{id}", policy: adminOnly("os_compute_api:os-aggregates:delete"), handle: a.deleteAggregate},
		{method: "POST", path: "/os-aggregates/{id}/action", actions: map[string]*route{
			"add_host": {schema: always(schemaAggregateAddHost),
				policy: adminOnly("os_compute_api:os-aggregates:add_host"), handle: a.addAggregateHost},
			"remove_host": {schema: always(schemaAggregateRemoveHost),
				policy: adminOnly("os_compute_api:os-aggregates:remove_host"), handle: a.removeAggregateHost},
			"set_metadata": {schema: always(schemaAggregateSetMetadata),
				policy: adminOnly("os_compute_api:os-aggregates:set_metadata"), handle: a.setAggregateMetadata},
		}},
		{method: "GET", path: "/os-server-groups", policy: policyGroupIndex, handle: a.listServerGroups},
		{method: "POST", path: "/os-server-groups",
			schema: func(v version) schema {
				switch {
				case v.atLeast(mvGroupPolicy):
					return schemaServerGroupCreate2_64
				case v.atLeast(mvSoftPolicy):
					return schemaServerGroupCreate2_15
				}
				return schemaServerGroupCreate
			},
			policy: policyGroupCreate, handle: a.createServerGroup},
		// show and delete check their rule against the group's project
		// once loaded (loadGroup), after a 404, as Nova does.
		{method: "GET", path: "/os-server-groups/{id}", handle: a.showServerGroup},
		{method: "DELETE", path: "/os-server-groups/{id}", handle: a.deleteServerGroup},

		// os-availability-zone, os-hypervisors and os-services, over
		// package hosts (availability_zones.go, hypervisors.go, services.go).
		{method: "GET", path: "/os-availability-zone", policy: policy{rule: "os_compute_api:os-availability-zone:list"}, handle: a.listAvailabilityZones},
		{method: "GET", path: "/os-availability-zone/detail", policy: adminOnly("os_compute_api:os-availability-zone:detail"), handle: a.listAvailabilityZonesDetail},
		{method: "GET", path: "/os-hypervisors", policy: adminOnly("os_compute_api:os-hypervisors:list"), handle: a.listHypervisors},
		{method: "GET", path: "/os-hypervisors/detail", policy: adminOnly("os_compute_api:os-hypervisors:list-detail"), handle: a.listHypervisorsDetail},
		{method: "GET", path: "/os-hypervisors/statistics", maxMinor: 87, policy: adminOnly("os_compute_api:os-hypervisors:statistics"), handle: a.hypervisorStatistics},
		{method: "GET", path: "/os-hypervisors/{id}", policy: adminOnly("os_compute_api:os-hypervisors:show"), handle: a.showHypervisor},
		{method: "GET", path: "/os-hypervisors/{id}/search", maxMinor: 52, policy: adminOnly("os_compute_api:os-hypervisors:search"), handle: a.searchHypervisors},
		{method: "GET", path: "/os-hypervisors/{id}/servers", maxMinor: 52, policy: adminOnly("os_compute_api:os-hypervisors:servers"), handle: a.hypervisorServers},
		{method: "GET", path: "/os-hypervisors/{id}/uptime", maxMinor: 87, policy: adminOnly("os_compute_api:os-hypervisors:uptime"), handle: a.hypervisorUptime},
		// os-quota-sets (quota_sets.go).
		{method: "GET", path: "/os-quota-sets/{id}", policy: policyQuotaShow, handle: a.showQuotaSet},
		{method: "PUT", path: "/os-quota-sets/{id}", schema: schemaQuotaUpdate, policy: policyQuotaUpdate, handle: a.updateQuotaSet},
		{method: "DELETE", path: "/os-quota-sets/{id}", policy: policyQuotaDelete, handle: a.deleteQuotaSet},
		{method: "GET", path: "/os-quota-sets/{id}/detail", policy: policyQuotaDetail, handle: a.showQuotaDetail},
		{method: "GET", path: "/os-quota-sets/{id}/defaults", policy: policyQuotaDefaults, handle: a.showQuotaDefaults},
		{method: "GET", path: "/os-services", policy: adminOnly("os_compute_api:os-services:list"), handle: a.listServices},
		{method: "PUT", path: "/os-services/{id}", schema: serviceUpdateSchema, policy: adminOnly("os_compute_api:os-services:update"), handle: a.updateService},
		{method: "DELETE", path: "/os-services/{id}", policy: adminOnly("os_compute_api:os-services:delete"), handle: a.deleteService},

		// servers and os-instance-actions (servers*.go, instance_actions.go).
		// Index and detail check their rule against the caller's project,
		// as Nova's context.can without a target does. Create checks
		// os_compute_api:servers:create where Nova does, after the
		// min_count check (createServer); show, delete and the instance
		// actions check theirs against the server's project once loaded
		// (lookupServer), after Nova's project-scoped lookup's 404.
		{method: "GET", path: "/servers", policy: projectReaderOrAdmin("os_compute_api:servers:index"), handle: a.listServers},
		{method: "POST", path: "/servers", schema: serverCreate, handle: a.createServer},
		{method: "GET", path: "/servers/detail", policy: projectReaderOrAdmin("os_compute_api:servers:detail"), handle: a.listServersDetail},
		{method: "GET", path: "/servers/{id}", handle: a.showServer},
		{method: "DELETE", path: "/servers/{id}", handle: a.deleteServer},
		// The cold moves (server_moves.go): each action checks its rule
		// against the server's project once loaded (lookupServer).
		{method: "POST", path: "/servers/{id}/action", actions: map[string]*route{
			"resize":        {schema: always(schemaResize), handle: a.resizeServer},
			"confirmResize": {handle: a.confirmResize},
			"revertResize":  {handle: a.revertResize},
			"migrate":       {schema: since(mvMigrateHost, nil, schemaMigrate2_56), handle: a.migrateServer},
			// The live migration (server_live_migrate.go).
			"os-migrateLive": {schema: migrateLiveSchema, handle: a.migrateLive},
			// evacuate (server_evacuate.go), checked once loaded.
			"evacuate": {schema: evacuateSchema, handle: a.evacuateServer},
			// Shelving (server_shelve.go).
			"shelve":        {handle: a.shelveServer},
			"shelveOffload": {handle: a.shelveOffloadServer},
			"unshelve":      {schema: unshelveSchema, handle: a.unshelveServer},
			// os-resetState (server_reset_state.go), checked once loaded.
			"os-resetState": {schema: always(schemaResetState), handle: a.resetServerState},
		}},
		{method: "GET", path: "/servers/{server_id}/migrations", minMinor: mvMigrationType, handle: a.listServerMigrations},
		{method: "GET", path: "/servers/{server_id}/migrations/{id}", minMinor: mvMigrationType, handle: a.showServerMigration},
		{method: "DELETE", path: "/servers/{server_id}/migrations/{id}", minMinor: 24, handle: a.abortServerMigration},
		{method: "POST", path: "/servers/{server_id}/migrations/{id}/action", actions: map[string]*route{
			"force_complete": {minMinor: mvForceComplete, schema: always(schemaForceComplete), handle: a.forceCompleteMigration},
		}},
		// os-migrations (migrations.go); ROUTE_LIST has it among the
		// os-* resources, kept here with the moves it lists.
		{method: "GET", path: "/os-migrations", policy: adminOnly("os_compute_api:os-migrations:index"), handle: a.listMigrations},
		{method: "GET", path: "/servers/{server_id}/os-instance-actions", handle: a.listInstanceActions},
		{method: "GET", path: "/servers/{server_id}/os-instance-actions/{id}", handle: a.showInstanceAction},
	}
}

// match finds the route for method and path (below /v2.1) as the routes
// Mapper does: the first row whose template and method fit. Each
// {name} takes one non-empty segment. Like Nova's ProjectMapper, every
// row is also served below a project id ("/{project_id}/servers"; the
// version document at "/{project_id}"), tried before the bare form;
// the id, returned as vars["project_id"], must be hex digits and dashes,
// as the Mapper's requirement says, and serveV21 checks it is the
// caller's.
func (a *API) match(method, path string) (*route, map[string]string) {
	segs := strings.Split(path, "/")
	var below []string // path without a leading project id segment
	if len(segs) >= 2 && isProjectIDToken(segs[1]) {
		below = append([]string{""}, segs[2:]...)
		if len(below) == 1 {
			below = append(below, "") // "/{project_id}" is "/"
		}
	}
	for i := range a.routes {
		rt := &a.routes[i]
		if rt.method != method {
			continue
		}
		if below != nil {
			if vars, ok := matchTemplate(rt.segs, below); ok {
				if vars == nil {
					vars = make(map[string]string, 1)
				}
				vars["project_id"] = segs[1]
				return rt, vars
			}
		}
		if vars, ok := matchTemplate(rt.segs, segs); ok {
			return rt, vars
		}
	}
	return nil, nil
}

// isProjectIDToken is the Mapper's requirement on {project_id}:
// [0-9a-f-]+ (so "servers" or "os-services" are never taken for one).
func isProjectIDToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c == '-') {
			return false
		}
	}
	return true
}

// matchTemplate matches segs against a route's template segments; the
// variables map is nil for a template without any (it is built only for
// a match: a request tries many routes before its own).
func matchTemplate(tmpl, segs []string) (map[string]string, bool) {
	if len(tmpl) != len(segs) {
		return nil, false
	}
	n := 0
	for i, t := range tmpl {
		if isTemplateVar(t) {
			if segs[i] == "" {
				return nil, false
			}
			n++
			continue
		}
		if t != segs[i] {
			return nil, false
		}
	}
	if n == 0 {
		return nil, true
	}
	vars := make(map[string]string, n)
	for i, t := range tmpl {
		if isTemplateVar(t) {
			vars[t[1:len(t)-1]] = segs[i]
		}
	}
	return vars, true
}

// isTemplateVar says whether a template segment is a variable, {name}.
func isTemplateVar(t string) bool { return strings.HasPrefix(t, "{") && strings.HasSuffix(t, "}") }

// showVersion is versionsV21.VersionsController.show: v2.1's document
// (any other id is 404).
func (a *API) showVersion(c *reqCtx) (int, any, error) {
	if id, ok := c.vars["id"]; ok && id != "v2.0" && id != "v2.1" {
		return 0, nil, errNotFoundPlain()
	}
	if c.vars["id"] == "v2.0" {
		info := versionInfo("v2.0")
		for i := range info {
			if info[i].k == "links" {
				info[i].v = []obj{{{"rel", "self"}, {"href", strings.TrimRight(c.baseURL, "/") + "/"}}, describedBy()}
			}
		}
		return http.StatusOK, obj{{"version", info}}, nil
	}
	return http.StatusOK, versionV21(c.baseURL), nil
}
