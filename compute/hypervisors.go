package compute

import (
	"math/big"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/hosts"
)

// Nova's os-hypervisors (nova/api/openstack/compute/hypervisors.py). A
// Berth host is one compute node: its id is the service's integer id
// before 2.53 and its placement provider's uuid from 2.53 (Nova's
// compute node uuid is its provider's too). The figures come from the
// provider's inventories and usages; Berth knows no hypervisor type,
// version, host IP, CPU info or uptime (see hypervisorView).

// hypervisorID is a node's id at c's version.
func hypervisorID(c *reqCtx, s *serviceRecord) any {
	if c.v.atLeast(mvServiceUUIDs) {
		return s.h.Service.ProviderUUID
	}
	return s.id
}

func serviceID(c *reqCtx, s *serviceRecord) any {
	if c.v.atLeast(mvServiceUUIDs) {
		return s.uuid
	}
	return s.id
}

// hypervisorView is _view_hypervisor.
func (a *API) hypervisorView(c *reqCtx, s *serviceRecord, p *etcdschema.Provider, detail bool, servers []hosts.Server, withServers bool) obj {
	status, state := "enabled", "down"
	if s.disabled {
		status = "disabled"
	}
	if s.up {
		state = "up"
	}
	o := obj{{"id", hypervisorID(c, s)}, {"hypervisor_hostname", s.host}, {"state", state}, {"status", status}}
	if detail {
		// Berth's drivers report no hypervisor type or version and the
		// agent no address: "berth", 0 and null.
		o = append(o, member{"hypervisor_type", "berth"}, member{"hypervisor_version", 0}, member{"host_ip", nil},
			member{"service", obj{{"id", serviceID(c, s)}, {"host", s.host}, {"disabled_reason", orNull(s.reason)}}})
		if !c.v.atLeast(88) {
			f := nodeFigures(s, p)
			o = append(o, member{"vcpus", f.vcpus}, member{"memory_mb", f.memoryMB}, member{"local_gb", f.localGB},
				member{"vcpus_used", f.vcpusUsed}, member{"memory_mb_used", f.memoryMBUsed}, member{"local_gb_used", f.localGBUsed},
				member{"free_ram_mb", f.memoryMB - f.memoryMBUsed}, member{"free_disk_gb", f.localGB - f.localGBUsed},
				member{"current_workload", f.workload}, member{"running_vms", f.running},
				member{"disk_available_least", f.localGB - f.localGBUsed})
			if c.v.atLeast(28) {
				o = append(o, member{"cpu_info", obj{}})
			} else {
				o = append(o, member{"cpu_info", ""})
			}
		} else {
			// No driver of Berth's reports the host's uptime.
			o = append(o, member{"uptime", nil})
		}
	}
	if len(servers) > 0 {
		list := make([]obj, len(servers))
		for i, sv := range servers {
			list[i] = obj{{"name", sv.Name}, {"uuid", sv.UUID}}
		}
		o = append(o, member{"servers", list})
	} else if withServers && c.v.atLeast(75) {
		o = append(o, member{"servers", []obj{}})
	}
	return o
}

// figures are a compute node's columns as Nova's resource tracker keeps
// them: totals from the inventories, used including the reserved amount
// (Nova counts reserved_host_memory_mb and _disk_mb as used).
type figures struct {
	vcpus, memoryMB, localGB, vcpusUsed, memoryMBUsed, localGBUsed int64
	workload, running                                              int64
}

func nodeFigures(s *serviceRecord, p *etcdschema.Provider) figures {
	f := figures{workload: int64(s.h.Builds), running: int64(len(s.h.Instances))}
	if p == nil {
		return f
	}
	inv := func(rc string) (total, used int64) {
		i, ok := p.Inventories[rc]
		if !ok {
			return 0, 0
		}
		return i.Total, p.Usages[rc] + i.Reserved
	}
	f.vcpus, f.vcpusUsed = inv("VCPU")
	f.vcpusUsed = p.Usages["VCPU"] // Nova does not count reserved vCPUs as used
	f.memoryMB, f.memoryMBUsed = inv("MEMORY_MB")
	f.localGB, f.localGBUsed = inv("DISK_GB")
	return f
}

// hypervisorQuery validates the list query per version and reads Nova's
// parameters from it.
type hypervisorQuery struct {
	pattern     *string
	withServers bool
	limit       int
	marker      *string
	paging      bool // limit given or a marker
}

