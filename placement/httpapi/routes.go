package httpapi

import (
	"net/http"

	"github.com/berth-project/berth/placement"
)

// route is one method of one path of the API, with the checks Placement's
// decorators make before its handler runs. serve makes them in
// Placement's order, which the conformance suite sees in its status
// codes (a 406 before a 403, a 415 before a 403, a 404 for a version
// below the route before anything else):
//
//  1. contentFirst: the body's media type (415), for the one handler
//     whose require_content wraps its version_handler;
//  2. the microversion: below minMinor (or above maxMinor) the route does
//     not exist (404), or with belowIs405 its method is not allowed (405);
//  3. accept: an explicit Accept header must allow JSON (406);
//  4. content: the body's media type must be application/json (415);
//  5. policy (403);
//  6. for handleProvider, the provider {uuid} must exist (404).
type route struct {
	method, path string
	// minMinor and maxMinor bound the microversions 1.minMinor to
	// 1.maxMinor the route serves; maxMinor 0 means no upper bound. Two
	// rows of one method and path split it by version, as Placement's
	// version_handler does.
	minMinor, maxMinor int
	belowIs405         bool
	accept             bool
	content            bool
	contentFirst       bool
	policy             policy
	// Exactly one of handle and handleProvider is set.
	handle         func(*reqCtx) error
	handleProvider func(*reqCtx, placement.ProviderRecord) error
}

// routes is the API, in the order Placement's handler lists each path's
// methods (a 405's Allow header).
func (s *API) routes() []route {
	return []route{
		{method: "GET", path: "/", accept: true, handle: s.home},

		{method: "GET", path: "/resource_classes", minMinor: 2, accept: true, policy: reader("placement:resource_classes:list"), handle: s.listResourceClasses},
		{method: "POST", path: "/resource_classes", minMinor: 2, content: true, policy: admin("placement:resource_classes:create"), handle: s.createResourceClass},
		{method: "GET", path: "/resource_classes/{name}", minMinor: 2, accept: true, policy: reader("placement:resource_classes:show"), handle: s.getResourceClass},
		{method: "PUT", path: "/resource_classes/{name}", minMinor: 2, maxMinor: 6, content: true, policy: admin("placement:resource_classes:update"), handle: s.updateResourceClass},
		{method: "PUT", path: "/resource_classes/{name}", minMinor: 7, policy: admin("placement:resource_classes:update"), handle: s.putResourceClass},
		{method: "DELETE", path: "/resource_classes/{name}", minMinor: 2, policy: admin("placement:resource_classes:delete"), handle: s.deleteResourceClass},

		{method: "GET", path: "/resource_providers", accept: true, policy: reader("placement:resource_providers:list"), handle: s.listResourceProviders},
		{method: "POST", path: "/resource_providers", content: true, policy: admin("placement:resource_providers:create"), handle: s.createResourceProvider},
		{method: "GET", path: "/resource_providers/{uuid}", accept: true, policy: reader("placement:resource_providers:show"), handleProvider: s.getResourceProvider},
		{method: "DELETE", path: "/resource_providers/{uuid}", policy: admin("placement:resource_providers:delete"), handle: s.deleteResourceProvider},
		{method: "PUT", path: "/resource_providers/{uuid}", content: true, policy: admin("placement:resource_providers:update"), handleProvider: s.updateResourceProvider},

		// The inventory GETs look the provider up themselves: their 404s
		// have words of their own.
		{method: "GET", path: "/resource_providers/{uuid}/inventories", accept: true, policy: reader("placement:resource_providers:inventories:list"), handle: s.getInventories},
		{method: "POST", path: "/resource_providers/{uuid}/inventories", content: true, policy: admin("placement:resource_providers:inventories:create"), handleProvider: s.createInventory},
		{method: "PUT", path: "/resource_providers/{uuid}/inventories", content: true, policy: admin("placement:resource_providers:inventories:update"), handleProvider: s.setInventories},
		{method: "DELETE", path: "/resource_providers/{uuid}/inventories", minMinor: 5, belowIs405: true, policy: admin("placement:resource_providers:inventories:delete"), handleProvider: s.deleteInventories},
		{method: "GET", path: "/resource_providers/{uuid}/inventories/{resource_class}", accept: true, policy: reader("placement:resource_providers:inventories:show"), handle: s.getInventory},
		{method: "PUT", path: "/resource_providers/{uuid}/inventories/{resource_class}", content: true, policy: admin("placement:resource_providers:inventories:update"), handleProvider: s.updateInventory},
		{method: "DELETE", path: "/resource_providers/{uuid}/inventories/{resource_class}", policy: admin("placement:resource_providers:inventories:delete"), handleProvider: s.deleteInventory},

		{method: "GET", path: "/resource_providers/{uuid}/usages", accept: true, policy: reader("placement:resource_providers:usages"), handle: s.providerUsages},

		{method: "GET", path: "/resource_providers/{uuid}/aggregates", minMinor: 1, accept: true, policy: reader("placement:resource_providers:aggregates:list"), handleProvider: s.getAggregates},
		// Placement's set_aggregates is require_content around
		// version_handler('1.1'): the media type is checked first.
		{method: "PUT", path: "/resource_providers/{uuid}/aggregates", minMinor: 1, contentFirst: true, policy: admin("placement:resource_providers:aggregates:update"), handleProvider: s.setAggregates},

		{method: "GET", path: "/resource_providers/{uuid}/allocations", accept: true, policy: reader("placement:resource_providers:allocations:list"), handle: s.providerAllocations},

		{method: "POST", path: "/allocations", minMinor: 13, content: true, policy: admin("placement:allocations:manage"), handle: s.postAllocations},
		{method: "GET", path: "/allocations/{consumer_uuid}", accept: true, policy: reader("placement:allocations:list"), handle: s.getAllocations},
		{method: "PUT", path: "/allocations/{consumer_uuid}", content: true, policy: admin("placement:allocations:update"), handle: s.putAllocations},
		{method: "DELETE", path: "/allocations/{consumer_uuid}", policy: admin("placement:allocations:delete"), handle: s.deleteAllocations},

		{method: "GET", path: "/allocation_candidates", minMinor: 10, accept: true, policy: reader("placement:allocation_candidates:list"), handle: s.allocationCandidates},

		{method: "GET", path: "/traits", minMinor: 6, accept: true, policy: reader("placement:traits:list"), handle: s.listTraits},
		{method: "GET", path: "/traits/{name}", minMinor: 6, accept: true, policy: reader("placement:traits:show"), handle: s.getTrait},
		{method: "PUT", path: "/traits/{name}", minMinor: 6, policy: admin("placement:traits:update"), handle: s.putTrait},
		{method: "DELETE", path: "/traits/{name}", minMinor: 6, policy: admin("placement:traits:delete"), handle: s.deleteTrait},

		{method: "GET", path: "/resource_providers/{uuid}/traits", minMinor: 6, accept: true, policy: reader("placement:resource_providers:traits:list"), handle: s.providerTraits},
		{method: "PUT", path: "/resource_providers/{uuid}/traits", minMinor: 6, content: true, policy: admin("placement:resource_providers:traits:update"), handleProvider: s.setProviderTraits},
		{method: "DELETE", path: "/resource_providers/{uuid}/traits", minMinor: 6, policy: admin("placement:resource_providers:traits:delete"), handleProvider: s.deleteProviderTraits},

		{method: "GET", path: "/usages", minMinor: 9, accept: true, policy: projectReader("placement:usages"), handle: s.totalUsages},

		{method: "POST", path: "/reshaper", minMinor: 30, content: true, policy: admin("placement:reshaper:reshape"), handle: s.reshape},
	}
}

