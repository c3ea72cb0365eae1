package compute

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/servers"
)

// The servers resource: nova/api/openstack/compute/servers.py over
// package servers (the operations Berth's /v1 shares).

// SetPlacement gives the API the placement a server delete frees the
// claims of hostless servers through.
func (a *API) SetPlacement(p servers.Allocations) { a.servers.SetPlacement(p) }

// SetDefaultAvailabilityZone sets the zone of hosts in no AZ aggregate
// (Nova's default_availability_zone, "nova" unless set).
func (a *API) SetDefaultAvailabilityZone(az string) { a.servers.SetDefaultAvailabilityZone(az) }

func instanceNotFound(id string) *fault {
	return errNotFound("Instance " + id + " could not be found.")
}

// viewOptsFor answers the policies a view depends on for the caller
// (Nova asks them per request in detail, per server in show).
func (a *API) viewOptsFor(c *reqCtx, owner string) viewOpts {
	o := viewOpts{
		extraSpecs:   c.v.atLeast(mvEmbeddedFlavor) && c.can(adminOnly("os_compute_api:servers:show:flavor-extra-specs"), owner) == nil,
		extendedAttr: c.can(adminOnly("os_compute_api:os-extended-server-attributes"), owner) == nil,
		isAdmin:      c.can(adminOnly("context_is_admin"), owner) == nil,
	}
	return o
}

// showsHostStatus is the os_compute_api:servers:show:host_status policy
// (Nova's unknown-only variant is not offered: its default is admin too).
func (a *API) showsHostStatus(c *reqCtx, owner string) bool {
	return c.v.atLeast(mvHostStatus) && c.can(adminOnly("os_compute_api:servers:show:host_status"), owner) == nil
}

// hostStatuses is compute.API.get_instances_host_statuses for hosts:
// DOWN when forced down, MAINTENANCE when disabled, UP while its agent
// is alive, UNKNOWN otherwise; "" (Nova's NONE) for no host.
func (a *API) hostStatuses(ctx context.Context, hosts []string) (map[string]string, error) {
	out := map[string]string{"": ""}
	var ops []clientv3.Op
	var names []string
	for _, h := range hosts {
		if _, done := out[h]; done || slices.Contains(names, h) {
			continue
		}
		names = append(names, h)
		ops = append(ops, clientv3.OpGet(a.keys.Service(h)), clientv3.OpGet(a.keys.Alive(h), clientv3.WithCountOnly()))
	}
	for start := 0; start < len(ops); start += 100 {
		end := min(start+100, len(ops))
		resp, err := a.cli.Txn(ctx).Then(ops[start:end]...).Commit()
		if err != nil {
			return nil, fmt.Errorf("read services: %w", err)
		}
		for i := 0; i < len(resp.Responses); i += 2 {
			host := names[(start+i)/2]
			kvs := resp.Responses[i].GetResponseRange().Kvs
			if len(kvs) == 0 {
				out[host] = "" // no service: Nova's IndexError, NONE
				continue
			}
			var svc etcdschema.Service
			if err := etcdschema.Decode(string(kvs[0].Key), kvs[0].Value, &svc); err != nil {
				return nil, err
			}
			alive := resp.Responses[i+1].GetResponseRange().Count > 0
			switch {
			case svc.ForcedDown:
				out[host] = "DOWN"
			case svc.Disabled:
				out[host] = "MAINTENANCE"
			case alive:
				out[host] = "UP"
			default:
				out[host] = "UNKNOWN"
			}
		}
	}
	return out, nil
}

// lookupServer is common.get_instance, then the handler's context.can
// with target={'project_id': instance.project_id}. Nova reads an
// instance from its cell's database with project_only: for a caller
// who is not an admin, another project's instance does not exist (404),
// while a server still a build request is read from the API database
// unscoped and the policy refuses it (403). Berth answers the same.
func (a *API) lookupServer(c *reqCtx, p policy) (*servers.Server, error) {
	id, ok := c.vars["server_id"]
	if !ok {
		id = c.vars["id"]
	}
	if !isUUIDLike(id) {
		// compute.API.get: an id that is no uuid names no instance (and
		// never reaches a key).
		return nil, instanceNotFound(id)
	}
	v, err := a.servers.Lookup(c.r.Context(), canonical(id))
	if errors.Is(err, servers.ErrNotFound) {
		return nil, instanceNotFound(id)
	}
	if err != nil {
		return nil, err
	}
	if v.Instance != nil && !c.isAdmin() && v.ProjectID() != c.creds.ProjectID {
		// _get_instance_from_cell names the mapping's uuid.
		return nil, instanceNotFound(v.ID())
	}
	if f := c.can(p, v.ProjectID()); f != nil {
		return nil, f
	}
	return v, nil
}

