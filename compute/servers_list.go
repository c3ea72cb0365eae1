package compute

import (
	"cmp"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/berth-project/berth/internal/pycompat"
)

// GET /servers and /servers/detail: ServersController._get_servers and
// compute.API.get_all over Berth's build requests and cells.

// pagingSortingParams are PAGING_SORTING_PARAMS, which
// remove_invalid_options takes out of the filters.
var pagingSortingParams = []string{"sort_key", "sort_dir", "limit", "marker"}

// nonAdminFilters is _get_server_search_options: the filters a caller
// without allow_all_filters keeps; any other is dropped silently.
func nonAdminFilters(v version) []string {
	opts := []string{"reservation_id", "name", "status", "image", "flavor", "ip", "changes-since", "all_tenants"}
	if v.atLeast(5) {
		opts = append(opts, "ip6")
	}
	if v.atLeast(mvTags) {
		opts = append(opts, "tags", "tags-any", "not-tags", "not-tags-any")
	}
	if v.atLeast(mvChangesBefore) {
		opts = append(opts, "changes-before")
	}
	if v.atLeast(mvLockedReason) {
		opts = append(opts, "locked")
	}
	if v.atLeast(83) {
		opts = append(opts, "availability_zone", "config_drive", "key_name", "created_at", "launched_at",
			"terminated_at", "power_state", "task_state", "vm_state", "progress", "user_id")
	}
	if v.atLeast(mvHostnameForNonAdmin) {
		opts = append(opts, "hostname")
	}
	return opts
}

// listQuery is a list request read: the filters left, the statuses'
// states, the time window, paging and sorting.
type listQuery struct {
	opts           map[string]string // search_opts: the last value of each
	vmStates       map[string]bool   // from status (nil: no status filter)
	taskStates     map[string]bool   // nil: any task state
	since, before  *time.Time
	deleted        bool
	allTenants     bool
	limit          int
	marker         *string
	sortKeys, dirs []string
	emptyAnswer    bool // an unknown status before 2.38: {"servers": []}
}

// parseServerList validates and reads the query as _get_servers does,
// with its 400s and 403s.
func parseServerList(c *reqCtx, detail bool) (*listQuery, error) {
	q := queryObj(c.r.URL.RawQuery)
	s, names := serversQuery(c.v)
	if e := s.check(q, nil); e != nil {
		return nil, errBadRequest(e.queryError())
	}
	// The schema's additionalProperties True: what it does not name is
	// stripped (validation._strip_additional_query_parameters).
	lq := &listQuery{opts: map[string]string{}}
	for _, m := range q {
		if slices.Contains(names, m.k) || strings.HasPrefix(m.k, "_") {
			vals := m.v.([]any)
			lq.opts[m.k] = vals[len(vals)-1].(string)
		}
	}
	if c.can(adminOnly("os_compute_api:servers:allow_all_filters"), c.creds.ProjectID) == nil {
		for _, k := range pagingSortingParams {
			delete(lq.opts, k)
		}
	} else {
		allowed := nonAdminFilters(c.v)
		for k := range lq.opts {
			if !slices.Contains(allowed, k) {
				delete(lq.opts, k)
			}
		}
	}
	for _, k := range sortedKeys(lq.opts) {
		if slices.Contains(joinedTableParams, k) || strings.HasPrefix(k, "_") {
			return nil, errBadRequest("Invalid filter field: " + k + ".")
		}
	}
	if _, ok := lq.opts["status"]; ok {
		delete(lq.opts, "status")
		var statuses []string
		if v, ok := q.get("status"); ok {
			for _, s := range v.([]any) {
				statuses = append(statuses, s.(string))
			}
		}
		vm, task := statesFromStatuses(statuses)
		if len(vm) == 0 && len(task) == 0 {
			if c.v.atLeast(mvInvalidStatus400) {
				return nil, errBadRequest("Invalid status value")
			}
			lq.emptyAnswer = true
			return lq, nil
		}
		lq.vmStates = vm
		if !task["default"] {
			lq.taskStates = task
		}
	}
	if v, ok := lq.opts["changes-since"]; ok {
		t, ok := parseISOTime(v)
		if !ok {
			return nil, errBadRequest("Invalid filter field: changes-since.")
		}
		lq.since = &t
	}
	if v, ok := lq.opts["changes-before"]; ok {
		t, ok := parseISOTime(v)
		if !ok {
			return nil, errBadRequest("Invalid filter field: changes-before.")
		}
		if lq.since != nil && t.Before(*lq.since) {
			return nil, errBadRequest("The value of changes-since must be less than or equal to changes-before.")
		}
		lq.before = &t
	}
	if v, ok := lq.opts["deleted"]; ok {
		lq.deleted, _ = boolFromString(v)
	}
	if len(lq.vmStates) == 1 && lq.vmStates[vmDeleted] || lq.opts["vm_state"] == vmDeleted {
		if c.can(adminOnly("os_compute_api:servers:allow_all_filters"), c.creds.ProjectID) != nil {
			return nil, &fault{status: http.StatusForbidden, message: "Only administrators may list deleted instances"}
		}
		lq.deleted = true
	}
	if v, ok := lq.opts["all_tenants"]; ok {
		b, ok := boolFromString(v)
		if !ok {
			return nil, errBadRequest("Unrecognized value " + pycompat.StrRepr(v) +
				", acceptable values are: '0', '1', 'f', 'false', 'n', 'no', 'off', 'on', 't', 'true', 'y', 'yes'")
		}
		lq.allTenants = b
		delete(lq.opts, "all_tenants")
	}
	if lq.allTenants {
		rule := "os_compute_api:servers:index:get_all_tenants"
		if detail {
			rule = "os_compute_api:servers:detail:get_all_tenants"
		}
		if f := c.can(adminOnly(rule), c.creds.ProjectID); f != nil {
			return nil, f
		}
	} else {
		// Without all_tenants a list is the caller's own project's
		// (search_opts['project_id'] = context.project_id); every caller
		// has one, and tenant_id is ignored (lp:#1185290).
		delete(lq.opts, "tenant_id")
		lq.opts["project_id"] = c.creds.ProjectID
	}
	lq.limit = maxLimit
	if v, ok := param(q, "limit"); ok {
		n, ok := pyInt(v)
		switch {
		case !ok:
			return nil, errBadRequest("Invalid input received: limit must be an integer")
		case n.Sign() < 0:
			return nil, errBadRequest("Invalid input received: limit must be >= 0")
		case n.IsInt64() && n.Int64() < maxLimit:
			lq.limit = int(n.Int64())
		}
	}
	if v, ok := param(q, "marker"); ok {
		lq.marker = &v
	}
	return lq, parseSort(c, q, lq)
}

