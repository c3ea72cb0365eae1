package compute

import (
	"cmp"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/google/uuid"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/pycompat"
)

// The flavors resource: nova/api/openstack/compute/flavors.py,
// flavor_manage.py, flavors_extraspecs.py, flavor_access.py and
// views/flavors.py.

// Microversions that change flavors.
const (
	mvFlavorDescription = 55 // description in views, create and PUT
	mvFlavorExtraSpecs  = 61 // extra_specs in the detailed views
	mvSwapZero          = 75 // swap 0 (not ""); unknown list parameters refused
	mvAccessToPublic409 = 7  // addTenantAccess to a public flavor is a 409
)

// maxLimit is CONF.api.max_limit's default.
const maxLimit = 1000

// flavorLinks is ViewBuilder._get_links: self under /v2.1, bookmark
// without the version.
func flavorLinks(base, id string) []obj {
	bookmark := strings.TrimSuffix(base, "/v2.1")
	return []obj{
		{{"rel", "self"}, {"href", urlJoin(base, "flavors", id)}},
		{{"rel", "bookmark"}, {"href", urlJoin(bookmark, "flavors", id)}},
	}
}

func description(f *etcdschema.Flavor) any {
	if f.Description == nil {
		return nil
	}
	return *f.Description
}

// basicView is ViewBuilder.basic (the list's entries).
func basicView(c *reqCtx, f *etcdschema.Flavor) obj {
	o := obj{{"id", f.ID}, {"name", f.Name}, {"links", flavorLinks(c.baseURL, f.ID)}}
	if c.v.atLeast(mvFlavorDescription) {
		o = append(o, member{"description", description(f)})
	}
	return o
}

// showView is ViewBuilder.show: swap "" for none before 2.75,
// description from 2.55 (always after a PUT), extra_specs from 2.61.
func showView(c *reqCtx, f *etcdschema.Flavor, withDescription bool) obj {
	var swap any = f.SwapMB
	if f.SwapMB == 0 && !c.v.atLeast(mvSwapZero) {
		swap = ""
	}
	o := obj{{"id", f.ID}, {"name", f.Name}, {"ram", f.RAMMB}, {"disk", f.DiskGB}, {"swap", swap},
		{"OS-FLV-EXT-DATA:ephemeral", f.EphemeralGB}, {"OS-FLV-DISABLED:disabled", false}, {"vcpus", f.VCPUs},
		{"os-flavor-access:is_public", f.IsPublic()}, {"rxtx_factor", f.RXTX()}, {"links", flavorLinks(c.baseURL, f.ID)}}
	if withDescription {
		o = append(o, member{"description", description(f)})
	}
	if c.v.atLeast(mvFlavorExtraSpecs) {
		specs := f.ExtraSpecs
		if specs == nil {
			specs = map[string]string{}
		}
		o = append(o, member{"extra_specs", specs})
	}
	return o
}

// queryObj is req.GET.dict_of_lists(), keys in first-seen order, blank
// values kept (the instance Nova's query schemas check).
func queryObj(raw string) obj {
	o := obj{}
	for _, pair := range strings.Split(raw, "&") {
		if pair == "" {
			continue
		}
		k, v, _ := strings.Cut(pair, "=")
		k, _ = url.QueryUnescape(k)
		v, _ = url.QueryUnescape(v)
		found := false
		for i := range o {
			if o[i].k == k {
				o[i].v = append(o[i].v.([]any), v)
				found = true
			}
		}
		if !found {
			o = append(o, member{k, []any{v}})
		}
	}
	return o
}

// param is req.params.get(name): the last value, and whether there is one.
func param(q obj, name string) (string, bool) {
	v, ok := q.get(name)
	if !ok {
		return "", false
	}
	vals := v.([]any)
	return vals[len(vals)-1].(string), true
}

// listParams are FlavorsController._get_flavors' inputs.
type listParams struct {
	sortKey, sortDir string
	limit            int
	marker           *string
	isPublic         *bool // nil: public and private
	minRAM, minDisk  *int
}