// serves says whether the route serves microversion 1.minor.
func (rt *route) serves(minor int) bool {
	return minor >= rt.minMinor && (rt.maxMinor == 0 || minor <= rt.maxMinor)
}

// serve answers c with the first of the method's rows (one path, one
// method) that serves c's microversion, after the checks route lists.
func (s *API) serve(c *reqCtx, rows []*route) error {
	if rows[0].contentFirst {
		if err := c.requireContent(); err != nil {
			return err
		}
	}
	var rt *route
	for _, r := range rows {
		if r.serves(c.mv) {
			rt = r
			break
		}
	}
	if rt == nil {
		// Placement's version_handler: no handler for this version.
		if rows[0].belowIs405 {
			return &httpError{status: http.StatusMethodNotAllowed, detail: "The method specified is not allowed for this resource."}
		}
		return errNotFound("")
	}
	if rt.accept {
		if err := c.checkAccept(); err != nil {
			return err
		}
	}
	if rt.content && !rt.contentFirst {
		if err := c.requireContent(); err != nil {
			return err
		}
	}
	if rt.policy != nil {
		if err := rt.policy(c); err != nil {
			return err
		}
	}
	if rt.handleProvider != nil {
		rp, err := s.lookupProvider(c, c.vars["uuid"])
		if err != nil {
			return err
		}
		return rt.handleProvider(c, rp)
	}
	return rt.handle(c)
}

// policy is one of Placement's policy rules: nil when the caller may run
// the route, else its 403.
type policy func(*reqCtx) error

// admin is a rule whose default is admin only.
func admin(rule string) policy {
	return func(c *reqCtx) error { return c.authorize(c.auth.admin(), rule) }
}

// reader is a rule whose default is a system reader (or admin).
func reader(rule string) policy {
	return func(c *reqCtx) error { return c.authorize(c.auth.systemReader(), rule) }
}

// projectReader is a rule that a reader of the project the query's
// project_id names also passes (GET /usages).
func projectReader(rule string) policy {
	return func(c *reqCtx) error {
		project := c.query().Get("project_id")
		return c.authorize(c.auth.projectReader(project) || c.auth.systemReader(), rule)
	}
}