// showServer is ServersController.show.
func (a *API) showServer(c *reqCtx) (int, any, error) {
	v, err := a.lookupServer(c, projectReaderOrAdmin("os_compute_api:servers:show"))
	if err != nil {
		return 0, nil, err
	}
	s := stateOf(v)
	o := a.viewOptsFor(c, s.projectID)
	o.serverGroups = c.v.atLeast(mvServerGroups)
	if a.showsHostStatus(c, s.projectID) {
		if o.hostStatus, err = a.hostStatuses(c.r.Context(), []string{s.host}); err != nil {
			return 0, nil, err
		}
	}
	return http.StatusOK, obj{{"server", showServerView(c, s, o, false)}}, nil
}

func (a *API) listServers(c *reqCtx) (int, any, error)       { return a.getServers(c, false) }
func (a *API) listServersDetail(c *reqCtx) (int, any, error) { return a.getServers(c, true) }

// getServers is _get_servers and compute.API.get_all: the build
// requests first (sorted among themselves), then the instances of the
// cells, each filtered; the marker may name either; limit counts both.
func (a *API) getServers(c *reqCtx, detail bool) (int, any, error) {
	lq, err := parseServerList(c, detail)
	if err != nil {
		return 0, nil, err
	}
	if lq.emptyAnswer {
		return http.StatusOK, obj{{"servers", []obj{}}}, nil
	}
	f, err := newServerFilter(lq)
	if err != nil {
		return 0, nil, err
	}
	ctx := c.r.Context()
	if fl, ok := lq.opts["flavor"]; ok {
		// _remap_flavor_filter: an unknown flavor is an empty list.
		if _, err := a.flavors.get(ctx, fl); err != nil {
			var ft *fault
			if errors.As(err, &ft) {
				return http.StatusOK, obj{{"servers", []obj{}}}, nil
			}
			return 0, nil, err
		}
	}
	all, err := a.servers.List(ctx)
	if err != nil {
		return 0, nil, err
	}
	var building, placed []*serverState
	for _, v := range all {
		s := stateOf(v)
		if !f.match(s) {
			continue
		}
		if v.BuildRequest != nil {
			building = append(building, s)
		} else {
			placed = append(placed, s)
		}
	}
	order := func(x, y *serverState) int { return compareServers(lq, x, y) }
	slices.SortFunc(building, order)
	slices.SortFunc(placed, order)
	list := append(building, placed...)
	if lq.marker != nil {
		i := slices.IndexFunc(list, func(s *serverState) bool { return s.id == *lq.marker })
		if i < 0 {
			return 0, nil, errBadRequest("marker [" + *lq.marker + "] not found")
		}
		list = list[i+1:]
	}
	if len(list) > lq.limit {
		list = list[:lq.limit]
	}
	out := make([]obj, len(list))
	coll := "servers"
	var hostStatus map[string]string
	if detail {
		coll = "servers/detail"
		if a.showsHostStatus(c, c.creds.ProjectID) {
			hosts := make([]string, len(list))
			for i, s := range list {
				hosts[i] = s.host
			}
			if hostStatus, err = a.hostStatuses(ctx, hosts); err != nil {
				return 0, nil, err
			}
		}
	}
	o := a.viewOptsFor(c, c.creds.ProjectID)
	for i, s := range list {
		if !detail {
			out[i] = basicServerView(c, s)
			continue
		}
		out[i] = showServerView(c, s, o, true)
		if hostStatus != nil {
			out[i] = append(out[i], member{"host_status", hostStatus[s.host]})
		}
	}
	body := obj{{"servers", out}}
	lastID := ""
	if len(list) > 0 {
		lastID = list[len(list)-1].id
	}
	if links := pageLinks(c, lastID, len(list), lq.limit, coll); links != nil {
		body = append(body, member{"servers_links", links})
	}
	return http.StatusOK, body, nil
}

// deleteServer is ServersController.delete: 204, or Nova's 404.
func (a *API) deleteServer(c *reqCtx) (int, any, error) {
	v, err := a.lookupServer(c, projectMemberOrAdmin("os_compute_api:servers:delete"))
	if err != nil {
		return 0, nil, err
	}
	id := v.ID()
	err = a.servers.Delete(c.r.Context(), id, c.requestID)
	switch {
	case err == nil:
		return http.StatusNoContent, nil, nil
	case errors.Is(err, servers.ErrNotFound):
		return 0, nil, instanceNotFound(id)
	case errors.Is(err, servers.ErrKeptChanging):
		return 0, nil, errConflict(fmt.Sprintf("Instance %s kept changing; try the delete again.", id))
	}
	return 0, nil, err
}
