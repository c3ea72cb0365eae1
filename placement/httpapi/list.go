package httpapi

import (
	"slices"
	"strconv"
	"strings"

	"github.com/berth-project/berth/internal/pycompat"
	"github.com/berth-project/berth/placement"
)

// parseResources is normalize_resources_qs_param.
func parseResources(v string) (map[string]int64, error) {
	if strings.TrimSpace(v) == "" {
		return nil, errBadRequest("Badly formed resources parameter. Expected resources query string parameter in form: ?resources=VCPU:2,MEMORY_MB:1024. Got: empty string.")
	}
	out := map[string]int64{}
	for _, rt := range strings.Split(v, ",") {
		parts := strings.Split(rt, ":")
		if len(parts) != 2 {
			return nil, errBadRequest("Badly formed resources parameter. Expected resources query string parameter in form: ?resources=VCPU:2,MEMORY_MB:1024. Got: %s.", rt)
		}
		n, err := strconv.ParseInt(strings.TrimSpace(parts[1]), 10, 64)
		if err != nil {
			return nil, errBadRequest("Requested resource %s expected positive integer amount. Got: %s.", parts[0], parts[1])
		}
		if n < 1 {
			return nil, errBadRequest("Requested resource %s requires amount >= 1. Got: %d.", parts[0], n)
		}
		out[parts[0]] = n
	}
	return out, nil
}

// parseRequired is normalize_traits_qs_params for one suffix: before
// 1.39 only the last value counts.
func parseRequired(c *reqCtx, values []string) ([][]string, []string, error) {
	allowForbidden, allowAny := c.atLeast(22), c.atLeast(39)
	if !allowAny && len(values) > 1 {
		values = values[len(values)-1:]
	}
	var req [][]string
	var forb []string
	for _, val := range values {
		r, f, err := parseTraitsValue(val, allowForbidden, allowAny)
		if err != nil {
			return nil, nil, err
		}
		req = append(req, r...)
		for _, t := range f {
			if !slices.Contains(forb, t) {
				forb = append(forb, t)
			}
		}
	}
	return req, forb, nil
}

// parseTraitsValue is normalize_traits_qs_param: one value, either
// "in:A,B" (any of) or "A,!B" (each required, or forbidden with "!").
func parseTraitsValue(val string, allowForbidden, allowAny bool) ([][]string, []string, error) {
	if strings.HasPrefix(val, "in:") {
		if !allowAny {
			return nil, nil, errBadRequest("Invalid query string parameters: The format 'in:HW_CPU_X86_VMX,CUSTOM_MAGIC' only supported since microversion 1.39. Got: %s", val)
		}
		var set []string
		for _, t := range strings.Split(val[3:], ",") {
			t = strings.TrimSpace(t)
			if !slices.Contains(set, t) {
				set = append(set, t)
			}
		}
		if slices.Contains(set, "") {
			return nil, nil, errBadRequest("Invalid query string parameters: Expected 'required' parameter value of the form: in:HW_CPU_X86_VMX,CUSTOM_MAGIC. Got an empty trait in: %s", val)
		}
		for _, t := range set {
			if strings.HasPrefix(t, "!") {
				return nil, nil, errBadRequest("Invalid query string parameters: The format 'in:HW_CPU_X86_VMX,CUSTOM_MAGIC' does not support forbidden traits. Got: %s", val)
			}
		}
		return [][]string{set}, nil, nil
	}
	var forb []string
	var req [][]string
	empty := false
	for _, t := range strings.Split(val, ",") {
		t = strings.TrimSpace(t)
		if strings.HasPrefix(t, "!") {
			// Like Placement, "!!FOO" is FOO forbidden.
			name := strings.TrimLeft(t, "!")
			empty = empty || name == ""
			if !slices.Contains(forb, name) {
				forb = append(forb, name)
			}
			continue
		}
		empty = empty || t == ""
		req = append(req, []string{t})
	}
	if empty {
		form := "HW_CPU_X86_VMX,!CUSTOM_MAGIC"
		if !allowForbidden {
			form = "HW_CPU_X86_VMX,CUSTOM_MAGIC"
		}
		return nil, nil, errBadRequest("Invalid query string parameters: Expected 'required' parameter value of the form: %s. Got an empty trait in: %s", form, val)
	}
	if len(forb) > 0 && !allowForbidden {
		return nil, nil, errBadRequest("Invalid query string parameters: Expected 'required' parameter value of the form: HW_CPU_X86_VMX,CUSTOM_MAGIC. Got: %s", val)
	}
	return req, forb, nil
}

