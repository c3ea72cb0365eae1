package placement

import (
	"regexp"
	"sort"
	"strconv"
	"strings"
)

var (
	suffixRe125 = regexp.MustCompile(`^[1-9][0-9]*$`)
	suffixRe133 = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
)

// parseCandidateQuery turns GET /allocation_candidates parameters into a
// CandidateQuery, validating them for the request's microversion.
func (s *Service) parseCandidateQuery(c *reqCtx) (CandidateQuery, error) {
	q := c.query()
	var cq CandidateQuery
	groups := map[string]*RequestGroup{}
	group := func(suffix string) *RequestGroup {
		if g, ok := groups[suffix]; ok {
			return g
		}
		g := &RequestGroup{Suffix: suffix}
		groups[suffix] = g
		return g
	}
	prefixes := []string{"resources", "required", "member_of", "in_tree"}
	for _, k := range sortedKeys(q) {
		matched := false
		for _, p := range prefixes {
			if !strings.HasPrefix(k, p) {
				continue
			}
			suffix := k[len(p):]
			if suffix != "" {
				ok := (c.atLeast(33) && suffixRe133.MatchString(suffix)) || (c.atLeast(25) && suffixRe125.MatchString(suffix))
				if !ok {
					continue
				}
			}
			if p == "in_tree" && !c.atLeast(31) {
				continue
			}
			if p == "required" && !c.atLeast(17) {
				continue
			}
			if p == "member_of" && !c.atLeast(21) {
				continue
			}
			matched = true
			g := group(suffix)
			vals := q[k]
			switch p {
			case "resources":
				res, err := parseResources(vals[len(vals)-1])
				if err != nil {
					return cq, err
				}
				g.Resources = res
			case "required":
				r, f, err := parseRequired(c, vals)
				if err != nil {
					return cq, err
				}
				if err := s.checkTraitsExist(c, r, f, "Invalid query string parameters: %s"); err != nil {
					return cq, err
				}
				for _, set := range r {
					if len(set) == 1 {
						g.Required = append(g.Required, set[0])
					} else {
						g.RequiredAny = append(g.RequiredAny, set)
					}
				}
				g.Forbidden = append(g.Forbidden, f...)
			case "member_of":
				r, f, err := parseMemberOf(c, vals, suffix)
				if err != nil {
					return cq, err
				}
				g.MemberOf, g.ForbiddenAggregates = r, f
			case "in_tree":
				v := strings.TrimSpace(vals[len(vals)-1])
				if !isUUIDLike(v) {
					return cq, errBadRequest("Invalid query string parameters: Expected 'in_tree' parameter to be a format of uuid. Got: %s", vals[len(vals)-1])
				}
				g.InTree = normalizeUUID(v)
			}
			break
		}
		if matched {
			continue
		}
		switch {
		case k == "limit" && c.atLeast(16):
			n, err := strconv.Atoi(q.Get(k))
			if err != nil || n < 1 {
				return cq, errBadRequest("Invalid query string parameters: '%s' does not match '^[1-9][0-9]*$'", q.Get(k))
			}
			cq.Limit = n
		case k == "group_policy" && c.atLeast(25):
			v := q.Get(k)
			if v != "none" && v != "isolate" {
				return cq, errBadRequest("Invalid query string parameters: '%s' is not one of ['none', 'isolate']", v)
			}
			cq.GroupPolicy = v
		case k == "root_required" && c.atLeast(35):
			r, f, err := parseRequired(c, q[k][len(q[k])-1:])
			if err != nil {
				return cq, err
			}
			if err := s.checkTraitsExist(c, r, f, "Invalid query string parameters: %s"); err != nil {
				return cq, err
			}
			for _, set := range r {
				cq.RootRequired = append(cq.RootRequired, set...)
			}
			cq.RootForbidden = f
		case k == "same_subtree" && c.atLeast(36):
			for _, v := range q[k] {
				parts := strings.Split(v, ",")
				for _, p := range parts {
					if p == "" {
						return cq, errBadRequest("Empty string (unsuffixed group) can not be specified in `same_subtree` ")
					}
				}
				cq.SameSubtree = append(cq.SameSubtree, parts)
			}
		default:
			return cq, errBadRequest("Invalid query string parameters: Additional properties are not allowed ('%s' was unexpected)", k)
		}
	}
	if g, ok := groups[""]; ok && g.Resources == nil && c.atLeast(10) && !c.atLeast(35) {
		_ = g
	}
	numSuffixed := 0
	resourceful := 0
	for suffix, g := range groups {
		if suffix != "" {
			numSuffixed++
		}
		if len(g.Resources) > 0 {
			resourceful++
		} else if !c.atLeast(35) || suffix == "" {
			if suffix == "" {
				if _, ok := q["resources"]; !ok && !c.atLeast(35) {
					return cq, errBadRequest("Invalid query string parameters: 'resources' is a required property")
				}
			} else {
				return cq, errBadRequest("All request groups must specify resources.")
			}
		}
	}
	if len(groups) == 0 || resourceful == 0 {
		if !c.atLeast(25) {
			return cq, errBadRequest("Invalid query string parameters: 'resources' is a required property")
		}
		return cq, errBadRequest("At least one request group (`resources` or `resources{$S}`) is required.")
	}
	if numSuffixed > 1 && cq.GroupPolicy == "" {
		return cq, errBadRequest("The \"group_policy\" parameter is required when specifying more than one \"resources{N}\" parameter.")
	}
	for _, st := range cq.SameSubtree {
		for _, sfx := range st {
			if _, ok := groups[sfx]; !ok {
				return cq, errBadRequest("Real suffixes should be specified in `same_subtree`: %s", strings.Join(st, ","))
			}
		}
	}
	for _, sfx := range sortedKeys(groups) {
		g := groups[sfx]
		for _, rc := range sortedKeys(g.Resources) {
			ok, err := s.classExists(c.r.Context(), rc)
			if err != nil {
				return cq, err
			}
			if !ok {
				return cq, errBadRequest("Invalid resource class in resources parameter: No such resource class %s.", rc)
			}
		}
		cq.Groups = append(cq.Groups, *g)
	}
	cq.NotNestedAware = !c.atLeast(29)
	return cq, nil
}