// parseListQuery validates the query (index_query, index_query_275 from
// 2.75) and reads it as _get_flavors does, with its 400s.
func parseListQuery(c *reqCtx) (*listParams, error) {
	q := queryObj(c.r.URL.RawQuery)
	s := schemaFlavorsQuery
	if c.v.atLeast(mvSwapZero) {
		s = schemaFlavorsQuery2_75
	}
	if e := s.check(q, nil); e != nil {
		return nil, errBadRequest(e.queryError())
	}
	p := &listParams{sortKey: "flavorid", sortDir: "asc", limit: maxLimit}
	if v, _ := param(q, "sort_key"); v != "" {
		p.sortKey = v
	}
	if v, _ := param(q, "sort_dir"); v != "" {
		p.sortDir = v
	}
	// common.get_pagination_params would check page_size and offset too,
	// but the query schema has already stripped them (before 2.75) or
	// refused them (from 2.75).
	for _, name := range []string{"limit"} {
		if v, ok := param(q, name); ok {
			n, ok := pyInt(v)
			switch {
			case !ok:
				return nil, errBadRequest("Invalid input received: " + name + " must be an integer")
			case n.Sign() < 0:
				return nil, errBadRequest("Invalid input received: " + name + " must be >= 0")
			}
			if name == "limit" && n.IsInt64() && n.Int64() < maxLimit {
				p.limit = int(n.Int64())
			}
		}
	}
	if v, ok := param(q, "marker"); ok {
		p.marker = &v
	}
	// Only an admin may ask for private flavors (is_public filters
	// only then); anyone else sees the public ones and those shared with
	// its project, whatever it asks.
	pub := true
	p.isPublic = &pub
	if v, ok := param(q, "is_public"); ok && c.isAdmin() {
		switch b, isBool := boolFromString(v); {
		case strings.EqualFold(v, "none"):
			p.isPublic = nil
		case isBool:
			p.isPublic = &b
		default:
			return nil, errBadRequest("Invalid is_public filter [" + v + "]")
		}
	}
	for _, f := range []struct {
		name string
		dst  **int
	}{{"minRam", &p.minRAM}, {"minDisk", &p.minDisk}} {
		if v, ok := param(q, f.name); ok {
			n, ok := pyInt(v)
			if !ok || !n.IsInt64() {
				return nil, errBadRequest("Invalid " + f.name + " filter [" + v + "]")
			}
			i := int(n.Int64())
			*f.dst = &i
		}
	}
	return p, nil
}

// boolFromString is oslo strutils.bool_from_string(strict=True).
func boolFromString(s string) (value, ok bool) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "1", "t", "true", "on", "y", "yes":
		return true, true
	case "0", "f", "false", "off", "n", "no":
		return false, true
	}
	return false, false
}

