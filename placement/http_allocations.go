package placement

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
)

// incompleteConsumerID is Placement's incomplete_consumer_project_id and
// user_id, used before 1.8 made project and user required.
const incompleteConsumerID = "00000000-0000-0000-0000-000000000000"

// allocationBody reads one consumer's allocation body, already
// validated against its microversion's schema, into a write. post marks a
// body from POST /allocations, which always has the dict form.
func allocationBody(c *reqCtx, obj map[string]any, post bool) AllocationWrite {
	w := AllocationWrite{Allocations: map[string]ProviderAllocation{}}
	w.ProjectID, _ = obj["project_id"].(string)
	w.UserID, _ = obj["user_id"].(string)
	if w.ProjectID == "" {
		w.ProjectID, w.UserID = incompleteConsumerID, incompleteConsumerID
	}
	if gv, ok := obj["consumer_generation"]; ok && gv != nil {
		g, _ := jsonInt(gv)
		w.ConsumerGeneration = &g
	}
	w.ConsumerType, _ = obj["consumer_type"].(string)
	resources := func(rv any) map[string]int64 {
		out := map[string]int64{}
		for rc, n := range rv.(map[string]any) {
			out[rc], _ = jsonInt(n)
		}
		return out
	}
	if list, ok := obj["allocations"].([]any); ok && !post {
		// Before 1.12: a list of {resource_provider: {uuid}, resources};
		// as in Placement, a provider listed twice keeps its last entry.
		for _, item := range list {
			io := item.(map[string]any)
			u := io["resource_provider"].(map[string]any)["uuid"].(string)
			w.Allocations[u] = ProviderAllocation{Resources: resources(io["resources"])}
		}
		return w
	}
	for rp, av := range obj["allocations"].(map[string]any) {
		w.Allocations[rp] = ProviderAllocation{Resources: resources(av.(map[string]any)["resources"])}
	}
	return w
}

// unknownAllocationClass finds a resource class in writes that does not
// exist, once a claim has failed for want of inventory: a class that does
// not exist can have no inventory, so this costs nothing on the way to a
// successful claim. Placement answers that case with a 400, not a 409.
func (s *Service) unknownAllocationClass(c *reqCtx, claimErr error, writes map[string]AllocationWrite) (string, error) {
	if !errors.Is(claimErr, ErrInsufficientCapacity) {
		return "", nil
	}
	for _, cu := range sortedKeys(writes) {
		for _, rp := range sortedKeys(writes[cu].Allocations) {
			for _, rc := range sortedKeys(writes[cu].Allocations[rp].Resources) {
				ok, err := s.classExists(c.r.Context(), rc)
				if err != nil {
					return "", err
				}
				if !ok {
					return rc, nil
				}
			}
		}
	}
	return "", nil
}

// providersWithoutInventory is Placement's first capacity check: a
// provider in the write that has inventory of none of the classes the
// write asks for fails the whole write, naming every class asked for (in
// class id order) and every such provider. Like unknownAllocationClass it
// runs only once a claim has failed for want of inventory.
func (s *Service) providersWithoutInventory(c *reqCtx, claimErr error, writes map[string]AllocationWrite) (*httpError, error) {
	if !errors.Is(claimErr, ErrInsufficientCapacity) {
		return nil, nil
	}
	classes := map[string]bool{}
	providers := map[string]bool{}
	for _, w := range writes {
		for rp, a := range w.Allocations {
			providers[rp] = true
			for rc := range a.Resources {
				classes[rc] = true
			}
		}
	}
	var missing []string
	for _, rp := range sortedKeys(providers) {
		sp, err := s.getProvider(c.r.Context(), rp)
		if errors.Is(err, ErrProviderNotFound) {
			continue
		} else if err != nil {
			return nil, err
		}
		has := false
		for rc := range classes {
			if _, ok := sp.p.Inventories[rc]; ok {
				has = true
			}
		}
		if !has {
			missing = append(missing, rp)
		}
	}
	if len(missing) == 0 {
		return nil, nil
	}
	return errConflict(codeDefault, "Unable to allocate inventory: Inventory for '%s' on resource provider '%s' invalid.",
		strings.Join(classIDOrder(classes), ", "), strings.Join(missing, ", ")), nil
}

