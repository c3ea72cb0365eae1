package images

import (
	"cmp"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/berth-project/berth/etcdschema"
)

// Glance's paging defaults (limit_param_default, api_limit_max).
const (
	defaultLimit = 25
	maxLimit     = 1000
)

// sortKeys are Glance's _available_sort_keys, in its order (its 400 lists
// them so).
var sortKeys = []string{"name", "status", "container_format", "disk_format", "size", "id", "created_at", "updated_at"}

// listQuery is GET /v2/images's query, as Glance's RequestDeserializer.index
// and ImagesController.index read it.
type listQuery struct {
	limit      int
	marker     string // "" for none
	sortKeys   []string
	sortDirs   []string // one per sort key
	visibility string   // "" for none
	// exact are the filters on the image's own attributes (name, status,
	// owner, id, the formats, min_ram, min_disk), each a set of accepted
	// values ("in:a,b" gives several).
	exact map[string][]string
	// times are the created_at and updated_at filters ("gte:<time>").
	times     []timeFilter
	protected *bool
	hidden    bool
	tags      []string
	// none is set by a filter no Berth image can pass: on its size or
	// checksums, which are always null.
	none bool
	// properties are the other parameters: Glance filters on the image's
	// additional properties by them, exactly.
	properties map[string]string
}

// opAttrs are the attributes filtered with an operator, "in:" (a list)
// or "eq:" (the default); exactAttrs by their value as given.
var (
	opAttrs    = []string{"name", "id", "status", "container_format", "disk_format"}
	exactAttrs = []string{"owner", "min_ram", "min_disk"}
)

// timeFilter is a created_at or updated_at filter: op is one of gt,
// gte, lt, lte, eq, neq.
type timeFilter struct {
	attr, op string
	at       time.Time
}

// splitFilterOp is glance.common.utils.split_filter_op: "op:value", or
// "eq" with the whole expression when it has no colon or is itself an
// ISO 8601 time.
func splitFilterOp(expr string) (op, value string) {
	left, right, found := strings.Cut(expr, ":")
	if !found {
		return "eq", expr
	}
	if _, ok := parseISOTime(expr); ok {
		return "eq", expr
	}
	return left, right
}

// parseISOTime is oslo's parse_isotime for the forms clients send; a
// time without a zone is UTC.
func parseISOTime(s string) (time.Time, bool) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05Z0700", "2006-01-02T15:04:05.999999999",
		"2006-01-02T15:04Z07:00", "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), true
		}
	}
	return time.Time{}, false
}

// splitQuoted is split_filter_value_for_quotes with validate_quotes: an
// "in:" list, a value with commas written in double quotes.
func splitQuoted(v string) ([]string, *apiError) {
	open := true
	for i := 0; i < len(v); i++ {
		if v[i] != '"' || (i > 0 && v[i-1] == '\\') {
			continue
		}
		if open && i > 0 && v[i-1] != ',' {
			return nil, badRequest("Invalid filter value " + v + ". There is no comma before opening quotation mark.")
		}
		if !open && i+1 != len(v) && v[i+1] != ',' {
			return nil, badRequest("Invalid filter value " + v + ". There is no comma after closing quotation mark.")
		}
		open = !open
	}
	if !open {
		return nil, badRequest("Invalid filter value " + v + ". The quote is not closed.")
	}
	var out []string
	for _, m := range quotedItem.FindAllStringSubmatch(v, -1) {
		out = append(out, m[1]+m[2])
	}
	return out, nil
}

var quotedItem = regexp.MustCompile(`"([^"\\]*(?:\\.[^"\\]*)*)",?|([^,]+),?|,`)

