package httpapi

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/berth-project/berth/internal/pycompat"
	"github.com/berth-project/berth/placement"
)

// incompleteConsumerID is Placement's incomplete_consumer_project_id and
// user_id, used before 1.8 made project and user required.
const incompleteConsumerID = "00000000-0000-0000-0000-000000000000"

// allocationBody reads one consumer's allocation body, already
// validated against its microversion's schema, into a write. post marks a
// body from POST /allocations, which always has the dict form. path is
// where obj is in the request's body, for the order its keys came in:
// the write keeps the order of the providers and of each one's classes,
// as Placement's rows do.
func allocationBody(c *reqCtx, obj map[string]any, post bool, path ...any) placement.AllocationWrite {
	w := placement.AllocationWrite{Allocations: map[string]placement.ProviderAllocation{}}
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
	resources := func(rv any, at ...any) placement.ProviderAllocation {
		out := map[string]int64{}
		for rc, n := range rv.(map[string]any) {
			out[rc], _ = jsonInt(n)
		}
		return placement.ProviderAllocation{Resources: out, Order: c.bodyOrder.Keys(append(slices.Clone(path), at...)...)}
	}
	if list, ok := obj["allocations"].([]any); ok && !post {
		// Before 1.12: a list of {resource_provider: {uuid}, resources};
		// as in Placement, a provider listed twice keeps its last entry.
		for i, item := range list {
			io := item.(map[string]any)
			u := io["resource_provider"].(map[string]any)["uuid"].(string)
			w.Allocations[u] = resources(io["resources"], "allocations", i, "resources")
			if !slices.Contains(w.Order, u) {
				w.Order = append(w.Order, u)
			}
		}
		return w
	}
	for rp, av := range obj["allocations"].(map[string]any) {
		w.Allocations[rp] = resources(av.(map[string]any)["resources"], "allocations", rp, "resources")
	}
	w.Order = c.bodyOrder.Keys(append(slices.Clone(path), "allocations")...)
	return w
}