// classIDOrder lists classes in the order of Placement's class ids, as it
// names them in a message: the standard ones in os-resource-classes'
// order, then the custom ones (by name here; by creation there).
func classIDOrder(classes map[string]bool) []string {
	names := sortedKeys(classes)
	rank := func(rc string) int {
		if i := slices.Index(standardResourceClasses, rc); i >= 0 {
			return i
		}
		return len(standardResourceClasses)
	}
	sort.SliceStable(names, func(i, j int) bool { return rank(names[i]) < rank(names[j]) })
	return names
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
	if err := c.requireContent(); err != nil {
		return err
	}
	if err := c.requireAdmin("placement:allocations:update"); err != nil {
		return err
	}
	consumer := c.vars["consumer_uuid"]
	if !isUUIDLike(consumer) {
		return errBadRequest("Malformed consumer_uuid: %s", consumer)
	}
	consumer = normalizeUUID(consumer)
	v, err := c.readBody(pickSchema(c.mv, putAllocationVersions, schemaPutAllocations))
	if err != nil {
		return err
	}
	w := allocationBody(c, v.(map[string]any), false)
	rev, err := s.PutAllocationsWithOptions(c.r.Context(), map[string]AllocationWrite{consumer: w},
		ClaimOptions{IgnoreConsumerGeneration: !c.atLeast(28)})
	if err != nil {
		if rc, uerr := s.unknownAllocationClass(c, err, map[string]AllocationWrite{consumer: w}); uerr != nil {
			return uerr
		} else if rc != "" {
			return errBadRequest("Unable to allocate inventory for consumer %s: No such resource class %s.", consumer, rc)
		}
		if herr, rerr := s.providersWithoutInventory(c, err, map[string]AllocationWrite{consumer: w}); rerr != nil {
			return rerr
		} else if herr != nil {
			return herr
		}
		return allocationError(consumer, err)
	}
	_ = s.WaitForRevision(c.r.Context(), rev)
	return c.writeEmpty(204)
}

func (s *Service) postAllocations(c *reqCtx) error {
	if err := c.minVersion(13, 404); err != nil {
		return err
	}
	if err := c.requireContent(); err != nil {
		return err
	}
	if err := c.requireAdmin("placement:allocations:manage"); err != nil {
		return err
	}
	v, err := c.readBody(pickSchema(c.mv, postAllocationVersions, schemaPostAllocations))
	if err != nil {
		return err
	}
	writes := map[string]AllocationWrite{}
	for cu, body := range v.(map[string]any) {
		writes[cu] = allocationBody(c, body.(map[string]any), true)
	}
	rev, err := s.PutAllocationsWithOptions(c.r.Context(), writes, ClaimOptions{IgnoreConsumerGeneration: !c.atLeast(28)})
	if err != nil {
		if errors.Is(err, ErrProviderNotFound) {
			return errBadRequest("Unable to allocate inventory %s", errDetail(err))
		}
		if rc, uerr := s.unknownAllocationClass(c, err, writes); uerr != nil {
			return uerr
		} else if rc != "" {
			return errBadRequest("Unable to allocate inventory No such resource class %s.", rc)
		}
		if herr, rerr := s.providersWithoutInventory(c, err, writes); rerr != nil {
			return rerr
		} else if herr != nil {
			return herr
		}
		return allocationError("", err)
	}
	_ = s.WaitForRevision(c.r.Context(), rev)
	return c.writeEmpty(204)
}

func (s *Service) getAllocations(c *reqCtx) error {
	if err := c.acceptAndRead("placement:allocations:list"); err != nil {
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
	if err := c.acceptAndRead("placement:resource_providers:allocations:list"); err != nil {
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
	if err := c.acceptAndRead("placement:resource_providers:usages"); err != nil {
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
	sch := schemaUsages
	if c.atLeast(38) {
		sch = schemaUsages138
	}
	if err := validateQuery(c, sch); err != nil {
		return err
	}
	ctype := q.Get("consumer_type")
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