// parseList reads q in Glance's order, answering its 400s. params are
// the query's keys in the order they came, for the links.
func parseList(q url.Values) (*listQuery, *apiError) {
	q = cloneValues(q)
	lq := &listQuery{exact: map[string][]string{}, properties: map[string]string{}}
	pop := func(k string) (string, bool) {
		v, ok := q[k]
		if !ok || len(v) == 0 {
			return "", false
		}
		delete(q, k)
		return v[len(v)-1], true // webob's params.get: the last value
	}
	limit, hasLimit := pop("limit")
	lq.marker, _ = pop("marker")
	memberStatus, hasMS := pop("member_status")
	lq.tags = trimAll(q["tag"])
	delete(q, "tag")
	if v, ok := q["visibility"]; ok {
		lq.visibility = v[len(v)-1]
		if !slices.Contains([]string{"community", "public", "private", "shared", "all"}, lq.visibility) {
			return nil, badRequest("Invalid visibility value: " + lq.visibility)
		}
	}
	if _, ok := q["changes-since"]; ok {
		return nil, badRequest(`The "changes-since" filter is no longer available on v2.`)
	}
	if hasMS && !slices.Contains([]string{"pending", "accepted", "rejected", "all"}, memberStatus) {
		return nil, badRequest("Invalid status: " + memberStatus)
	}
	if hasLimit {
		n, err := strconv.Atoi(strings.TrimSpace(limit))
		if err != nil {
			return nil, badRequest("limit param must be an integer")
		}
		if n < 0 {
			return nil, badRequest("limit param must be positive")
		}
		lq.limit = n
	} else {
		lq.limit = defaultLimit
	}
	lq.limit = min(lq.limit, maxLimit)
	if e := lq.parseSort(q); e != nil {
		return nil, e
	}
	delete(q, "visibility")
	hidden := "false"
	if v, ok := pop("os_hidden"); ok {
		hidden = strings.ToLower(v)
	}
	if hidden != "true" && hidden != "false" {
		return nil, badRequest("Invalid value '" + hidden + "' for 'os_hidden' filter. Valid values are 'true' or 'false'.")
	}
	lq.hidden = hidden == "true"
	if v, ok := pop("protected"); ok {
		if v != "true" && v != "false" {
			return nil, badRequest("Invalid value '" + v + "' for 'protected' filter. Valid values are 'true' or 'false'.")
		}
		b := v == "true"
		lq.protected = &b
	}
	for _, k := range opAttrs {
		if v, ok := pop(k); ok {
			switch op, val := splitFilterOp(v); op {
			case "in":
				list, e := splitQuoted(val)
				if e != nil {
					return nil, e
				}
				lq.exact[k] = list
			case "eq":
				lq.exact[k] = []string{val}
			default:
				return nil, badRequest("Unable to filter by unknown operator '" + op + "'.")
			}
		}
	}
	for _, k := range exactAttrs {
		if v, ok := pop(k); ok {
			lq.exact[k] = []string{v}
		}
	}
	for _, k := range []string{"created_at", "updated_at"} {
		if v, ok := pop(k); ok {
			op, val := splitFilterOp(v)
			at, ok := parseISOTime(val)
			if !ok {
				return nil, badRequest(`Bad "` + k + `" query filter format. Use ISO 8601 DateTime notation.`)
			}
			if !slices.Contains([]string{"gt", "gte", "lt", "lte", "eq", "neq"}, op) {
				return nil, badRequest("Unable to filter on a unknown operator.")
			}
			lq.times = append(lq.times, timeFilter{attr: k, op: op, at: at})
		}
	}
	for _, k := range []string{"size_min", "size_max", "virtual_size_min", "virtual_size_max"} {
		if v, ok := pop(k); ok {
			if _, err := strconv.Atoi(v); err != nil {
				return nil, badRequest("Unable to filter on a range with a non-numeric value.")
			}
			lq.none = true // size is null: no range holds it
		}
	}
	for _, k := range []string{"checksum", "os_hash_value", "size", "virtual_size"} {
		if _, ok := pop(k); ok {
			lq.none = true
		}
	}
	for k, v := range q {
		lq.properties[k] = v[len(v)-1]
	}
	return lq, nil
}

