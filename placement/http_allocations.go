package placement

import (
	"errors"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
)

// incompleteConsumerID is Placement's incomplete_consumer_project_id and
// user_id, used before 1.8 made project and user required.
const incompleteConsumerID = "00000000-0000-0000-0000-000000000000"

// parseAllocationBody validates one consumer's allocation body for the
// request's microversion and returns the write.
func parseAllocationBody(c *reqCtx, v any, post bool) (AllocationWrite, error) {
	w := AllocationWrite{Allocations: map[string]ProviderAllocation{}}
	obj, ok := v.(map[string]any)
	if !ok {
		return w, schemaErr("%s is not of type 'object'", pyRepr(v))
	}
	allowed := map[string]bool{"allocations": true}
	required := []string{"allocations"}
	if c.atLeast(8) || post {
		allowed["project_id"], allowed["user_id"] = true, true
		required = append(required, "project_id", "user_id")
	}
	if c.atLeast(28) {
		allowed["consumer_generation"] = true
		required = append(required, "consumer_generation")
	}
	if c.atLeast(34) {
		allowed["mappings"] = true
	}
	if c.atLeast(38) {
		allowed["consumer_type"] = true
		required = append(required, "consumer_type")
	}
	for _, k := range sortedKeys(obj) {
		if !allowed[k] {
			return w, schemaErr("Additional properties are not allowed ('%s' was unexpected)", k)
		}
	}
	for _, k := range required {
		if _, ok := obj[k]; !ok {
			return w, schemaErr("'%s' is a required property", k)
		}
	}
	for _, k := range []string{"project_id", "user_id"} {
		if v, ok := obj[k]; ok {
			s, ok := v.(string)
			if !ok {
				return w, schemaErr("%s is not of type 'string'", pyRepr(v))
			}
			if s == "" {
				return w, schemaErr("'' is too short")
			}
			if len(s) > 255 {
				return w, schemaErr("%s is too long", pyRepr(v))
			}
		}
	}
	w.ProjectID, _ = obj["project_id"].(string)
	w.UserID, _ = obj["user_id"].(string)
	if w.ProjectID == "" {
		w.ProjectID, w.UserID = incompleteConsumerID, incompleteConsumerID
	}
	if gv, ok := obj["consumer_generation"]; ok && gv != nil {
		g, ok := jsonInt(gv)
		if !ok {
			return w, schemaErr("%s is not of type 'integer', 'null'", pyRepr(gv))
		}
		w.ConsumerGeneration = &g
	}
	if tv, ok := obj["consumer_type"]; ok {
		ts, ok := tv.(string)
		if !ok {
			return w, schemaErr("%s is not of type 'string'", pyRepr(tv))
		}
		if !rcNameRe.MatchString(ts) {
			return w, schemaErr("%s does not match '^[A-Z0-9_]+$'", pyRepr(tv))
		}
		w.ConsumerType = ts
	}
	if mv, ok := obj["mappings"]; ok {
		m, ok := mv.(map[string]any)
		if !ok {
			return w, schemaErr("%s is not of type 'object'", pyRepr(mv))
		}
		if len(m) == 0 {
			return w, schemaErr("{} does not have enough properties")
		}
	}
	av := obj["allocations"]
	checkResources := func(rv any) (map[string]int64, error) {
		r, ok := rv.(map[string]any)
		if !ok {
			return nil, schemaErr("%s is not of type 'object'", pyRepr(rv))
		}
		if len(r) == 0 {
			return nil, schemaErr("{} does not have enough properties")
		}
		out := map[string]int64{}
		for _, rc := range sortedKeys(r) {
			if !rcNameRe.MatchString(rc) {
				return nil, schemaErr("Additional properties are not allowed ('%s' was unexpected)", rc)
			}
			n, ok := jsonInt(r[rc])
			if !ok {
				return nil, schemaErr("%s is not of type 'integer'", pyRepr(r[rc]))
			}
			if n < 1 {
				return nil, schemaErr("%d is less than the minimum of 1", n)
			}
			out[rc] = n
		}
		return out, nil
	}
	if !c.atLeast(12) && !post {
		list, ok := av.([]any)
		if !ok {
			return w, schemaErr("%s is not of type 'array'", pyRepr(av))
		}
		if len(list) == 0 {
			return w, schemaErr("[] is too short")
		}
		for _, item := range list {
			io, ok := item.(map[string]any)
			if !ok {
				return w, schemaErr("%s is not of type 'object'", pyRepr(item))
			}
			if err := onlyProps(io, "resource_provider", "resources"); err != nil {
				return w, err
			}
			rpv, ok := io["resource_provider"].(map[string]any)
			if !ok {
				return w, schemaErr("'resource_provider' is a required property")
			}
			u, ok := rpv["uuid"].(string)
			if !ok || !isUUIDLike(u) {
				return w, schemaErr("%s is not a 'uuid'", pyRepr(rpv["uuid"]))
			}
			if _, ok := io["resources"]; !ok {
				return w, schemaErr("'resources' is a required property")
			}
			res, err := checkResources(io["resources"])
			if err != nil {
				return w, err
			}
			w.Allocations[u] = ProviderAllocation{Resources: res}
		}
		return w, nil
	}
	am, ok := av.(map[string]any)
	if !ok {
		return w, schemaErr("%s is not of type 'object'", pyRepr(av))
	}
	if len(am) == 0 && !c.atLeast(28) && !post {
		return w, schemaErr("{} does not have enough properties")
	}
	for _, rp := range sortedKeys(am) {
		if !uuidPatternRe.MatchString(rp) {
			return w, schemaErr("Additional properties are not allowed ('%s' was unexpected)", rp)
		}
		ao, ok := am[rp].(map[string]any)
		if !ok {
			return w, schemaErr("%s is not of type 'object'", pyRepr(am[rp]))
		}
		if err := onlyProps(ao, "resources", "generation"); err != nil {
			return w, err
		}
		if _, ok := ao["resources"]; !ok {
			return w, schemaErr("'resources' is a required property")
		}
		res, err := checkResources(ao["resources"])
		if err != nil {
			return w, err
		}
		w.Allocations[rp] = ProviderAllocation{Resources: res}
	}
	return w, nil
}

