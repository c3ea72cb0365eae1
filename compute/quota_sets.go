package compute

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/berth-project/berth/quotas"
)

// os-quota-sets: nova/api/openstack/compute/quota_sets.py over package
// quotas. Every resource of Nova's QUOTAS is shown (and may be set),
// though Berth counts and enforces only instances, cores, ram,
// server_groups and server_group_members; the others report 0 in use.

// Microversions that filter resources out of every answer.
const (
	mvQuotasNoNetwork = 36 // FILTERED_QUOTAS_2_36
	mvQuotasNoFiles   = 57 // FILTERED_QUOTAS_2_57
)

// Nova 26's quota_sets policies (nova/policies/quota_sets.py).
var (
	policyQuotaUpdate   = adminOnly("os_compute_api:os-quota-sets:update")
	policyQuotaDefaults = policy{rule: "os_compute_api:os-quota-sets:defaults"}
	policyQuotaShow     = projectReaderOrAdmin("os_compute_api:os-quota-sets:show")
	policyQuotaDelete   = adminOnly("os_compute_api:os-quota-sets:delete")
	policyQuotaDetail   = projectReaderOrAdmin("os_compute_api:os-quota-sets:detail")
)

// quotaFiltered reports whether resource is left out at v.
func quotaFiltered(v version, resource string) bool {
	switch resource {
	case quotas.FixedIPs, quotas.FloatingIPs, quotas.SecurityGroups, quotas.SecurityGroupRules:
		return v.atLeast(mvQuotasNoNetwork)
	case quotas.InjectedFiles, quotas.InjectedFileContentBytes, quotas.InjectedFilePathBytes:
		return v.atLeast(mvQuotasNoFiles)
	}
	return false
}

// commonQuota is quota_sets.common_quota.
var commonQuota = schema{kType{"integer", "string"}, rePattern(`^-?[0-9]+$`, `^-?[0-9]+\n?\z`),
	kMinimum{limit: -1, text: "-1"}, kMaximum{limit: 0x7FFFFFFF, text: "2147483647"}}

// quotaUpdate is quota_sets.update (update_v236, update_v257): the
// quota_set's properties are the resources not filtered at v, force and
// (before 2.36) networks. Like Nova's, quota_set itself has no "type".
func quotaUpdate(v version) schema {
	var props kProperties
	names := []string{}
	for _, r := range quotaUpdateOrder {
		if quotaFiltered(v, r) || (r == "networks" && v.atLeast(mvQuotasNoNetwork)) {
			continue
		}
		s := commonQuota
		if r == "force" {
			s = schema{booleanEnum}
		}
		props = append(props, prop{r, s})
		names = append(names, r)
	}
	return schema{kType{"object"}, kProperties{{"quota_set", schema{props, kNoAdditional{props: names}}}},
		kRequired{"quota_set"}, kNoAdditional{props: []string{"quota_set"}}}
}

// quotaUpdateOrder is quota_resources' order in the schema module, then
// force (the order properties are checked in).
var quotaUpdateOrder = []string{quotas.Instances, quotas.Cores, quotas.RAM, quotas.FloatingIPs, quotas.FixedIPs,
	quotas.MetadataItems, quotas.KeyPairs, quotas.SecurityGroups, quotas.SecurityGroupRules, quotas.InjectedFiles,
	quotas.InjectedFileContentBytes, quotas.InjectedFilePathBytes, quotas.ServerGroups, quotas.ServerGroupMembers,
	"networks", "force"}

var (
	schemaQuotaUpdate = func(v version) schema { return quotaUpdate(v) }
	schemaQuotaQuery  = since(75, quotaQuery(false), quotaQuery(true))
)

// quotaQuery is quota_sets.query_schema (_275 when strict).
func quotaQuery(strict bool) schema {
	return queryObject(strict, kProperties{{"user_id", multiParams(schema{kType{"string"}})}})
}

// quotaRequest checks the query and returns the project and user_id
// (Nova takes the first value; detail takes the last, as webob's get).
func (a *API) quotaRequest(c *reqCtx, p policy, lastUser bool) (project, user string, f *fault) {
	q := queryObj(c.r.URL.RawQuery)
	if e := schemaQuotaQuery(c.v).check(q, nil); e != nil {
		return "", "", errBadRequest(e.queryError())
	}
	project, _ = url.PathUnescape(c.vars["id"])
	if f := c.can(p, project); f != nil {
		return "", "", f
	}
	if vals, ok := url.ParseQuery(c.r.URL.RawQuery); ok == nil && len(vals["user_id"]) > 0 {
		user = vals["user_id"][0]
		if lastUser {
			user = vals["user_id"][len(vals["user_id"])-1]
		}
	}
	return project, user, nil
}