func parseHypervisorQuery(c *reqCtx) (*hypervisorQuery, error) {
	q := queryObj(c.r.URL.RawQuery)
	out := &hypervisorQuery{limit: maxLimit}
	if !c.v.atLeast(33) {
		return out, nil
	}
	s := schemaHypervisorsQuery2_33
	if c.v.atLeast(mvServiceUUIDs) {
		s = schemaHypervisorsQuery2_53
	}
	if e := s.check(q, nil); e != nil {
		return nil, errBadRequest(e.queryError())
	}
	if v, ok := param(q, "limit"); ok {
		n, _ := pyInt(v)
		if n != nil && n.Cmp(big.NewInt(maxLimit)) < 0 {
			out.limit = int(n.Int64())
		}
		out.paging = true
	}
	if v, ok := param(q, "marker"); ok {
		out.marker, out.paging = &v, true
	}
	if c.v.atLeast(mvServiceUUIDs) {
		if v, ok := param(q, "hypervisor_hostname_pattern"); ok {
			out.pattern = &v
		}
		if v, ok := param(q, "with_servers"); ok {
			out.withServers = pyTrue(v)
		}
	}
	return out, nil
}

func (a *API) listHypervisors(c *reqCtx) (int, any, error)       { return a.hypervisors(c, false) }
func (a *API) listHypervisorsDetail(c *reqCtx) (int, any, error) { return a.hypervisors(c, true) }

// hypervisors is _get_hypervisors.
func (a *API) hypervisors(c *reqCtx, detail bool) (int, any, error) {
	q, err := parseHypervisorQuery(c)
	if err != nil {
		return 0, nil, err
	}
	snap, err := a.readServices(c.r.Context(), true)
	if err != nil {
		return 0, nil, err
	}
	nodes := snap.computes()
	links := c.v.atLeast(33)
	if q.pattern != nil {
		if q.paging {
			return 0, nil, errBadRequest("The server could not comply with the request since it is either malformed or otherwise incorrect.")
		}
		links = false
		if nodes = matching(nodes, *q.pattern); len(nodes) == 0 {
			return 0, nil, errNotFound("No hypervisor matching '" + *q.pattern + "' could be found.")
		}
	} else {
		if q.marker != nil {
			at := -1
			for i, s := range nodes {
				if pyStr(hypervisorID(c, s)) == *q.marker {
					at = i
				}
			}
			if at < 0 {
				return 0, nil, errBadRequest("marker [" + *q.marker + "] not found")
			}
			nodes = nodes[at+1:]
		}
		if len(nodes) > q.limit {
			nodes = nodes[:q.limit]
		}
	}
	list := make([]obj, 0, len(nodes))
	for _, s := range nodes {
		var servers []hosts.Server
		if q.withServers {
			if servers, err = a.hosts.Servers(c.r.Context(), s.h); err != nil {
				return 0, nil, err
			}
		}
		list = append(list, a.hypervisorView(c, s, snap.providers[s.h.Service.ProviderUUID], detail, servers, q.withServers))
	}
	out := obj{{"hypervisors", list}}
	if links && q.limit > 0 && len(nodes) == q.limit && len(nodes) > 0 {
		coll := "os-hypervisors"
		if detail {
			coll = "os-hypervisors/detail"
		}
		out = append(out, member{"hypervisors_links", nextLink(c, coll, pyStr(hypervisorID(c, nodes[len(nodes)-1])))})
	}
	return http.StatusOK, out, nil
}