// flavorSortValue compares two flavors by one of Nova's sort keys. Keys
// Berth keeps no column for (created_at, updated_at, the database id,
// vcpu_weight, disabled) compare equal, leaving the order to the
// flavorid tie-break, where Nova breaks ties by its database id.
func compareBy(key string, a, b *etcdschema.Flavor) int {
	switch key {
	case "flavorid":
		return strings.Compare(a.ID, b.ID)
	case "name":
		return strings.Compare(a.Name, b.Name)
	case "memory_mb":
		return cmp.Compare(a.RAMMB, b.RAMMB)
	case "root_gb":
		return cmp.Compare(a.DiskGB, b.DiskGB)
	case "ephemeral_gb":
		return cmp.Compare(a.EphemeralGB, b.EphemeralGB)
	case "swap":
		return cmp.Compare(a.SwapMB, b.SwapMB)
	case "vcpus":
		return cmp.Compare(a.VCPUs, b.VCPUs)
	case "rxtx_factor":
		return cmp.Compare(a.RXTX(), b.RXTX())
	case "is_public":
		return cmp.Compare(boolInt(a.IsPublic()), boolInt(b.IsPublic()))
	case "description":
		// NULL sorts first in MySQL.
		da, db := description(a), description(b)
		switch {
		case da == nil && db == nil:
			return 0
		case da == nil:
			return -1
		case db == nil:
			return 1
		}
		return strings.Compare(da.(string), db.(string))
	}
	return 0
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// listFlavorsFiltered is _get_flavors: filter, sort by the key then the
// id in one direction, start after the marker, limit.
func (a *API) listFlavorsFiltered(c *reqCtx) ([]etcdschema.Flavor, *listParams, error) {
	p, err := parseListQuery(c)
	if err != nil {
		return nil, nil, err
	}
	all, _, err := a.flavors.list(c.r.Context())
	if err != nil {
		return nil, nil, err
	}
	project := c.creds.ProjectID
	order := func(x, y *etcdschema.Flavor) int {
		r := compareBy(p.sortKey, x, y)
		if r == 0 {
			r = strings.Compare(x.ID, y.ID)
		}
		if p.sortDir == "desc" {
			r = -r
		}
		return r
	}
	var marker *etcdschema.Flavor
	if p.marker != nil {
		for i := range all {
			if all[i].ID == *p.marker {
				marker = &all[i].Flavor
			}
		}
		if marker == nil {
			return nil, nil, errBadRequest("marker [" + *p.marker + "] not found")
		}
	}
	var out []etcdschema.Flavor
	for i := range all {
		f := &all[i].Flavor
		if p.minRAM != nil && f.RAMMB < *p.minRAM || p.minDisk != nil && f.DiskGB < *p.minDisk {
			continue
		}
		if p.isPublic != nil && f.IsPublic() != *p.isPublic &&
			!(*p.isPublic && project != "" && slices.Contains(f.Projects, project)) {
			continue
		}
		if marker != nil && order(f, marker) <= 0 {
			continue
		}
		out = append(out, *f)
	}
	slices.SortFunc(out, func(x, y etcdschema.Flavor) int { return order(&x, &y) })
	if len(out) > p.limit {
		out = out[:p.limit]
	}
	return out, p, nil
}

// collectionLinks is _get_collection_links: a "next" link when the page
// is as long as the limit asked for (or the maximum).
func collectionLinks(c *reqCtx, items []etcdschema.Flavor, p *listParams, coll string) []obj {
	if len(items) == 0 {
		return nil
	}
	return pageLinks(c, items[len(items)-1].ID, len(items), p.limit, coll)
}

// pageLinks is _get_collection_links for a page of n items whose last
// has id lastID, under a limit: the "next" link, or nil.
func pageLinks(c *reqCtx, lastID string, n, limit int, coll string) []obj {
	if limit == 0 || n != limit {
		return nil
	}
	q := queryObj(c.r.URL.RawQuery)
	params := map[string]string{}
	for _, m := range q {
		vals := m.v.([]any)
		params[m.k] = vals[len(vals)-1].(string)
	}
	params["marker"] = lastID
	keys := make([]string, 0, len(params))
	for k := range params {
		keys = append(keys, k)
	}
	// OrderedDict(sorted(request.params.items())), then marker set:
	// a marker already there keeps its place, a new one goes last.
	slices.Sort(keys)
	if _, had := q.get("marker"); !had {
		keys = slices.DeleteFunc(keys, func(k string) bool { return k == "marker" })
		keys = append(keys, "marker")
	}
	enc := make([]string, len(keys))
	for i, k := range keys {
		enc[i] = url.QueryEscape(k) + "=" + url.QueryEscape(params[k])
	}
	return []obj{{{"rel", "next"}, {"href", urlJoin(c.baseURL, coll) + "?" + strings.Join(enc, "&")}}}
}

func (a *API) listFlavors(c *reqCtx) (int, any, error) {
	items, p, err := a.listFlavorsFiltered(c)
	if err != nil {
		return 0, nil, err
	}
	list := make([]obj, len(items))
	for i := range items {
		list[i] = basicView(c, &items[i])
	}
	out := obj{{"flavors", list}}
	if links := collectionLinks(c, items, p, "flavors"); links != nil {
		out = append(out, member{"flavors_links", links})
	}
	return http.StatusOK, out, nil
}

func (a *API) listFlavorsDetail(c *reqCtx) (int, any, error) {
	items, p, err := a.listFlavorsFiltered(c)
	if err != nil {
		return 0, nil, err
	}
	list := make([]obj, len(items))
	for i := range items {
		list[i] = showView(c, &items[i], c.v.atLeast(mvFlavorDescription))
	}
	out := obj{{"flavors", list}}
	if links := collectionLinks(c, items, p, "flavors/detail"); links != nil {
		out = append(out, member{"flavors_links", links})
	}
	return http.StatusOK, out, nil
}

// visibleFlavor is common.get_flavor: the flavor with id as the caller
// may see it. Flavor's queries show a non-admin only the public flavors
// and the private ones shared with its project; any other is not found.
func (a *API) visibleFlavor(c *reqCtx, id string) (*storedFlavor, error) {
	sf, err := a.flavors.get(c.r.Context(), id)
	if err != nil {
		return nil, err
	}
	if !c.isAdmin() && !sf.IsPublic() && (c.creds.ProjectID == "" || !slices.Contains(sf.Projects, c.creds.ProjectID)) {
		return nil, flavorNotFound(id)
	}
	return sf, nil
}

func (a *API) showFlavor(c *reqCtx) (int, any, error) {
	sf, err := a.visibleFlavor(c, c.vars["id"])
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, obj{{"flavor", showView(c, &sf.Flavor, c.v.atLeast(mvFlavorDescription))}}, nil
}

// createFlavor is FlavorManageController._create and
// nova.compute.flavors.create (200, not 201, as Nova answers).
func (a *API) createFlavor(c *reqCtx) (int, any, error) {
	body, _ := c.body.(obj).get("flavor")
	vals := body.(obj)
	f := &etcdschema.Flavor{}
	name, _ := vals.get("name")
	// A "/" is printable, so Nova takes it; Berth's flavor key is the
	// name, which etcdschema escapes (docs/etcd-keys.md, key segments).
	f.Name = strings.TrimFunc(name.(string), unicode.IsSpace)
	switch id, _ := vals.get("id"); t := id.(type) {
	case string:
		f.ID = t
	case json.Number:
		if !isZero(t) { // "if not flavorid": 0 asks for a generated id
			f.ID = pycompat.NumberRepr(t)
		}
	}
	if f.ID == "" {
		f.ID = uuid.NewString()
	}
	ints := []struct {
		name string
		dst  *int
	}{{"ram", &f.RAMMB}, {"vcpus", &f.VCPUs}, {"disk", &f.DiskGB}, {"OS-FLV-EXT-DATA:ephemeral", &f.EphemeralGB}, {"swap", &f.SwapMB}}
	for _, in := range ints {
		if v, ok := vals.get(in.name); ok {
			// The schema let only digits (or an integer) through, within
			// 0..2147483647: int(str(v)) cannot fail.
			n, _ := pyInt(pyStr(v))
			*in.dst = int(n.Int64())
		}
	}
	if v, ok := vals.get("rxtx_factor"); ok {
		n, _ := strconv.ParseFloat(strings.TrimSpace(pyStr(v)), 64)
		f.RXTXFactor = n
	}
	if v, ok := vals.get("os-flavor-access:is_public"); ok {
		switch t := v.(type) {
		case bool:
			f.Private = !t
		case string:
			b, _ := boolFromString(t)
			f.Private = !b
		}
	}
	if c.v.atLeast(mvFlavorDescription) {
		if v, ok := vals.get("description"); ok && v != nil {
			d := v.(string)
			f.Description = &d
		}
	}
	if err := a.flavors.create(c.r.Context(), f); err != nil {
		return 0, nil, err
	}
	return http.StatusOK, obj{{"flavor", showView(c, f, c.v.atLeast(mvFlavorDescription))}}, nil
}

// isZero: a JSON number Python reads as 0 or 0.0 (falsy).
func isZero(n json.Number) bool {
	f, err := strconv.ParseFloat(string(n), 64)
	return err == nil && f == 0
}

// updateFlavor is _update (2.55+): the description only.
func (a *API) updateFlavor(c *reqCtx) (int, any, error) {
	body, _ := c.body.(obj).get("flavor")
	d, _ := body.(obj).get("description")
	f, err := a.flavors.update(c.r.Context(), c.vars["id"], func(f *etcdschema.Flavor) error {
		f.Description = nil
		if s, ok := d.(string); ok {
			f.Description = &s
		}
		return nil
	})
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, obj{{"flavor", showView(c, f, true)}}, nil
}

func (a *API) deleteFlavor(c *reqCtx) (int, any, error) {
	if err := a.flavors.delete(c.r.Context(), c.vars["id"]); err != nil {
		return 0, nil, err
	}
	return http.StatusAccepted, nil, nil
}

// ---- os-extra_specs --------------------------------------------------------

func (a *API) listExtraSpecs(c *reqCtx) (int, any, error) {
	sf, err := a.visibleFlavor(c, c.vars["flavor_id"])
	if err != nil {
		return 0, nil, err
	}
	specs := sf.ExtraSpecs
	if specs == nil {
		specs = map[string]string{}
	}
	return http.StatusOK, obj{{"extra_specs", specs}}, nil
}

// specValue is the stored form of an extra spec's value: a number as
// str() writes it.
func specValue(v any) string {
	if n, ok := v.(json.Number); ok {
		return pycompat.NumberRepr(n)
	}
	return v.(string)
}

// checkSpecValues is _check_extra_specs_value: a number's str() must fit
// 255 characters, as a string's must; from 2.86 each spec must pass
// Nova's validators.
func checkSpecValues(v version, specs obj) error {
	for _, m := range specs {
		if n, ok := m.v.(json.Number); ok && len(pycompat.NumberRepr(n)) > 255 {
			// InvalidInput(message=...) is strutils.check_string_length's words.
			return errBadRequest("extra_specs value has " + strconv.Itoa(len(pycompat.NumberRepr(n))) + " characters, more than 255.")
		}
		if v.atLeast(mvExtraSpecValidation) {
			if f := validateExtraSpec(m.k, specValue(m.v)); f != nil {
				return f
			}
		}
	}
	return nil
}

// createExtraSpecs merges the body's specs into the flavor's and
// answers the body as sent (numbers stay numbers there).
func (a *API) createExtraSpecs(c *reqCtx) (int, any, error) {
	specsV, _ := c.body.(obj).get("extra_specs")
	specs := specsV.(obj)
	if err := checkSpecValues(c.v, specs); err != nil {
		return 0, nil, err
	}
	_, err := a.flavors.update(c.r.Context(), c.vars["flavor_id"], func(f *etcdschema.Flavor) error {
		if f.ExtraSpecs == nil {
			f.ExtraSpecs = map[string]string{}
		}
		for _, m := range specs {
			f.ExtraSpecs[m.k] = specValue(m.v)
		}
		return nil
	})
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, c.body, nil
}

func (a *API) updateExtraSpec(c *reqCtx) (int, any, error) {
	body := c.body.(obj)
	if err := checkSpecValues(c.v, body); err != nil {
		return 0, nil, err
	}
	key := c.vars["id"]
	v, ok := body.get(key)
	if !ok {
		return 0, nil, errBadRequest("Request body and URI mismatch")
	}
	_, err := a.flavors.update(c.r.Context(), c.vars["flavor_id"], func(f *etcdschema.Flavor) error {
		if f.ExtraSpecs == nil {
			f.ExtraSpecs = map[string]string{}
		}
		f.ExtraSpecs[key] = specValue(v)
		return nil
	})
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, c.body, nil
}

func noSuchSpec(flavorID, key string) *fault {
	return errNotFound("Flavor " + flavorID + " has no extra specs with key " + key + ".")
}

func (a *API) showExtraSpec(c *reqCtx) (int, any, error) {
	sf, err := a.visibleFlavor(c, c.vars["flavor_id"])
	if err != nil {
		return 0, nil, err
	}
	key := c.vars["id"]
	v, ok := sf.ExtraSpecs[key]
	if !ok {
		return 0, nil, noSuchSpec(c.vars["flavor_id"], key)
	}
	return http.StatusOK, obj{{key, v}}, nil
}

func (a *API) deleteExtraSpec(c *reqCtx) (int, any, error) {
	key := c.vars["id"]
	_, err := a.flavors.update(c.r.Context(), c.vars["flavor_id"], func(f *etcdschema.Flavor) error {
		if _, ok := f.ExtraSpecs[key]; !ok {
			return noSuchSpec(c.vars["flavor_id"], key)
		}
		delete(f.ExtraSpecs, key)
		return nil
	})
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, nil, nil
}

// ---- os-flavor-access ------------------------------------------------------

func accessView(f *etcdschema.Flavor) obj {
	list := make([]obj, len(f.Projects))
	for i, p := range f.Projects {
		list[i] = obj{{"flavor_id", f.ID}, {"tenant_id", p}}
	}
	return obj{{"flavor_access", list}}
}

func (a *API) listFlavorAccess(c *reqCtx) (int, any, error) {
	sf, err := a.flavors.get(c.r.Context(), c.vars["flavor_id"])
	if err != nil {
		return 0, nil, err
	}
	if sf.IsPublic() {
		return 0, nil, errNotFound("Access list not available for public flavors.")
	}
	return http.StatusOK, accessView(&sf.Flavor), nil
}

func tenantOf(body any, action string) string {
	inner, _ := body.(obj).get(action)
	t, _ := inner.(obj).get("tenant")
	return t.(string)
}

// addTenantAccess is _add_tenant_access. Nova also asks Keystone whether
// the project exists (identity.verify_project_id); Berth has no project
// list to ask yet.
func (a *API) addTenantAccess(c *reqCtx) (int, any, error) {
	tenant, id := tenantOf(c.body, "addTenantAccess"), c.vars["id"]
	f, err := a.flavors.update(c.r.Context(), id, func(f *etcdschema.Flavor) error {
		if c.v.atLeast(mvAccessToPublic409) && f.IsPublic() {
			return errConflict("Can not add access to a public flavor.")
		}
		if slices.Contains(f.Projects, tenant) {
			return errConflict("Flavor access already exists for flavor " + id + " and project " + tenant + " combination.")
		}
		f.Projects = append(f.Projects, tenant)
		return nil
	})
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, accessView(f), nil
}

func (a *API) removeTenantAccess(c *reqCtx) (int, any, error) {
	tenant, id := tenantOf(c.body, "removeTenantAccess"), c.vars["id"]
	f, err := a.flavors.update(c.r.Context(), id, func(f *etcdschema.Flavor) error {
		i := slices.Index(f.Projects, tenant)
		if i < 0 {
			return errNotFound("Flavor access not found for " + id + " / " + tenant + " combination.")
		}
		f.Projects = slices.Delete(f.Projects, i, i+1)
		return nil
	})
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, accessView(f), nil
}