// parseSort is get_sort_params, remove_invalid_sort_keys and the
// database's process_sort_params.
func parseSort(c *reqCtx, q obj, lq *listQuery) error {
	all := func(name string) []string {
		var out []string
		if v, ok := q.get(name); ok {
			for _, s := range v.([]any) {
				out = append(out, strings.TrimSpace(s.(string)))
			}
		}
		return out
	}
	keys, dirs := all("sort_key"), all("sort_dir")
	if len(keys) == 0 {
		keys = []string{"created_at"}
	}
	if len(dirs) == 0 {
		dirs = []string{"desc"}
	}
	ignored := ignoredSortKeysAt(c.v)
	for i := 0; i < len(keys); {
		k := keys[i]
		switch {
		case slices.Contains(ignored, k):
			if len(dirs) > i {
				dirs = slices.Delete(dirs, i, i+1)
			}
			keys = slices.Delete(keys, i, i+1)
			continue
		case (k == "host" || k == "node") && c.can(adminOnly("os_compute_api:servers:allow_all_filters"), c.creds.ProjectID) != nil:
			return &fault{status: http.StatusForbidden, message: "Only administrators can sort servers by " + k}
		}
		i++
	}
	for _, d := range dirs {
		if d != "asc" && d != "desc" {
			return errBadRequest("Invalid input received: Unknown sort direction, must be 'desc' or 'asc'")
		}
	}
	def := "asc"
	if len(dirs) > 0 {
		def = dirs[0]
	}
	for len(dirs) < len(keys) {
		dirs = append(dirs, def)
	}
	if len(dirs) > len(keys) {
		return errBadRequest("Invalid input received: Sort direction size exceeds sort key size")
	}
	for _, k := range []string{"created_at", "id"} {
		if !slices.Contains(keys, k) {
			keys, dirs = append(keys, k), append(dirs, def)
		}
	}
	lq.sortKeys, lq.dirs = keys, dirs
	return nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// column is the value of one of Nova's instance columns for s, as the
// database filters and sorts it; null for NULL. ok is false for a name
// that is no column (the database ignores such a filter).
func column(s *serverState, name string) (value string, null, ok bool) {
	str := func(v string) (string, bool, bool) { return v, false, true }
	nullable := func(v string) (string, bool, bool) { return v, v == "", true }
	switch name {
	case "uuid":
		return str(s.id)
	case "display_name":
		return str(s.name)
	case "display_description":
		if s.description == nil {
			return "", true, true
		}
		return str(*s.description)
	case "project_id":
		return str(s.projectID)
	case "user_id":
		return str(s.userID)
	case "host":
		return nullable(s.host)
	case "node":
		return nullable(s.node)
	case "availability_zone":
		return nullable(s.az)
	case "vm_state":
		return str(s.vmState)
	case "task_state":
		return nullable(s.taskState)
	case "power_state":
		return str(strconv.Itoa(s.powerState))
	case "reservation_id":
		return str(s.reservationID)
	case "launch_index":
		return str(strconv.Itoa(s.launchIndex))
	case "hostname":
		return str(hostname(s.name, s.id))
	case "image_ref":
		if s.image == nil {
			return str("")
		}
		return str(s.image.ID)
	case "instance_type_id":
		return str(s.flavor.ID)
	case "created_at":
		return str(mysqlDatetime(s.created))
	case "updated_at":
		return str(mysqlDatetime(s.updated))
	case "launched_at":
		if s.launchedAt == nil {
			return "", true, true
		}
		return str(mysqlDatetime(*s.launchedAt))
	case "config_drive", "kernel_id", "ramdisk_id", "access_ip_v4", "access_ip_v6", "progress":
		return str("")
	case "key_name", "terminated_at", "root_device_name", "locked_by", "auto_disk_config":
		return "", true, true
	}
	return "", false, false
}

// regexFilters are the search options the database matches as regular
// expressions: every column that is not an exact filter.
var exactFilters = []string{"project_id", "user_id", "image_ref", "vm_state", "instance_type_id", "uuid",
	"host", "task_state", "locked"}

// filterAliases is compute.API.get_all's filter_mapping.
var filterAliases = map[string]string{"image": "image_ref", "name": "display_name", "tenant_id": "project_id",
	"description": "display_description"}

// serverFilter is the filters of one list, compiled.
type serverFilter struct {
	lq      *listQuery
	exact   map[string]string
	regexes map[string]*regexp.Regexp
	// none: a filter that matches nothing in Berth (tags, addresses).
	none bool
}

func newServerFilter(lq *listQuery) (*serverFilter, error) {
	f := &serverFilter{lq: lq, exact: map[string]string{}, regexes: map[string]*regexp.Regexp{}}
	for _, k := range sortedKeys(lq.opts) {
		v := lq.opts[k]
		if a, ok := filterAliases[k]; ok {
			if _, both := lq.opts[a]; both && k == "tenant_id" {
				continue
			}
			k = a
		}
		switch k {
		case "changes-since", "changes-before", "deleted", "soft_deleted", "flavor":
		case "tags", "tags-any", "ip", "ip6":
			f.none = true // Berth's servers have no tags and no addresses
		case "not-tags", "not-tags-any":
		case "locked":
			if b, _ := boolFromString(v); b {
				f.none = true // Berth locks no server
			}
		default:
			if slices.Contains(exactFilters, k) {
				f.exact[k] = v
				continue
			}
			if _, _, ok := column(&serverState{}, k); !ok {
				continue // no such column: the database ignores it
			}
			// MySQL's REGEXP on Nova's case-insensitive collation.
			re, err := regexp.Compile("(?i)" + v)
			if err != nil {
				return nil, errBadRequest("Invalid input for query parameters " + k + ".")
			}
			f.regexes[k] = re
		}
	}
	return f, nil
}

func (f *serverFilter) match(s *serverState) bool {
	lq := f.lq
	if f.none || (s.vmState == vmDeleted) != lq.deleted && lq.since == nil && lq.before == nil {
		return false
	}
	if lq.vmStates != nil && !lq.vmStates[s.vmState] {
		return false
	}
	if lq.taskStates != nil && !lq.taskStates[s.taskState] {
		return false
	}
	if lq.since != nil && s.updated.Before(*lq.since) || lq.before != nil && s.updated.After(*lq.before) {
		return false
	}
	if fl, ok := lq.opts["flavor"]; ok && s.flavor.ID != fl {
		return false
	}
	for k, want := range f.exact {
		got, null, _ := column(s, k)
		if null || got != want {
			return false
		}
	}
	for k, re := range f.regexes {
		got, null, _ := column(s, k)
		if null || !re.MatchString(got) {
			return false
		}
	}
	return true
}

// compareServers orders two servers by the list's sort keys; NULL
// first ascending, as MySQL sorts. "id" (Nova's database id, the
// creation order) is the creation time then the launch index.
func compareServers(lq *listQuery, a, b *serverState) int {
	for i, k := range lq.sortKeys {
		var r int
		switch k {
		case "created_at":
			r = a.created.Compare(b.created)
		case "updated_at":
			r = a.updated.Compare(b.updated)
		case "launched_at":
			r = cmpTimes(a.launchedAt, b.launchedAt)
		case "id":
			r = cmp.Or(a.created.Compare(b.created), cmp.Compare(a.launchIndex, b.launchIndex), strings.Compare(a.id, b.id))
		case "launch_index":
			r = cmp.Compare(a.launchIndex, b.launchIndex)
		case "power_state":
			r = cmp.Compare(a.powerState, b.powerState)
		default:
			av, an, _ := column(a, k)
			bv, bn, _ := column(b, k)
			switch {
			case an && bn:
			case an:
				r = -1
			case bn:
				r = 1
			default:
				r = strings.Compare(strings.ToLower(av), strings.ToLower(bv))
			}
		}
		if lq.dirs[i] == "desc" {
			r = -r
		}
		if r != 0 {
			return r
		}
	}
	return 0
}

func cmpTimes(a, b *time.Time) int {
	switch {
	case a == nil && b == nil:
		return 0
	case a == nil:
		return -1
	case b == nil:
		return 1
	}
	return a.Compare(*b)
}
