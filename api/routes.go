package api

import (
	"net/http"

	"github.com/gorilla/mux"
)

// route is one /v1 route: who may call it and what serves it. Every
// route has a policy (the zero one is refused by New), so a route added
// without deciding who may call it does not build into the table; the
// authorization matrix test then wants a row for it.
type route struct {
	method, path string
	policy       policy
	handle       http.HandlerFunc
}

// Policies of the routes Nova's API serves too, named as Nova names
// them (nova/policies/servers.py, server_groups.py, flavors, aggregates,
// services): servers and server groups are the caller's project's,
// flavors anyone's to read, the rest an admin's.
var (
	policyServerCreate = projectMemberOrAdmin("os_compute_api:servers:create")
	policyServerIndex  = projectReaderOrAdmin("os_compute_api:servers:index")
	policyServerAll    = adminOnly("os_compute_api:servers:index:get_all_tenants")
	policyServerShow   = projectReaderOrAdmin("os_compute_api:servers:show")
	policyServerDelete = projectMemberOrAdmin("os_compute_api:servers:delete")
	policyGroupCreate  = projectMemberOrAdmin("os_compute_api:os-server-groups:create")
	policyGroupIndex   = projectReaderOrAdmin("os_compute_api:os-server-groups:index")
	policyGroupShow    = projectReaderOrAdmin("os_compute_api:os-server-groups:show")
	policyGroupDelete  = projectMemberOrAdmin("os_compute_api:os-server-groups:delete")
)

// routeTable lists /v1 in mux's matching order (a literal segment
// before the {id} it would otherwise match).
func (s *Server) routeTable() []route {
	get, post, put, del := http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete
	agg := adminOnly("os_compute_api:os-aggregates")
	return []route{
		{post, "/v1/servers", policyServerCreate, s.createServers},
		{get, "/v1/servers", policyServerIndex, s.listServers},
		{get, "/v1/servers/detail", projectReaderOrAdmin("os_compute_api:servers:detail"), s.listServers},
		// Berth's own: server-sent events of servers' statuses (watch.go).
		{get, "/v1/servers/watch", projectReaderOrAdmin("berth:v1:servers:watch"), s.watchServers},
		{get, "/v1/servers/{id}", policyServerShow, s.showServer},
		{del, "/v1/servers/{id}", policyServerDelete, s.deleteServer},
		{get, "/v1/flavors", anyCaller("os_compute_api:flavors:index"), s.listFlavors},
		{get, "/v1/flavors/{name}", anyCaller("os_compute_api:flavors:show"), s.showFlavor},

		{post, "/v1/server-groups", policyGroupCreate, s.createServerGroup},
		{get, "/v1/server-groups", policyGroupIndex, s.listServerGroups},
		{get, "/v1/server-groups/{id}", policyGroupShow, s.showServerGroup},
		{del, "/v1/server-groups/{id}", policyGroupDelete, s.deleteServerGroup},

		{post, "/v1/os-aggregates", agg, s.createAggregate},
		{get, "/v1/os-aggregates", agg, s.listAggregates},
		{post, "/v1/os-aggregates/sync", adminOnly("berth:v1:aggregates:sync"), s.syncAggregates},
		{get, "/v1/os-aggregates/{id}", agg, s.showAggregate},
		{put, "/v1/os-aggregates/{id}", agg, s.updateAggregate},
		{del, "/v1/os-aggregates/{id}", agg, s.deleteAggregate},
		{post, "/v1/os-aggregates/{id}/action", agg, s.aggregateAction},

		// Berth's own admin extensions, which Nova's API has no route for.
		{get, "/v1/services", adminOnly("os_compute_api:os-services:list"), s.listServices},
		{put, "/v1/services/{host}", adminOnly("os_compute_api:os-services:update"), s.updateService},
		{get, "/v1/hosts", adminOnly("berth:v1:hosts"), s.listHosts},
		{post, "/v1/hosts/{host}/drain", adminOnly("berth:v1:hosts:drain:start"), s.startDrain},
		{get, "/v1/hosts/{host}/drain", adminOnly("berth:v1:hosts:drain:show"), s.showDrain},
		{del, "/v1/hosts/{host}/drain", adminOnly("berth:v1:hosts:drain:cancel"), s.cancelDrain},
		{get, "/v1/cells", adminOnly("berth:v1:cells:list"), s.listCells},
		{post, "/v1/cells", adminOnly("berth:v1:cells:create"), s.createCell},
		{post, "/v1/cells/discover_hosts", adminOnly("berth:v1:cells:discover_hosts"), s.discoverHosts},
		{get, "/v1/servers/{id}/selection", adminOnly("berth:v1:servers:selection"), s.showSelection},
	}
}

// addRoutes registers the table on r, each handler behind its route's
// policy, checked against the caller's own project (Nova's default
// target); handlers of a loaded resource check it again against the
// resource's project.
func (s *Server) addRoutes(r *mux.Router) {
	s.routes = s.routeTable()
	for _, rt := range s.routes {
		if rt.policy.rule == "" {
			panic("api route " + rt.method + " " + rt.path + " has no policy")
		}
		rt := rt
		r.HandleFunc(rt.path, func(w http.ResponseWriter, req *http.Request) {
			if can(w, req, rt.policy, caller(req).ProjectID) {
				rt.handle(w, req)
			}
		}).Methods(rt.method)
	}
}