// parseSort is _get_sorting_params: sort=k:dir,... or repeated
// sort_key/sort_dir, not both; Glance's defaults are created_at desc.
func (lq *listQuery) parseSort(q url.Values) *apiError {
	checkKey := func(k string) *apiError {
		if !slices.Contains(sortKeys, k) {
			return badRequest("Invalid sort key: " + k + ". It must be one of the following: " + strings.Join(sortKeys, ", ") + ".")
		}
		return nil
	}
	checkDir := func(d string) *apiError {
		if d != "asc" && d != "desc" {
			return badRequest("Invalid sort direction: " + d)
		}
		return nil
	}
	if s, ok := q["sort"]; ok {
		if _, k := q["sort_key"]; k {
			return badRequest("Old and new sorting syntax cannot be combined")
		}
		if _, d := q["sort_dir"]; d {
			return badRequest("Old and new sorting syntax cannot be combined")
		}
		for _, part := range strings.Split(strings.TrimSpace(s[len(s)-1]), ",") {
			k, d, _ := strings.Cut(part, ":")
			if d == "" {
				d = "desc"
			}
			k, d = strings.TrimSpace(k), strings.TrimSpace(d)
			if e := checkKey(k); e != nil {
				return e
			}
			if e := checkDir(d); e != nil {
				return e
			}
			lq.sortKeys, lq.sortDirs = append(lq.sortKeys, k), append(lq.sortDirs, d)
		}
		delete(q, "sort")
	} else {
		for _, k := range q["sort_key"] {
			k = strings.TrimSpace(k)
			if e := checkKey(k); e != nil {
				return e
			}
			lq.sortKeys = append(lq.sortKeys, k)
		}
		for _, d := range q["sort_dir"] {
			d = strings.TrimSpace(d)
			if e := checkDir(d); e != nil {
				return e
			}
			lq.sortDirs = append(lq.sortDirs, d)
		}
		if len(lq.sortDirs) > 1 && len(lq.sortDirs) != len(lq.sortKeys) {
			return badRequest("Number of sort dirs does not match the number of sort keys")
		}
		delete(q, "sort_key")
		delete(q, "sort_dir")
	}
	if len(lq.sortKeys) == 0 {
		lq.sortKeys = []string{"created_at"}
	}
	// image_get_all: one direction serves every key; then created_at
	// and id are added, in the last default direction, so the order is
	// total and a marker names one place in it.
	def := "desc"
	if len(lq.sortDirs) == 1 {
		def = lq.sortDirs[0]
	}
	for len(lq.sortDirs) < len(lq.sortKeys) {
		lq.sortDirs = append(lq.sortDirs, def)
	}
	for _, k := range []string{"created_at", "id"} {
		if !slices.Contains(lq.sortKeys, k) {
			lq.sortKeys, lq.sortDirs = append(lq.sortKeys, k), append(lq.sortDirs, def)
		}
	}
	return nil
}

func cloneValues(q url.Values) url.Values {
	out := make(url.Values, len(q))
	for k, v := range q {
		out[k] = append([]string(nil), v...)
	}
	return out
}

func trimAll(ss []string) []string {
	out := make([]string, 0, len(ss))
	for _, s := range ss {
		out = append(out, strings.TrimSpace(s))
	}
	return out
}

// matches says whether img passes the query's filters (visibility
// apart: see selectPage).
func (lq *listQuery) matches(img *etcdschema.Image) bool {
	if lq.none || lq.hidden { // no Berth image is hidden
		return false
	}
	if lq.protected != nil && img.Protected != *lq.protected {
		return false
	}
	for k, accepted := range lq.exact {
		v, null := attr(img, k)
		if null || !slices.Contains(accepted, v) {
			return false
		}
	}
	for _, f := range lq.times {
		if !f.holds(img) {
			return false
		}
	}
	for _, t := range lq.tags {
		if !slices.Contains(img.Tags, t) {
			return false
		}
	}
	for k, want := range lq.properties {
		got, ok := img.Properties[k]
		if k == CommandProperty {
			got, ok = FormatCommand(img.Command), img.Command != nil
		}
		if !ok || got != want {
			return false
		}
	}
	return true
}