// parseMemberOf is normalize_member_of_qs_params for one suffix.
func parseMemberOf(c *reqCtx, values []string, suffix string) ([][]string, []string, error) {
	if !c.atLeast(24) && len(values) > 1 {
		return nil, nil, errBadRequest("Multiple member_of%s parameters are not supported", suffix)
	}
	var req [][]string
	var forb []string
	for _, v := range values {
		if strings.Contains(v, ",") && !strings.HasPrefix(v, "in:") && !strings.HasPrefix(v, "!in:") {
			return nil, nil, errBadRequest("Multiple values for 'member_of' must be prefixed with the 'in:' or '!in:' keyword using the valid microversion. Got: %s", v)
		}
		var r, f []string
		switch {
		case strings.HasPrefix(v, "!in:"):
			f = strings.Split(v[4:], ",")
		case strings.HasPrefix(v, "!"):
			f = []string{v[1:]}
		case strings.HasPrefix(v, "in:"):
			r = strings.Split(v[3:], ",")
		default:
			r = []string{v}
		}
		for _, a := range append(append([]string(nil), r...), f...) {
			if !pycompat.IsUUIDLike(a) {
				return nil, nil, errBadRequest("Invalid query string parameters: Expected 'member_of' parameter to contain valid UUID(s). Got: %s", a)
			}
		}
		if len(r) > 0 {
			req = append(req, r)
		}
		if len(f) > 0 {
			if !c.atLeast(32) {
				return nil, nil, errBadRequest("Forbidden member_of%s parameters are not supported in the specified microversion", suffix)
			}
			forb = append(forb, f...)
		}
	}
	return req, forb, nil
}

// checkTraitsExist answers 400 for unknown traits in a filter.
func (s *API) checkTraitsExist(c *reqCtx, req [][]string, forb []string, format string) error {
	var names []string
	for _, set := range req {
		names = append(names, set...)
	}
	names = append(names, forb...)
	missing, err := s.svc.MissingTraits(c.r.Context(), names)
	if err != nil {
		return err
	}
	if len(missing) > 0 {
		return errBadRequest(format, "No such trait(s): "+strings.Join(missing, ", ")+".")
	}
	return nil
}

func (s *API) listResourceProviders(c *reqCtx) error {
	if err := validateQuery(c, schemaForListProviders(c.mv)); err != nil {
		return err
	}
	q := c.query()
	g := placement.RequestGroup{}
	if q.Has("member_of") {
		r, f, err := parseMemberOf(c, q["member_of"], "")
		if err != nil {
			return err
		}
		g.MemberOf, g.ForbiddenAggregates = r, f
	}
	if q.Has("required") {
		r, f, err := parseRequired(c, q["required"])
		if err != nil {
			return err
		}
		if err := s.checkTraitsExist(c, r, f, "Invalid trait(s) in \"required\" parameter: %s"); err != nil {
			return err
		}
		for _, set := range r {
			if len(set) == 1 {
				g.Required = append(g.Required, set[0])
			} else {
				g.RequiredAny = append(g.RequiredAny, set)
			}
		}
		g.Forbidden = f
	}
	if q.Has("resources") {
		res, err := parseResources(q.Get("resources"))
		if err != nil {
			return err
		}
		for _, rc := range sortedKeys(res) {
			ok, err := s.svc.ClassExists(c.r.Context(), rc)
			if err != nil {
				return err
			}
			if !ok {
				return errBadRequest("Invalid resource class in resources parameter: No such resource class %s.", rc)
			}
		}
		g.Resources = res
	}
	pq := placement.ProviderQuery{Name: q.Get("name"), Group: g}
	// A filter that normalises to nothing (the schema checks only the
	// last of repeated values) matches no provider, as the raw value does.
	if id := q.Get("uuid"); id != "" {
		if pq.UUID = normalizeUUID(id); pq.UUID == "" {
			pq.UUID = id
		}
	}
	if inTree := q.Get("in_tree"); inTree != "" {
		if pq.InTree = normalizeUUID(inTree); pq.InTree == "" {
			pq.InTree = inTree
		}
	}
	found, err := s.svc.ListProviders(c.r.Context(), pq)
	if err != nil {
		return err
	}
	out := make([]any, 0, len(found))
	var last = s.now()
	if len(found) > 0 {
		last = lastModified(found[0])
	}
	for _, p := range found {
		last = maxTime(last, lastModified(p))
		out = append(out, serializeProvider(c, p))
	}
	c.setCacheHeaders(last)
	return c.writeJSON(200, map[string]any{"resource_providers": out})
}
