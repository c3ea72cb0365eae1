package httpapi

import (
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/berth-project/berth/internal/pycompat"
	"github.com/berth-project/berth/placement"
)

var (
	groupKeyRe    = regexp.MustCompile(`^(resources|required|member_of|in_tree)([1-9][0-9]*)?$`)
	groupKeyRe133 = regexp.MustCompile(`^(resources|required|member_of|in_tree)([a-zA-Z0-9_-]{1,64})?$`)
)

// candidateSchema is GET /allocation_candidates' query schema at mv.
func candidateSchema(mv int) *pycompat.Schema {
	return pickSchema(mv, candidatesVersions, schemaCandidates)
}

// orderedQueryKeys lists the query's keys in the order they first appear,
// which is the order Placement builds request groups in and checks them.
func orderedQueryKeys(raw string) []string {
	var keys []string
	seen := map[string]bool{}
	for _, part := range strings.FieldsFunc(raw, func(r rune) bool { return r == '&' || r == ';' }) {
		k, _, _ := strings.Cut(part, "=")
		if uk, err := url.QueryUnescape(k); err == nil {
			k = uk
		}
		if !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	return keys
}

// parseCandidateQuery turns GET /allocation_candidates parameters into a
// CandidateQuery in the order Placement's list_allocation_candidates
// checks them: the query schema of the microversion, the request-wide
// parameters (RequestWideParams.from_request), the request groups and
// their consistency (RequestGroup.dict_from_request), group_policy, and
// then the existence of every resource class and trait named
// (AllocationCandidates.get_by_requests).
func (s *API) parseCandidateQuery(c *reqCtx) (placement.CandidateQuery, error) {
	if err := validateQuery(c, candidateSchema(c.mv)); err != nil {
		return placement.CandidateQuery{}, err
	}
	cq, subtreeSuffixes, err := requestWideParams(c)
	if err != nil {
		return cq, err
	}
	groups, err := dictFromRequest(c, subtreeSuffixes)
	if err != nil {
		return cq, err
	}
	if err := checkGroupPolicy(cq.GroupPolicy, groups); err != nil {
		return cq, err
	}
	if err := s.checkNamesExist(c, cq, groups); err != nil {
		return cq, err
	}
	for _, sfx := range groups.order {
		cq.Groups = append(cq.Groups, *groups.bySuffix[sfx])
	}
	cq.NotNestedAware = !c.atLeast(29)
	return cq, nil
}

// requestWideParams is RequestWideParams.from_request: limit,
// group_policy, root_required and same_subtree, which apply to the
// request as a whole. It also returns every suffix same_subtree names.
func requestWideParams(c *reqCtx) (placement.CandidateQuery, map[string]bool, error) {
	var cq placement.CandidateQuery
	q := c.query()
	if v, ok := q["limit"]; ok {
		cq.Limit, _ = strconv.Atoi(v[0])
	}
	if v, ok := q["group_policy"]; ok {
		cq.GroupPolicy = v[0]
	}
	if v, ok := q["root_required"]; ok {
		if len(v) > 1 {
			return cq, nil, &httpError{status: 400, code: codeDuplicateKey, detail: "Query parameter 'root_required' may be specified only once."}
		}
		r, f, err := parseTraitsValue(v[0], true, false)
		if err != nil {
			return cq, nil, err
		}
		var conflicts []string
		for _, set := range r {
			if slices.Contains(f, set[0]) {
				conflicts = append(conflicts, set[0])
			} else if !slices.Contains(cq.RootRequired, set[0]) {
				cq.RootRequired = append(cq.RootRequired, set[0])
			}
		}
		if len(conflicts) > 0 {
			sort.Strings(conflicts)
			return cq, nil, &httpError{status: 400, code: codeBadValue, detail: "Conflicting required and forbidden traits found in root_required: " + strings.Join(conflicts, ", ")}
		}
		cq.RootForbidden = f
	}
	subtreeSuffixes := map[string]bool{}
	for _, v := range q["same_subtree"] {
		var set []string
		for _, p := range strings.Split(v, ",") {
			p = strings.TrimSpace(p)
			if p == "" {
				return cq, nil, &httpError{status: 400, code: codeBadValue, detail: "Empty string (unsuffixed group) can not be specified in `same_subtree` "}
			}
			if !slices.Contains(set, p) {
				set = append(set, p)
			}
			subtreeSuffixes[p] = true
		}
		cq.SameSubtree = append(cq.SameSubtree, set)
	}
	return cq, subtreeSuffixes, nil
}

// requestGroups is dict_from_request's answer: the request groups by
// suffix ("" for the unsuffixed one), and the suffixes in the order their
// first key came in the query.
type requestGroups struct {
	bySuffix map[string]*placement.RequestGroup
	order    []string
}

// dictFromRequest is RequestGroup.dict_from_request: the request groups,
// checked for consistency as the microversion asks.
func dictFromRequest(c *reqCtx, subtreeSuffixes map[string]bool) (requestGroups, error) {
	groups, err := parseRequestItems(c)
	if err != nil {
		return groups, err
	}
	if c.atLeast(36) {
		var resourceless []string
		for _, sfx := range groups.order {
			if len(groups.bySuffix[sfx].Resources) == 0 {
				resourceless = append(resourceless, sfx)
			}
		}
		if err := checkForOneResources(groups, resourceless); err != nil {
			return groups, err
		}
		if err := checkResourcelessSuffix(subtreeSuffixes, resourceless); err != nil {
			return groups, err
		}
		if err := checkActualSuffix(subtreeSuffixes, groups); err != nil {
			return groups, err
		}
	} else if err := checkForOrphans(groups); err != nil {
		return groups, err
	}
	if c.atLeast(22) {
		if err := checkForbidden(groups); err != nil {
			return groups, err
		}
	}
	return groups, nil
}

// parseRequestItems is RequestGroup._parse_request_items: each
// resources, required, member_of and in_tree key, with its suffix, read
// into its group.
func parseRequestItems(c *reqCtx) (requestGroups, error) {
	keyRe := groupKeyRe
	if c.atLeast(33) {
		keyRe = groupKeyRe133
	}
	q := c.query()
	groups := requestGroups{bySuffix: map[string]*placement.RequestGroup{}}
	for _, k := range orderedQueryKeys(c.r.URL.RawQuery) {
		m := keyRe.FindStringSubmatch(k)
		vals := q[k]
		if m == nil || len(vals) == 0 {
			continue
		}
		prefix, suffix := m[1], m[2]
		g, ok := groups.bySuffix[suffix]
		if !ok {
			g = &placement.RequestGroup{Suffix: suffix}
			groups.bySuffix[suffix] = g
			groups.order = append(groups.order, suffix)
		}
		switch prefix {
		case "resources":
			res, err := parseResources(vals[len(vals)-1])
			if err != nil {
				return groups, err
			}
			g.Resources = res
		case "required":
			r, f, err := parseRequired(c, vals)
			if err != nil {
				return groups, err
			}
			g.Required, g.RequiredAny = nil, nil
			for _, set := range r {
				if len(set) == 1 {
					g.Required = append(g.Required, set[0])
				} else {
					g.RequiredAny = append(g.RequiredAny, set)
				}
			}
			g.Forbidden = f
		case "member_of":
			r, f, err := parseMemberOf(c, vals, suffix)
			if err != nil {
				return groups, err
			}
			g.MemberOf, g.ForbiddenAggregates = r, f
		case "in_tree":
			v := strings.TrimSpace(vals[len(vals)-1])
			if !pycompat.IsUUIDLike(v) {
				return groups, errBadRequest("Invalid query string parameters: Expected 'in_tree' parameter to be a format of uuid. Got: %s", vals[len(vals)-1])
			}
			g.InTree = normalizeUUID(v)
		}
	}
	return groups, nil
}

// checkForOneResources is RequestGroup._check_for_one_resources (1.36+).
func checkForOneResources(groups requestGroups, resourceless []string) error {
	if len(resourceless) == len(groups.order) {
		return &httpError{status: 400, code: codeMissingValue, detail: "There must be at least one resources or resources[$S] parameter."}
	}
	return nil
}

// checkResourcelessSuffix is RequestGroup._check_resourceless_suffix
// (1.36+): a group without resources must be in same_subtree.
func checkResourcelessSuffix(subtreeSuffixes map[string]bool, resourceless []string) error {
	var bad []string
	for _, sfx := range resourceless {
		if !subtreeSuffixes[sfx] {
			bad = append(bad, sfx)
		}
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		return &httpError{status: 400, code: codeBadValue, detail: "Resourceless suffixed group request should be specified in `same_subtree` query param: bad group(s) - " + pycompat.Repr(bad) + "."}
	}
	return nil
}

// checkActualSuffix is RequestGroup._check_actual_suffix (1.36+): every
// suffix same_subtree names must be a group's.
func checkActualSuffix(subtreeSuffixes map[string]bool, groups requestGroups) error {
	var bad []string
	for _, sfx := range sortedKeys(subtreeSuffixes) {
		if _, ok := groups.bySuffix[sfx]; !ok {
			bad = append(bad, sfx)
		}
	}
	if len(bad) > 0 {
		return &httpError{status: 400, code: codeBadValue, detail: "Real suffixes should be specified in `same_subtree`: " + pycompat.Repr(bad) + " not found in " + pycompat.Repr(groups.order) + "."}
	}
	return nil
}

// checkForOrphans is RequestGroup._check_for_orphans (before 1.36):
// every group has resources, and there is at least one group.
func checkForOrphans(groups requestGroups) error {
	var orphans []string
	for _, sfx := range groups.order {
		if g := groups.bySuffix[sfx]; len(g.Resources) == 0 && (len(g.Required) > 0 || len(g.RequiredAny) > 0) {
			orphans = append(orphans, "required"+sfx)
		}
	}
	if len(orphans) > 0 {
		return errBadRequest("All traits parameters must be associated with resources.  Found the following orphaned traits keys: %s", strings.Join(orphans, ", "))
	}
	for _, sfx := range groups.order {
		if g := groups.bySuffix[sfx]; len(g.Resources) == 0 && (len(g.MemberOf) > 0 || len(g.ForbiddenAggregates) > 0) {
			orphans = append(orphans, "member_of"+sfx)
		}
	}
	if len(orphans) > 0 {
		return errBadRequest("All member_of parameters must be associated with resources. Found the following orphaned member_of keys: %s", strings.Join(orphans, ", "))
	}
	for _, sfx := range groups.order {
		if len(groups.bySuffix[sfx].Resources) == 0 {
			return errBadRequest("All request groups must specify resources.")
		}
	}
	if len(groups.order) == 0 {
		return errBadRequest("At least one request group (`resources` or `resources{$S}`) is required.")
	}
	return nil
}

// checkForbidden is RequestGroup._check_forbidden (1.22+): no group may
// require only traits it also forbids.
func checkForbidden(groups requestGroups) error {
	var conflicts []string
	for _, sfx := range groups.order {
		g := groups.bySuffix[sfx]
		sets := append([][]string(nil), g.RequiredAny...)
		for _, t := range g.Required {
			sets = append(sets, []string{t})
		}
		for _, set := range sets {
			all := true
			for _, t := range set {
				all = all && slices.Contains(g.Forbidden, t)
			}
			if all {
				sorted := sortedStrings(set)
				conflicts = append(conflicts, "required"+sfx+": ("+strings.Join(sorted, ", ")+")")
			}
		}
	}
	if len(conflicts) > 0 {
		sort.Strings(conflicts)
		return errBadRequest("Conflicting required and forbidden traits found in the following traits keys: %s", strings.Join(conflicts, ", "))
	}
	return nil
}

// checkGroupPolicy is list_allocation_candidates' own check: group_policy
// is required with more than one suffixed group.
func checkGroupPolicy(policy string, groups requestGroups) error {
	if policy != "" {
		return nil
	}
	n := 0
	for _, sfx := range groups.order {
		if sfx != "" {
			n++
		}
	}
	if n > 1 {
		return errBadRequest("The \"group_policy\" parameter is required when specifying more than one \"resources{N}\" parameter.")
	}
	return nil
}

// checkNamesExist is what AllocationCandidates.get_by_requests looks up
// before it searches: root_required's traits, then per group its classes
// and traits. The first one missing is a 400.
func (s *API) checkNamesExist(c *reqCtx, cq placement.CandidateQuery, groups requestGroups) error {
	if err := s.firstMissingTrait(c, cq.RootRequired, cq.RootForbidden); err != nil {
		return err
	}
	for _, sfx := range groups.order {
		g := groups.bySuffix[sfx]
		for _, rc := range sortedKeys(g.Resources) {
			ok, err := s.svc.ClassExists(c.r.Context(), rc)
			if err != nil {
				return err
			}
			if !ok {
				return errBadRequest("Invalid resource class in resources parameter: No such resource class %s.", rc)
			}
		}
		var req []string
		for _, set := range g.RequiredAny {
			req = append(req, set...)
		}
		if err := s.firstMissingTrait(c, append(req, g.Required...), g.Forbidden); err != nil {
			return err
		}
	}
	return nil
}

// firstMissingTrait answers 400 "No such trait(s): T." for the first of
// the traits that does not exist, as Placement's trait lookup does.
func (s *API) firstMissingTrait(c *reqCtx, lists ...[]string) error {
	var names []string
	for _, l := range lists {
		names = append(names, l...)
	}
	if len(names) == 0 {
		return nil
	}
	missing, err := s.svc.MissingTraits(c.r.Context(), names)
	if err != nil {
		return err
	}
	if len(missing) > 0 {
		return errBadRequest("No such trait(s): %s.", missing[0])
	}
	return nil
}

func (s *API) allocationCandidates(c *reqCtx) error {
	cq, err := s.parseCandidateQuery(c)
	if err != nil {
		return err
	}
	if err := s.svc.SyncIndex(c.r.Context()); err != nil {
		return err
	}
	cands, err := s.svc.OrderedAllocationCandidates(c.r.Context(), cq)
	if err != nil {
		return err
	}
	requested := map[string]bool{}
	for _, g := range cq.Groups {
		for rc := range g.Resources {
			requested[rc] = true
		}
	}
	bp := candidateBufs.Get().(*[]byte)
	e := candidatesJSON{mv: c.mv, requested: requested, buf: (*bp)[:0]}
	e.encode(cands)
	cands.Release() // written: its arrays serve the next answer
	c.setCacheHeaders(s.now())
	c.writeJSONBytes(200, e.buf)
	if cap(e.buf) <= maxPooledBuf {
		*bp = e.buf
		candidateBufs.Put(bp)
	}
	return nil
}