// nextLink is ViewBuilder._get_collection_links' "next" link with the
// query's parameters, sorted, and the marker last.
func nextLink(c *reqCtx, coll, marker string) []obj {
	q := queryObj(c.r.URL.RawQuery)
	var parts []string
	keys := []string{}
	params := map[string]string{}
	for _, m := range q {
		vals := m.v.([]any)
		params[m.k] = vals[len(vals)-1].(string)
		if m.k != "marker" {
			keys = append(keys, m.k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		parts = append(parts, url.QueryEscape(k)+"="+url.QueryEscape(params[k]))
	}
	parts = append(parts, "marker="+url.QueryEscape(marker))
	return []obj{{{"rel", "next"}, {"href", urlJoin(c.baseURL, coll) + "?" + strings.Join(parts, "&")}}}
}

// matching is compute_node_search_by_hypervisor: hostname LIKE %pattern%.
func matching(nodes []*serviceRecord, pattern string) []*serviceRecord {
	var out []*serviceRecord
	for _, s := range nodes {
		if strings.Contains(s.host, pattern) {
			out = append(out, s)
		}
	}
	return out
}

// findHypervisor is _validate_id and compute_node_get: nil, nil when
// there is no such node.
func (a *API) findHypervisor(c *reqCtx, id string) (*serviceRecord, *hostSnapshot, error) {
	notFound := errNotFound("Hypervisor with ID '" + id + "' could not be found.")
	if c.v.atLeast(mvServiceUUIDs) {
		if !isUUIDLike(id) {
			return nil, nil, errBadRequest("Invalid uuid " + id)
		}
	} else if _, ok := pyInt(id); !ok {
		return nil, nil, notFound
	}
	snap, err := a.readServices(c.r.Context(), true)
	if err != nil {
		return nil, nil, err
	}
	for _, s := range snap.computes() {
		if sameID(hypervisorID(c, s), id) {
			return s, snap, nil
		}
	}
	return nil, nil, notFound
}

// sameID compares a node's id with one from a path: integers as numbers
// (Nova's int()), uuids in any case.
func sameID(have any, id string) bool {
	if n, ok := have.(int64); ok {
		v, ok := pyInt(id)
		return ok && v.Cmp(big.NewInt(n)) == 0
	}
	return strings.EqualFold(have.(string), normalizeUUID(id))
}

func (a *API) showHypervisor(c *reqCtx) (int, any, error) {
	withServers := false
	if c.v.atLeast(mvServiceUUIDs) {
		q := queryObj(c.r.URL.RawQuery)
		if e := schemaHypervisorShowQuery2_53.check(q, nil); e != nil {
			return 0, nil, errBadRequest(e.queryError())
		}
		if v, ok := param(q, "with_servers"); ok {
			withServers = pyTrue(v)
		}
	}
	s, snap, err := a.findHypervisor(c, c.vars["id"])
	if err != nil {
		return 0, nil, err
	}
	var servers []hosts.Server
	if withServers {
		if servers, err = a.hosts.Servers(c.r.Context(), s.h); err != nil {
			return 0, nil, err
		}
	}
	return http.StatusOK, obj{{"hypervisor", a.hypervisorView(c, s, snap.providers[s.h.Service.ProviderUUID], true, servers, withServers)}}, nil
}

// hypervisorUptime (before 2.88) asks the host's driver for its uptime:
// Berth's drivers have none, so an up host answers as Nova's fake driver
// does (501) and a down one as an unreachable compute service (400).
func (a *API) hypervisorUptime(c *reqCtx) (int, any, error) {
	s, _, err := a.findHypervisor(c, c.vars["id"])
	if err != nil {
		return 0, nil, err
	}
	if !s.up {
		return 0, nil, errBadRequest("Compute service of " + s.host + " is unavailable at this time.")
	}
	return 0, nil, &fault{status: http.StatusNotImplemented, message: "The requested functionality is not supported."}
}

// searchHypervisors and hypervisorServers are the routes 2.53 replaced by
// query parameters.
func (a *API) searchHypervisors(c *reqCtx) (int, any, error) { return a.search(c, false) }
func (a *API) hypervisorServers(c *reqCtx) (int, any, error) { return a.search(c, true) }

func (a *API) search(c *reqCtx, withServers bool) (int, any, error) {
	pattern := c.vars["id"]
	snap, err := a.readServices(c.r.Context(), true)
	if err != nil {
		return 0, nil, err
	}
	nodes := matching(snap.computes(), pattern)
	if len(nodes) == 0 {
		return 0, nil, errNotFound("No hypervisor matching '" + pattern + "' could be found.")
	}
	list := make([]obj, 0, len(nodes))
	for _, s := range nodes {
		var servers []hosts.Server
		if withServers {
			if servers, err = a.hosts.Servers(c.r.Context(), s.h); err != nil {
				return 0, nil, err
			}
		}
		list = append(list, a.hypervisorView(c, s, nil, false, servers, false))
	}
	return http.StatusOK, obj{{"hypervisors", list}}, nil
}

// hypervisorStatistics (before 2.88) is compute_node_statistics: the
// sums over the nodes of enabled nova-compute services.
func (a *API) hypervisorStatistics(c *reqCtx) (int, any, error) {
	snap, err := a.readServices(c.r.Context(), true)
	if err != nil {
		return 0, nil, err
	}
	var sum figures
	count := 0
	for _, s := range snap.computes() {
		if s.disabled {
			continue
		}
		count++
		f := nodeFigures(s, snap.providers[s.h.Service.ProviderUUID])
		sum.vcpus += f.vcpus
		sum.memoryMB += f.memoryMB
		sum.localGB += f.localGB
		sum.vcpusUsed += f.vcpusUsed
		sum.memoryMBUsed += f.memoryMBUsed
		sum.localGBUsed += f.localGBUsed
		sum.workload += f.workload
		sum.running += f.running
	}
	return http.StatusOK, obj{{"hypervisor_statistics", obj{{"count", count}, {"vcpus", sum.vcpus},
		{"memory_mb", sum.memoryMB}, {"local_gb", sum.localGB}, {"vcpus_used", sum.vcpusUsed},
		{"memory_mb_used", sum.memoryMBUsed}, {"local_gb_used", sum.localGBUsed},
		{"free_ram_mb", sum.memoryMB - sum.memoryMBUsed}, {"free_disk_gb", sum.localGB - sum.localGBUsed},
		{"current_workload", sum.workload}, {"running_vms", sum.running},
		{"disk_available_least", sum.localGB - sum.localGBUsed}}}}, nil
}