// allocationError answers a failed allocation write as Placement does.
func allocationError(consumer string, err error) error {
	switch {
	case errors.Is(err, ErrProviderNotFound):
		return errBadRequest("%s", errDetail(err))
	case errors.Is(err, ErrInsufficientCapacity):
		return errConflict(codeDefault, "Unable to allocate inventory: %s", errDetail(err))
	case errors.Is(err, ErrConsumerGenerationConflict), errors.Is(err, ErrConcurrentUpdate):
		return errConflict(codeConcurrentUpdate, "%s", errDetail(err))
	}
	return err
}

func (s *Service) putAllocations(c *reqCtx) error {
	if err := c.requireAdmin("placement:allocations:update"); err != nil {
		return err
	}
	consumer := c.vars["consumer_uuid"]
	if !isUUIDLike(consumer) {
		return errBadRequest("Malformed consumer_uuid: %s", consumer)
	}
	consumer = normalizeUUID(consumer)
	v, err := c.readJSON()
	if err != nil {
		return err
	}
	w, err := parseAllocationBody(c, v, false)
	if err != nil {
		return err
	}
	rev, err := s.PutAllocationsWithOptions(c.r.Context(), map[string]AllocationWrite{consumer: w},
		ClaimOptions{IgnoreConsumerGeneration: !c.atLeast(28)})
	if err != nil {
		return allocationError(consumer, err)
	}
	_ = s.WaitForRevision(c.r.Context(), rev)
	return c.writeEmpty(204)
}