// unknownAllocationClass finds a resource class in writes that does not
// exist, once a claim has failed for want of inventory: a class that does
// not exist can have no inventory, so this costs nothing on the way to a
// successful claim. Placement answers that case with a 400, not a 409.
func (s *API) unknownAllocationClass(c *reqCtx, claimErr error, writes map[string]placement.AllocationWrite) (string, error) {
	if !errors.Is(claimErr, placement.ErrInsufficientCapacity) {
		return "", nil
	}
	for _, cu := range sortedKeys(writes) {
		for _, rp := range sortedKeys(writes[cu].Allocations) {
			for _, rc := range sortedKeys(writes[cu].Allocations[rp].Resources) {
				ok, err := s.svc.ClassExists(c.r.Context(), rc)
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
func (s *API) providersWithoutInventory(c *reqCtx, claimErr error, writes map[string]placement.AllocationWrite) (*httpError, error) {
	if !errors.Is(claimErr, placement.ErrInsufficientCapacity) {
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
		sp, err := s.svc.ReadProvider(c.r.Context(), rp)
		if errors.Is(err, placement.ErrProviderNotFound) {
			continue
		} else if err != nil {
			return nil, err
		}
		has := false
		for rc := range classes {
			if _, ok := sp.Provider.Inventories[rc]; ok {
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
	ordered, err := s.svc.ClassOrder(c.r.Context(), sortedKeys(classes))
	if err != nil {
		return nil, err
	}
	return errConflict(codeDefault, "Unable to allocate inventory: Inventory for '%s' on resource provider '%s' invalid.",
		strings.Join(ordered, ", "), strings.Join(missing, ", ")), nil
}

// allocationError answers a failed allocation write as Placement does.
func allocationError(consumer string, err error) error {
	switch {
	case errors.Is(err, placement.ErrProviderNotFound):
		return errBadRequest("%s", placement.Detail(err))
	case errors.Is(err, placement.ErrInsufficientCapacity):
		return errConflict(codeDefault, "Unable to allocate inventory: %s", placement.Detail(err))
	case errors.Is(err, placement.ErrConsumerGenerationConflict), errors.Is(err, placement.ErrConcurrentUpdate):
		return errConflict(codeConcurrentUpdate, "%s", placement.Detail(err))
	}
	return err
}

func (s *API) putAllocations(c *reqCtx) error {
	consumer := c.vars["consumer_uuid"]
	if !pycompat.IsUUIDLike(consumer) {
		return errBadRequest("Malformed consumer_uuid: %s", consumer)
	}
	consumer = normalizeUUID(consumer)
	v, err := c.readBody(pickSchema(c.mv, putAllocationVersions, schemaPutAllocations))
	if err != nil {
		return err
	}
	w := allocationBody(c, v.(map[string]any), false)
	rev, err := s.svc.PutAllocationsWithOptions(c.r.Context(), map[string]placement.AllocationWrite{consumer: w},
		placement.ClaimOptions{IgnoreConsumerGeneration: !c.atLeast(28)})
	if err != nil {
		if rc, uerr := s.unknownAllocationClass(c, err, map[string]placement.AllocationWrite{consumer: w}); uerr != nil {
			return uerr
		} else if rc != "" {
			return errBadRequest("Unable to allocate inventory for consumer %s: No such resource class %s.", consumer, rc)
		}
		if herr, rerr := s.providersWithoutInventory(c, err, map[string]placement.AllocationWrite{consumer: w}); rerr != nil {
			return rerr
		} else if herr != nil {
			return herr
		}
		return allocationError(consumer, err)
	}
	_ = s.svc.WaitForRevision(c.r.Context(), rev)
	return c.writeEmpty(204)
}

func (s *API) postAllocations(c *reqCtx) error {
	v, err := c.readBody(pickSchema(c.mv, postAllocationVersions, schemaPostAllocations))
	if err != nil {
		return err
	}
	writes := map[string]placement.AllocationWrite{}
	for cu, body := range v.(map[string]any) {
		writes[cu] = allocationBody(c, body.(map[string]any), true, cu)
	}
	rev, err := s.svc.PutAllocationsWithOptions(c.r.Context(), writes, placement.ClaimOptions{IgnoreConsumerGeneration: !c.atLeast(28)})
	if err != nil {
		if errors.Is(err, placement.ErrProviderNotFound) {
			return errBadRequest("Unable to allocate inventory %s", placement.Detail(err))
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
	_ = s.svc.WaitForRevision(c.r.Context(), rev)
	return c.writeEmpty(204)
}

func (s *API) getAllocations(c *reqCtx) error {
	consumer := c.vars["consumer_uuid"]
	ctx := c.r.Context()
	rec, err := s.svc.GetAllocations(ctx, consumer)
	if errors.Is(err, placement.ErrNotFound) {
		c.setCacheHeaders(s.now())
		return c.writeJSON(200, map[string]any{"allocations": map[string]any{}})
	} else if err != nil {
		return err
	}
	// In the order the allocations were written, as Placement answers
	// them in the order of its rows; records that kept no order (written
	// sorted, or before the order was kept) answer sorted.
	rps := recordOrder(rec.ProvidersWritten(), rec.Allocations)
	gens, err := s.svc.ProviderGenerations(ctx, rps)
	if err != nil {
		return err
	}
	allocs := make(orderedObject, 0, len(rps))
	for _, rp := range rps {
		a := rec.Allocations[rp]
		allocs = append(allocs, member{rp, map[string]any{"generation": gens[rp], "resources": amountsIn(recordOrder(rec.ClassesWritten(rp), a.Resources), a.Resources)}})
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
		out["consumer_type"] = placement.ConsumerType(rec)
	}
	c.setCacheHeaders(rec.UpdatedAt)
	return c.writeJSON(200, out)
}

func (s *API) deleteAllocations(c *reqCtx) error {
	consumer := c.vars["consumer_uuid"]
	rev, err := s.svc.DeleteAllocationsRev(c.r.Context(), consumer)
	if errors.Is(err, placement.ErrNotFound) {
		return errNotFound(fmt.Sprintf("No allocations for consumer '%s'", consumer))
	} else if err != nil {
		return allocationError(consumer, err)
	}
	_ = s.svc.WaitForRevision(c.r.Context(), rev)
	return c.writeEmpty(204)
}

func (s *API) providerAllocations(c *reqCtx) error {
	id := c.vars["uuid"]
	ctx := c.r.Context()
	sp, err := s.svc.ReadProvider(ctx, id)
	if errors.Is(err, placement.ErrProviderNotFound) {
		return errNotFound(fmt.Sprintf("Resource provider '%s' not found: No resource provider with uuid %s found", id, id))
	} else if err != nil {
		return err
	}
	consumers, err := s.svc.ProviderAllocations(ctx, id)
	if err != nil {
		return err
	}
	// Each consumer's classes in Placement's class id order.
	var classes []string
	for _, pc := range consumers {
		for rc := range pc.Resources {
			if !slices.Contains(classes, rc) {
				classes = append(classes, rc)
			}
		}
	}
	if classes, err = s.svc.ClassOrder(ctx, classes); err != nil {
		return err
	}
	allocs := map[string]any{}
	for cu, pc := range consumers {
		a := map[string]any{"resources": amountsIn(classes, pc.Resources)}
		if c.atLeast(28) {
			a["consumer_generation"] = pc.Generation
		}
		allocs[cu] = a
	}
	c.setCacheHeaders(s.now())
	return c.writeJSON(200, map[string]any{"allocations": allocs, "resource_provider_generation": sp.Provider.Generation})
}

func (s *API) providerUsages(c *reqCtx) error {
	id := c.vars["uuid"]
	sp, err := s.svc.ReadProvider(c.r.Context(), id)
	if errors.Is(err, placement.ErrProviderNotFound) {
		return errNotFound(fmt.Sprintf("No resource provider with uuid %s found: No resource provider with uuid %s found", id, id))
	} else if err != nil {
		return err
	}
	usages := map[string]int64{}
	for rc := range sp.Provider.Inventories {
		usages[rc] = sp.Provider.Usages[rc]
	}
	// In Placement's class id order, as its query groups them.
	classes, err := s.svc.ClassOrder(c.r.Context(), sortedKeys(usages))
	if err != nil {
		return err
	}
	c.setCacheHeaders(s.now())
	return c.writeJSON(200, map[string]any{"resource_provider_generation": sp.Provider.Generation, "usages": amountsIn(classes, usages)})
}

func (s *API) totalUsages(c *reqCtx) error {
	q := c.query()
	project := q.Get("project_id")
	sch := schemaUsages
	if c.atLeast(38) {
		sch = schemaUsages138
	}
	if err := validateQuery(c, sch); err != nil {
		return err
	}
	groups, err := s.svc.Usages(c.r.Context(), placement.UsageQuery{
		ProjectID: project, UserID: q.Get("user_id"), ConsumerType: q.Get("consumer_type")})
	if err != nil {
		return err
	}
	// Placement's rows come by class id, then consumer type: its dicts
	// are filled in that order.
	var classes []string
	for _, u := range groups {
		for rc := range u.Resources {
			if !slices.Contains(classes, rc) {
				classes = append(classes, rc)
			}
		}
	}
	if classes, err = s.svc.ClassOrder(c.r.Context(), classes); err != nil {
		return err
	}
	c.setCacheHeaders(s.now())
	if !c.atLeast(38) {
		flat := map[string]int64{}
		for _, u := range groups {
			for rc, n := range u.Resources {
				flat[rc] += n
			}
		}
		return c.writeJSON(200, map[string]any{"usages": amountsIn(classes, flat)})
	}
	// Each group is filled row by row: its first class, then
	// consumer_count (set with every row), then its other classes; the
	// groups come in the order of their first row. Rows of one class
	// come by consumer type id: consumers of no type (NULL) first, then
	// the types by id (Berth keeps no type ids: by name).
	types := sortedKeys(groups)
	if i := slices.Index(types, "unknown"); i > 0 {
		types = append(append([]string{"unknown"}, types[:i]...), types[i+1:]...)
	}
	out := orderedObject{}
	byType := map[string]*orderedObject{}
	for _, rc := range classes {
		for _, ct := range types {
			u := groups[ct]
			n, ok := u.Resources[rc]
			if !ok {
				continue
			}
			o := byType[ct]
			if o == nil {
				o = &orderedObject{}
				byType[ct] = o
			}
			o.set(rc, n)
			o.set("consumer_count", u.Consumers)
		}
	}
	for _, rc := range classes {
		for _, ct := range types {
			if _, ok := groups[ct].Resources[rc]; ok {
				out.set(ct, byType[ct])
			}
		}
	}
	for _, ct := range types {
		if byType[ct] == nil {
			// A group with no usage at all (its consumers hold nothing).
			out.set(ct, orderedObject{{"consumer_count", groups[ct].Consumers}})
		}
	}
	return c.writeJSON(200, map[string]any{"usages": out})
}

// recordOrder is m's keys in the order a record kept (etcdschema's
// ProviderOrder and ConsumerAllocation.Order), or sorted when it kept
// none or one that does not fit m.
func recordOrder[V any](order []string, m map[string]V) []string {
	if len(order) == len(m) {
		fits := true
		for _, k := range order {
			if _, ok := m[k]; !ok {
				fits = false
				break
			}
		}
		if fits {
			return order
		}
	}
	return sortedKeys(m)
}
