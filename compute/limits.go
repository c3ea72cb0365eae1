package compute

import (
	"net/http"

	"github.com/berth-project/berth/quotas"
)

// The limits resource: nova/api/openstack/compute/limits.py and
// views/limits.py: the project's quotas (package quotas) and what it
// uses of them, counted as its quota checks count.

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
	lim, err := a.quotas.Limits(c.r.Context(), project, "")
	if err != nil {
		return 0, nil, err
	}
	// No project (a system-scoped caller) uses nothing: "" is not a
	// wildcard, and records without a project are nobody's.
	u, _, err := a.quotas.Count(c.r.Context(), project, "")
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, obj{{"limits", obj{{"rate", []any{}}, {"absolute", absoluteLimits(c.v, lim, u)}}}}, nil
}

// absoluteLimits is ViewBuilder.build's absolute limits, in the order of
// Nova's quota resources, filtered per microversion.
func absoluteLimits(v version, l quotas.Limits, u quotas.Usage) obj {
	network := !v.atLeast(mvLimitsNoNetwork)
	o := obj{{"maxTotalInstances", l[quotas.Instances]}, {"maxTotalCores", l[quotas.Cores]},
		{"maxTotalRAMSize", l[quotas.RAM]}, {"maxServerMeta", l[quotas.MetadataItems]}}
	if !v.atLeast(mvLimitsNoImageMeta) {
		o = append(o, member{"maxImageMeta", l[quotas.MetadataItems]})
	}
	if !v.atLeast(mvLimitsNoFiles) {
		o = append(o, member{"maxPersonality", l[quotas.InjectedFiles]},
			member{"maxPersonalitySize", l[quotas.InjectedFileContentBytes]})
	}
	o = append(o, member{"maxTotalKeypairs", l[quotas.KeyPairs]}, member{"maxServerGroups", l[quotas.ServerGroups]},
		member{"maxServerGroupMembers", l[quotas.ServerGroupMembers]})
	if network {
		o = append(o, member{"maxTotalFloatingIps", l[quotas.FloatingIPs]}, member{"maxSecurityGroups", l[quotas.SecurityGroups]},
			member{"maxSecurityGroupRules", l[quotas.SecurityGroupRules]})
	}
	o = append(o, member{"totalRAMUsed", u.RAM}, member{"totalCoresUsed", u.Cores},
		member{"totalInstancesUsed", u.Instances})
	if network {
		o = append(o, member{"totalFloatingIpsUsed", 0}, member{"totalSecurityGroupsUsed", 0})
	}
	return append(o, member{"totalServerGroupsUsed", u.ServerGroups})
}