// holds compares the image's time, to the second as Glance keeps it.
func (f timeFilter) holds(img *etcdschema.Image) bool {
	t := img.CreatedAt
	if f.attr == "updated_at" {
		t = img.UpdatedAt
	}
	c := t.UTC().Truncate(time.Second).Compare(f.at)
	switch f.op {
	case "gt":
		return c > 0
	case "gte":
		return c >= 0
	case "lt":
		return c < 0
	case "lte":
		return c <= 0
	case "neq":
		return c != 0
	}
	return c == 0
}

// attr is an attribute as a filter or a sort compares it; null is true
// for Glance's NULL (a null name, owner or format; size always).
func attr(img *etcdschema.Image, k string) (v string, null bool) {
	str := func(p *string) (string, bool) {
		if p == nil {
			return "", true
		}
		return *p, false
	}
	switch k {
	case "name":
		return str(img.Name)
	case "owner":
		return str(img.Owner)
	case "disk_format":
		return str(img.DiskFormat)
	case "container_format":
		return str(img.ContainerFormat)
	case "status":
		return img.Status, false
	case "id":
		return img.ID, false
	case "min_ram":
		return strconv.Itoa(img.MinRAMMB), false
	case "min_disk":
		return strconv.Itoa(img.MinDiskGB), false
	case "created_at":
		return img.CreatedAt.UTC().Format(time.RFC3339Nano), false
	case "updated_at":
		return img.UpdatedAt.UTC().Format(time.RFC3339Nano), false
	}
	return "", true // size
}

// compare orders a before b by the query's keys; NULL sorts first
// ascending, as in Glance's databases.
func (lq *listQuery) compare(a, b *etcdschema.Image) int {
	for i, k := range lq.sortKeys {
		var c int
		switch k {
		case "created_at":
			c = a.CreatedAt.Compare(b.CreatedAt)
		case "updated_at":
			c = a.UpdatedAt.Compare(b.UpdatedAt)
		default:
			av, an := attr(a, k)
			bv, bn := attr(b, k)
			switch {
			case an && bn:
			case an:
				c = -1
			case bn:
				c = 1
			default:
				c = cmp.Compare(av, bv)
			}
		}
		if lq.sortDirs[i] == "desc" {
			c = -c
		}
		if c != 0 {
			return c
		}
	}
	return 0
}

// selectPage is image_get_all for the caller: the images it may list
// that pass the filters, sorted, after the marker, at most limit; more
// is set when the page is full (Glance then gives a next link, even if
// nothing follows). A marker the caller cannot see is a 400.
func selectPage(all []etcdschema.Image, who caller, lq *listQuery) (page []*etcdschema.Image, more bool, e *apiError) {
	var marker *etcdschema.Image
	if lq.marker != "" {
		for i := range all {
			if all[i].ID == lq.marker && who.sees(&all[i]) {
				marker = &all[i]
			}
		}
		if marker == nil {
			return nil, false, badRequest("No image found with ID " + lq.marker)
		}
	}
	for i := range all {
		img := &all[i]
		visible := who.listed(img)
		switch lq.visibility {
		case "":
		case "all":
			visible = who.sees(img)
		default:
			visible = who.sees(img) && img.Visibility == lq.visibility
		}
		if !visible || !lq.matches(img) {
			continue
		}
		if marker != nil && lq.compare(img, marker) <= 0 {
			continue
		}
		page = append(page, img)
	}
	slices.SortFunc(page, lq.compare)
	if len(page) > lq.limit {
		page = page[:lq.limit]
	}
	return page, len(page) != 0 && len(page) == lq.limit, nil
}