func (s *Service) postAllocations(c *reqCtx) error {
	if err := c.minVersion(13, 405); err != nil {
		return err
	}
	if err := c.requireAdmin("placement:allocations:manage"); err != nil {
		return err
	}
	v, err := c.readJSON()
	if err != nil {
		return err
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return schemaErr("%s is not of type 'object'", pyRepr(v))
	}
	if len(obj) == 0 {
		return schemaErr("{} does not have enough properties")
	}
	writes := map[string]AllocationWrite{}
	for _, cu := range sortedKeys(obj) {
		if !uuidPatternRe.MatchString(cu) {
			return schemaErr("Additional properties are not allowed ('%s' was unexpected)", cu)
		}
		w, err := parseAllocationBody(c, obj[cu], true)
		if err != nil {
			return err
		}
		writes[cu] = w
	}
	rev, err := s.PutAllocationsWithOptions(c.r.Context(), writes, ClaimOptions{IgnoreConsumerGeneration: !c.atLeast(28)})
	if err != nil {
		if errors.Is(err, ErrProviderNotFound) {
			return errBadRequest("Unable to allocate inventory %s", errDetail(err))
		}
		return allocationError("", err)
	}
	_ = s.WaitForRevision(c.r.Context(), rev)
	return c.writeEmpty(204)
}

func (s *Service) getAllocations(c *reqCtx) error {
	if err := c.checkAccept(); err != nil {
		return err
	}
	if err := c.requireReader("placement:allocations:list"); err != nil {
		return err
	}
	consumer := c.vars["consumer_uuid"]
	ctx := c.r.Context()
	rec, err := s.GetAllocations(ctx, consumer)
	if errors.Is(err, ErrNotFound) {
		c.setCacheHeaders(s.now())
		return c.writeJSON(200, map[string]any{"allocations": map[string]any{}})
	} else if err != nil {
		return err
	}
	rps := sortedKeys(rec.Allocations)
	ops := make([]clientv3.Op, 0, len(rps))
	for _, rp := range rps {
		ops = append(ops, clientv3.OpGet(s.keys.Provider(rp)))
	}
	resps, err := s.readMany(ctx, ops)
	if err != nil {
		return err
	}
	allocs := map[string]any{}
	for i, rp := range rps {
		var g int64
		if kvs := resps[i].GetResponseRange().Kvs; len(kvs) > 0 {
			p := &etcdschema.Provider{}
			if err := etcdschema.Decode(string(kvs[0].Key), kvs[0].Value, p); err == nil {
				g = p.Generation
			}
		}
		allocs[rp] = map[string]any{"generation": g, "resources": rec.Allocations[rp].Resources}
	}
	out := map[string]any{"allocations": allocs}
	if c.atLeast(12) {
		out["project_id"] = rec.ProjectID
		out["user_id"] = rec.UserID
	}
	if c.atLeast(28) {
		out["consumer_generation"] = rec.Generation
	}
	if c.atLeast(38) {
		out["consumer_type"] = consumerType(rec)
	}
	c.setCacheHeaders(rec.UpdatedAt)
	return c.writeJSON(200, out)
}

func consumerType(rec *etcdschema.Consumer) string {
	if rec.ConsumerType == "" {
		return "unknown"
	}
	return rec.ConsumerType
}

func (s *Service) deleteAllocationsHTTP(c *reqCtx) error {
	if err := c.requireAdmin("placement:allocations:delete"); err != nil {
		return err
	}
	consumer := c.vars["consumer_uuid"]
	rev, err := s.deleteAllocations(c.r.Context(), consumer)
	if errors.Is(err, ErrNotFound) {
		return errNotFound(fmt.Sprintf("No allocations for consumer '%s'", consumer))
	} else if err != nil {
		return allocationError(consumer, err)
	}
	_ = s.WaitForRevision(c.r.Context(), rev)
	return c.writeEmpty(204)
}

func (s *Service) providerAllocations(c *reqCtx) error {
	if err := c.checkAccept(); err != nil {
		return err
	}
	if err := c.requireReader("placement:resource_providers:allocations:list"); err != nil {
		return err
	}
	id := c.vars["uuid"]
	ctx := c.r.Context()
	sp, err := s.getProvider(ctx, id)
	if errors.Is(err, ErrProviderNotFound) {
		return errNotFound(fmt.Sprintf("Resource provider '%s' not found: No resource provider with uuid %s found", id, id))
	} else if err != nil {
		return err
	}
	if err := s.syncIndex(ctx); err != nil {
		return err
	}
	allocs := map[string]any{}
	s.idx.mu.RLock()
	for cu := range s.idx.st.rpConsumers[id] {
		ce := s.idx.st.consumers[cu]
		a := map[string]any{"resources": ce.c.Allocations[id].Resources}
		if c.atLeast(28) {
			a["consumer_generation"] = ce.c.Generation
		}
		allocs[cu] = a
	}
	s.idx.mu.RUnlock()
	c.setCacheHeaders(s.now())
	return c.writeJSON(200, map[string]any{"allocations": allocs, "resource_provider_generation": sp.p.Generation})
}