// quotaSetView is _format_quota_set: id (when project is not ""), then
// each resource not filtered at v, in QUOTAS.resources order.
func quotaSetView(v version, project string, value func(resource string) any) obj {
	o := obj{}
	if project != "" {
		o = append(o, member{"id", project})
	}
	for _, r := range quotas.Resources {
		if !quotaFiltered(v, r) {
			o = append(o, member{r, value(r)})
		}
	}
	return obj{{"quota_set", o}}
}

func (a *API) showQuotaSet(c *reqCtx) (int, any, error) {
	project, user, f := a.quotaRequest(c, policyQuotaShow, false)
	if f != nil {
		return 0, nil, f
	}
	lim, err := a.quotas.Limits(c.r.Context(), project, user)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, quotaSetView(c.v, project, func(r string) any { return lim[r] }), nil
}

func (a *API) showQuotaDetail(c *reqCtx) (int, any, error) {
	project, user, f := a.quotaRequest(c, policyQuotaDetail, true)
	if f != nil {
		return 0, nil, f
	}
	lim, err := a.quotas.Limits(c.r.Context(), project, user)
	if err != nil {
		return 0, nil, err
	}
	used, _, err := a.quotas.CountUser(c.r.Context(), project, user, "")
	if err != nil {
		return 0, nil, err
	}
	if used.User != nil {
		used = *used.User // get_user_quotas: what the user uses
	}
	return http.StatusOK, quotaSetView(c.v, project, func(r string) any {
		return obj{{"limit", lim[r]}, {"in_use", used.Of(r)}, {"reserved", 0}}
	}), nil
}

func (a *API) showQuotaDefaults(c *reqCtx) (int, any, error) {
	project, _ := url.PathUnescape(c.vars["id"])
	if f := c.can(policyQuotaDefaults, project); f != nil {
		return 0, nil, f
	}
	d := a.quotas.Defaults()
	return http.StatusOK, quotaSetView(c.v, project, func(r string) any { return d[r] }), nil
}

func (a *API) updateQuotaSet(c *reqCtx) (int, any, error) {
	project, user, f := a.quotaRequest(c, policyQuotaUpdate, false)
	if f != nil {
		return 0, nil, f
	}
	set := mustGet(c.body.(obj), "quota_set").(obj)
	if _, ok := set.get("networks"); ok {
		return 0, nil, errBadRequest("The networks quota has been removed")
	}
	force := false
	if v, ok := set.get("force"); ok {
		force, _ = boolValue(v)
	}
	limits := quotas.Limits{}
	for _, kv := range set {
		if kv.k == "force" {
			continue
		}
		n, err := strconv.ParseInt(fmt.Sprint(kv.v), 10, 64) // the schema let only -?[0-9]+ through
		if err != nil {
			return 0, nil, errBadRequest("Invalid quota value for " + kv.k)
		}
		limits[kv.k] = n
	}
	var projectLimits quotas.Limits
	if user != "" {
		var err error
		if projectLimits, err = a.quotas.Limits(c.r.Context(), project, ""); err != nil {
			return 0, nil, err
		}
	}
	check := func(before quotas.Limits, used quotas.Usage) error {
		if force {
			return nil
		}
		for _, kv := range set { // in the body's order, as Nova's loop
			if v, ok := limits[kv.k]; ok {
				if f := settable(kv.k, v, used.Of(kv.k), user, projectLimits); f != nil {
					return f
				}
			}
		}
		return nil
	}
	after, err := a.quotas.Update(c.r.Context(), project, user, limits, check)
	var fault *fault
	if errors.As(err, &fault) {
		return 0, nil, fault
	}
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, quotaSetView(c.v, "", func(r string) any { return after[r] }), nil
}

// settable is _validate_quota_limit against get_settable_quotas: no
// lower than what is used; a user's no higher than the project's.
func settable(resource string, limit, used int64, user string, project quotas.Limits) *fault {
	inf := func(v int64) float64 {
		if v == quotas.Unlimited {
			return 1e300
		}
		return float64(v)
	}
	if inf(limit) < inf(used) {
		return errBadRequest(fmt.Sprintf("Quota limit %d for %s must be greater than or equal to already used and reserved %d.",
			limit, resource, used))
	}
	if user != "" {
		if max := project[resource]; inf(limit) > inf(max) {
			return errBadRequest(fmt.Sprintf("Quota limit %d for %s must be less than or equal to %d.", limit, resource, max))
		}
	}
	return nil
}

func (a *API) deleteQuotaSet(c *reqCtx) (int, any, error) {
	project, user, f := a.quotaRequest(c, policyQuotaDelete, false)
	if f != nil {
		return 0, nil, f
	}
	if err := a.quotas.Delete(c.r.Context(), project, user); err != nil {
		return 0, nil, err
	}
	return http.StatusAccepted, nil, nil
}
