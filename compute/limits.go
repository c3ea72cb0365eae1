package compute

import (
	"context"
	"fmt"
	"net/http"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
)

// The limits resource: nova/api/openstack/compute/limits.py and
// views/limits.py. Berth has no quotas yet, so every maximum is -1
// (unlimited); the maxima become the project's quotas when quotas land.
// What a project uses is counted: its servers (and their flavors' vCPUs
// and RAM) and its server groups.

// Microversions that drop limits from the view.
const (
	mvLimitsNoNetwork   = 36 // floating IPs and security groups go (proxy APIs removed)
	mvLimitsNoImageMeta = 39 // maxImageMeta goes (image metadata proxy removed)
	mvLimitsNoFiles     = 57 // personality (injected files) goes
)

var (
	policyLimitsOtherProject = adminOnly("os_compute_api:limits:other_project")
	schemaLimitsQuery        = since(75, limitsQuery(false), limitsQuery(true))
)

// unlimited is every maximum while Berth has no quotas.
const unlimited = -1

// usage is what one project uses.
type usage struct {
	instances, cores, ramMB, serverGroups int
}

// showLimits is LimitsController.index: the caller's project, or the
// tenant_id one for an admin.
func (a *API) showLimits(c *reqCtx) (int, any, error) {
	q := queryObj(c.r.URL.RawQuery)
	if e := schemaLimitsQuery(c.v).check(q, nil); e != nil {
		return 0, nil, errBadRequest(e.queryError())
	}
	project := c.creds.ProjectID
	if v, ok := param(q, "tenant_id"); ok {
		if f := c.can(policyLimitsOtherProject, c.creds.ProjectID); f != nil {
			return 0, nil, f
		}
		project = v
	}
	u, err := a.projectUsage(c.r.Context(), project)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, obj{{"limits", obj{{"rate", []any{}}, {"absolute", absoluteLimits(c.v, u)}}}}, nil
}

// absoluteLimits is ViewBuilder.build's absolute limits, in the order of
// Nova's quota resources, filtered per microversion.
func absoluteLimits(v version, u usage) obj {
	network := !v.atLeast(mvLimitsNoNetwork)
	o := obj{{"maxTotalInstances", unlimited}, {"maxTotalCores", unlimited}, {"maxTotalRAMSize", unlimited},
		{"maxServerMeta", unlimited}}
	if !v.atLeast(mvLimitsNoImageMeta) {
		o = append(o, member{"maxImageMeta", unlimited})
	}
	if !v.atLeast(mvLimitsNoFiles) {
		o = append(o, member{"maxPersonality", unlimited}, member{"maxPersonalitySize", unlimited})
	}
	o = append(o, member{"maxTotalKeypairs", unlimited}, member{"maxServerGroups", unlimited},
		member{"maxServerGroupMembers", unlimited})
	if network {
		o = append(o, member{"maxTotalFloatingIps", unlimited}, member{"maxSecurityGroups", unlimited},
			member{"maxSecurityGroupRules", unlimited})
	}
	o = append(o, member{"totalRAMUsed", u.ramMB}, member{"totalCoresUsed", u.cores},
		member{"totalInstancesUsed", u.instances})
	if network {
		o = append(o, member{"totalFloatingIpsUsed", 0}, member{"totalSecurityGroupsUsed", 0})
	}
	return append(o, member{"totalServerGroupsUsed", u.serverGroups})
}

// projectUsage counts project's servers (a build request's flavor
// before it is scheduled, the cell's instance record after; deleted ones
// not) and server groups. No project (a system-scoped caller) uses
// nothing: "" is not a wildcard, and records without a project are
// nobody's.
func (a *API) projectUsage(ctx context.Context, project string) (usage, error) {
	var u usage
	if project == "" {
		return u, nil
	}
	groups, err := a.groups.List(ctx)
	if err != nil {
		return u, err
	}
	for _, g := range groups {
		if g.ProjectID == project {
			u.serverGroups++
		}
	}
	resp, err := a.cli.Get(ctx, a.keys.InstanceMappings(), clientv3.WithPrefix())
	if err != nil {
		return u, fmt.Errorf("read instance mappings: %w", err)
	}
	// servers are the records to read: a build request (not scheduled
	// yet) or the instance in its cell.
	type server struct {
		key   string
		build bool
	}
	var servers []server
	for _, kv := range resp.Kvs {
		var m etcdschema.InstanceMapping
		if err := etcdschema.Decode(string(kv.Key), kv.Value, &m); err != nil {
			return u, err
		}
		if m.ProjectID != project {
			continue
		}
		if m.Cell == "" {
			servers = append(servers, server{a.keys.BuildRequest(m.InstanceUUID), true})
		} else {
			servers = append(servers, server{a.keys.CellInstance(m.Cell, m.InstanceUUID), false})
		}
	}
	const batch = 128 // etcd's operations per transaction
	for start := 0; start < len(servers); start += batch {
		part := servers[start:min(start+batch, len(servers))]
		ops := make([]clientv3.Op, len(part))
		for i, sv := range part {
			ops[i] = clientv3.OpGet(sv.key)
		}
		tr, err := a.cli.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			return u, fmt.Errorf("read servers for usage: %w", err)
		}
		for i, r := range tr.Responses {
			kvs := r.GetResponseRange().Kvs
			if len(kvs) == 0 {
				continue // deleted, or scheduled between the two reads
			}
			flavor, counted, err := usedFlavor(part[i].key, part[i].build, kvs[0].Value)
			if err != nil {
				return u, err
			}
			if counted {
				u.instances++
				u.cores += flavor.VCPUs
				u.ramMB += flavor.RAMMB
			}
		}
	}
	return u, nil
}

// usedFlavor decodes a build request (build) or an instance record and
// says whether it counts (a deleted instance does not).
func usedFlavor(key string, build bool, val []byte) (etcdschema.Flavor, bool, error) {
	if build {
		var br etcdschema.BuildRequest
		if err := etcdschema.Decode(key, val, &br); err != nil {
			return etcdschema.Flavor{}, false, err
		}
		return br.Flavor, true, nil
	}
	var inst etcdschema.Instance
	if err := etcdschema.Decode(key, val, &inst); err != nil {
		return etcdschema.Flavor{}, false, err
	}
	return inst.Flavor, inst.Status != etcdschema.StatusDeleted, nil
}