func (s *Service) allocationCandidates(c *reqCtx) error {
	if err := c.minVersion(10, 404); err != nil {
		return err
	}
	if err := c.checkAccept(); err != nil {
		return err
	}
	if err := c.requireReader("placement:allocation_candidates:list"); err != nil {
		return err
	}
	cq, err := s.parseCandidateQuery(c)
	if err != nil {
		return err
	}
	if err := s.syncIndex(c.r.Context()); err != nil {
		return err
	}
	cands, err := s.AllocationCandidates(c.r.Context(), cq)
	if err != nil {
		return err
	}
	requested := map[string]bool{}
	for _, g := range cq.Groups {
		for rc := range g.Resources {
			requested[rc] = true
		}
	}
	areqs := make([]any, 0, len(cands.AllocationRequests))
	for _, ar := range cands.AllocationRequests {
		if !c.atLeast(12) {
			var list []any
			for _, rp := range sortedKeys(ar.Allocations) {
				list = append(list, map[string]any{
					"resource_provider": map[string]string{"uuid": rp},
					"resources":         ar.Allocations[rp].Resources,
				})
			}
			areqs = append(areqs, map[string]any{"allocations": list})
			continue
		}
		o := map[string]any{"allocations": ar.Allocations}
		if c.atLeast(34) {
			o["mappings"] = ar.Mappings
		}
		areqs = append(areqs, o)
	}
	sums := map[string]any{}
	for rp, ps := range cands.ProviderSummaries {
		res := map[string]any{}
		for rc, r := range ps.Resources {
			if !c.atLeast(27) && !requested[rc] {
				continue
			}
			res[rc] = map[string]int64{"capacity": r.Capacity, "used": r.Used}
		}
		o := map[string]any{"resources": res}
		if c.atLeast(17) {
			t := ps.Traits
			if t == nil {
				t = []string{}
			}
			sorted := append([]string(nil), t...)
			sort.Strings(sorted)
			o["traits"] = sorted
		}
		if c.atLeast(29) {
			var parent any
			if ps.ParentProviderUUID != "" {
				parent = ps.ParentProviderUUID
			}
			o["parent_provider_uuid"] = parent
			o["root_provider_uuid"] = ps.RootProviderUUID
		}
		sums[rp] = o
	}
	c.setCacheHeaders(s.now())
	return c.writeJSON(200, map[string]any{"allocation_requests": areqs, "provider_summaries": sums})
}

func (s *Service) reshape(c *reqCtx) error {
	if err := c.minVersion(30, 404); err != nil {
		return err
	}
	if err := c.requireAdmin("placement:reshaper:reshape"); err != nil {
		return err
	}
	return s.reshapeHTTP(c)
}