func (s *Service) providerUsages(c *reqCtx) error {
	if err := c.checkAccept(); err != nil {
		return err
	}
	if err := c.requireReader("placement:resource_providers:usages"); err != nil {
		return err
	}
	id := c.vars["uuid"]
	sp, err := s.getProvider(c.r.Context(), id)
	if errors.Is(err, ErrProviderNotFound) {
		return errNotFound(fmt.Sprintf("No resource provider with uuid %s found: No resource provider with uuid %s found", id, id))
	} else if err != nil {
		return err
	}
	usages := map[string]int64{}
	for rc := range sp.p.Inventories {
		usages[rc] = sp.p.Usages[rc]
	}
	c.setCacheHeaders(s.now())
	return c.writeJSON(200, map[string]any{"resource_provider_generation": sp.p.Generation, "usages": usages})
}

func (s *Service) totalUsages(c *reqCtx) error {
	if err := c.minVersion(9, 404); err != nil {
		return err
	}
	if err := c.checkAccept(); err != nil {
		return err
	}
	q := c.query()
	project := q.Get("project_id")
	if err := c.authorize(c.auth.projectReader(project) || c.auth.systemReader(), "placement:usages"); err != nil {
		return err
	}
	allowed := map[string]bool{"project_id": true, "user_id": true}
	if c.atLeast(38) {
		allowed["consumer_type"] = true
	}
	for _, k := range sortedKeys(q) {
		if !allowed[k] {
			return errBadRequest("Invalid query string parameters: Additional properties are not allowed ('%s' was unexpected)", k)
		}
	}
	if !q.Has("project_id") {
		return errBadRequest("Invalid query string parameters: 'project_id' is a required property")
	}
	for _, k := range []string{"project_id", "user_id", "consumer_type"} {
		if q.Has(k) && q.Get(k) == "" {
			return errBadRequest("Invalid query string parameters: '' is too short")
		}
	}
	ctype := q.Get("consumer_type")
	if ctype != "" && !(rcNameRe.MatchString(ctype) || ctype == "all" || ctype == "unknown") {
		return errBadRequest("Invalid query string parameters: '%s' does not match '^[A-Z0-9_]+$|^all|^unknown$'", ctype)
	}
	user := q.Get("user_id")
	if err := s.syncIndex(c.r.Context()); err != nil {
		return err
	}
	byType := map[string]map[string]int64{}
	counts := map[string]int64{}
	flat := map[string]int64{}
	s.idx.mu.RLock()
	for _, ce := range s.idx.st.consumers {
		rec := ce.c
		if rec.ProjectID != project || (user != "" && rec.UserID != user) {
			continue
		}
		ct := consumerType(rec)
		key := ct
		switch ctype {
		case "":
		case "all":
			key = "all"
		case "unknown":
			if ct != "unknown" {
				continue
			}
		default:
			if ct != ctype {
				continue
			}
		}
		if byType[key] == nil {
			byType[key] = map[string]int64{}
		}
		counts[key]++
		for _, a := range rec.Allocations {
			for rc, n := range a.Resources {
				byType[key][rc] += n
				flat[rc] += n
			}
		}
	}
	s.idx.mu.RUnlock()
	c.setCacheHeaders(s.now())
	if !c.atLeast(38) {
		return c.writeJSON(200, map[string]any{"usages": flat})
	}
	out := map[string]any{}
	for ct, m := range byType {
		o := map[string]any{"consumer_count": counts[ct]}
		for rc, n := range m {
			o[rc] = n
		}
		out[ct] = o
	}
	return c.writeJSON(200, map[string]any{"usages": out})
}
