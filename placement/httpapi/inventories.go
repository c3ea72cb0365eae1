package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/pycompat"
	"github.com/berth-project/berth/placement"
)

// maxInt is Placement's MAX_INT, the default max_unit and every field's cap.
const maxInt = 2147483647

func serializeInventory(inv etcdschema.Inventory) map[string]any {
	return map[string]any{
		"total": inv.Total, "reserved": inv.Reserved, "min_unit": inv.MinUnit,
		"max_unit": inv.MaxUnit, "step_size": inv.StepSize, "allocation_ratio": pycompat.Float(inv.AllocationRatio),
	}
}

// echoInventory is an inventory as Placement answers a write of it: the
// fields the request gave, spelled as Python re-encodes what it read (16
// stays 16, 2.0 stays 2.0), and the defaults for the others.
func echoInventory(inv etcdschema.Inventory, given map[string]any) map[string]any {
	out := serializeInventory(inv)
	for k := range out {
		if n, ok := given[k].(json.Number); ok {
			out[k] = json.RawMessage(pycompat.NumberRepr(n))
		}
	}
	return out
}

// inventoryRecord reads one inventory object that its schema has
// validated, with Placement's defaults for the fields left out.
func inventoryRecord(obj map[string]any) etcdschema.Inventory {
	inv := etcdschema.Inventory{MinUnit: 1, MaxUnit: maxInt, StepSize: 1, AllocationRatio: 1}
	ints := map[string]*int64{"total": &inv.Total, "reserved": &inv.Reserved, "min_unit": &inv.MinUnit,
		"max_unit": &inv.MaxUnit, "step_size": &inv.StepSize}
	for k, dst := range ints {
		if v, ok := obj[k]; ok {
			*dst, _ = jsonInt(v)
		}
	}
	if v, ok := obj["allocation_ratio"]; ok {
		inv.AllocationRatio, _ = jsonNumber(v)
	}
	return inv
}

// checkCapacity is _validate_inventory_capacity.
// action is "create" or "update", as the message says.
func checkCapacity(c *reqCtx, action, rp, rc string, inv etcdschema.Inventory) error {
	capy := inv.Capacity()
	if c.atLeast(26) {
		if capy < 0 {
			return errBadRequest("Unable to %s inventory for resource provider %s: Invalid inventory for '%s' on resource provider '%s'. The reserved value is greater than total.", action, rp, rc, rp)
		}
	} else if capy <= 0 {
		return errBadRequest("Unable to %s inventory for resource provider %s: Invalid inventory for '%s' on resource provider '%s'. The reserved value is greater than or equal to total.", action, rp, rc, rp)
	}
	return nil
}

func (s *API) getInventories(c *reqCtx) error {
	id := c.vars["uuid"]
	sp, err := s.svc.ReadProvider(c.r.Context(), id)
	if errors.Is(err, placement.ErrProviderNotFound) {
		return errNotFound(fmt.Sprintf("No resource provider with uuid %s found : No resource provider with uuid %s found", id, id))
	} else if err != nil {
		return err
	}
	// In Placement's class id order, the order of its rows.
	classes, err := s.svc.ClassOrder(c.r.Context(), sortedKeys(sp.Provider.Inventories))
	if err != nil {
		return err
	}
	invs := make(orderedObject, 0, len(classes))
	for _, rc := range classes {
		invs = append(invs, member{rc, serializeInventory(sp.Provider.Inventories[rc])})
	}
	c.setCacheHeaders(lastModified(sp.Provider))
	return c.writeJSON(200, map[string]any{"resource_provider_generation": sp.Provider.Generation, "inventories": invs})
}

func (s *API) getInventory(c *reqCtx) error {
	id, rc := c.vars["uuid"], c.vars["resource_class"]
	sp, err := s.svc.ReadProvider(c.r.Context(), id)
	if errors.Is(err, placement.ErrProviderNotFound) {
		return errNotFound(fmt.Sprintf("No resource provider with uuid %s found : No resource provider with uuid %s found", id, id))
	} else if err != nil {
		return err
	}
	inv, ok := sp.Provider.Inventories[rc]
	if !ok {
		return errNotFound(fmt.Sprintf("No inventory of class %s for %s", rc, id))
	}
	out := serializeInventory(inv)
	out["resource_provider_generation"] = sp.Provider.Generation
	c.setCacheHeaders(lastModified(sp.Provider))
	return c.writeJSON(200, out)
}

// writeInventories replaces the provider's inventories via mutate, with
// Placement's rules: the generation must match, every class must exist,
// and a class with allocations cannot be removed.
func (s *API) writeInventories(c *reqCtx, id string, gen int64, mutate func(p *etcdschema.Provider) error) (*etcdschema.Provider, error) {
	p, err := s.svc.UpdateInventoriesAt(c.r.Context(), id, gen, mutate)
	switch {
	case errors.Is(err, placement.ErrProviderNotFound):
		return nil, errNotFound(fmt.Sprintf("No resource provider with uuid %s found", id))
	case errors.Is(err, placement.ErrGenerationConflict):
		return nil, errConflict(codeConcurrentUpdate, "resource provider generation conflict")
	case errors.Is(err, placement.ErrInventoryInUse):
		return nil, err // each caller words it as Placement does
	}
	return p, err
}

// unknownClass returns a 400 for the first class that does not exist.
func (s *API) unknownClass(c *reqCtx, id string, classes []string) error {
	for _, rc := range classes {
		ok, err := s.svc.ClassExists(c.r.Context(), rc)
		if err != nil {
			return err
		}
		if !ok {
			return errBadRequest("Unknown resource class in inventory for resource provider %s: No such resource class %s.", id, rc)
		}
	}
	return nil
}

func (s *API) setInventories(c *reqCtx, sp placement.ProviderRecord) error {
	id := c.vars["uuid"]
	v, err := c.readBody(schemaPutInventories)
	if err != nil {
		return err
	}
	obj := v.(map[string]any)
	gen, _ := jsonInt(obj["resource_provider_generation"])
	invs := map[string]etcdschema.Inventory{}
	for rc, iv := range obj["inventories"].(map[string]any) {
		// The schema checks only keys that look like class names; any
		// other key names no class there is, as Placement finds later.
		rec, _ := iv.(map[string]any)
		invs[rc] = inventoryRecord(rec)
	}
	if gen != sp.Provider.Generation {
		return errConflict(codeConcurrentUpdate, "resource provider generation conflict")
	}
	for _, rc := range sortedKeys(invs) {
		if err := checkCapacity(c, "update", id, rc, invs[rc]); err != nil {
			return err
		}
	}
	if err := s.unknownClass(c, id, sortedKeys(invs)); err != nil {
		return err
	}
	p, err := s.writeInventories(c, id, gen, func(p *etcdschema.Provider) error {
		p.Inventories = invs
		return nil
	})
	if errors.Is(err, placement.ErrInventoryInUse) {
		return errConflict(codeInventoryInUse, "update conflict: %s", placement.Detail(err))
	} else if err != nil {
		return err
	}
	// In the body's order: Placement answers with the inventories it
	// was given, in a dict built from the body.
	given := obj["inventories"].(map[string]any)
	out := make(orderedObject, 0, len(p.Inventories))
	for _, rc := range recordOrder(c.bodyOrder.Keys("inventories"), p.Inventories) {
		g, _ := given[rc].(map[string]any)
		out = append(out, member{rc, echoInventory(p.Inventories[rc], g)})
	}
	c.setCacheHeaders(p.UpdatedAt)
	return c.writeJSON(200, map[string]any{"resource_provider_generation": p.Generation, "inventories": out})
}

func (s *API) createInventory(c *reqCtx, sp placement.ProviderRecord) error {
	id := c.vars["uuid"]
	v, err := c.readBody(schemaPostInventory)
	if err != nil {
		return err
	}
	obj := v.(map[string]any)
	inv, rc := inventoryRecord(obj), obj["resource_class"].(string)
	var gen *int64
	if gv, ok := obj["resource_provider_generation"]; ok {
		g, _ := jsonInt(gv)
		gen = &g
	}
	if err := checkCapacity(c, "create", id, rc, inv); err != nil {
		return err
	}
	if ok, err := s.svc.ClassExists(c.r.Context(), rc); err != nil {
		return err
	} else if !ok {
		return errBadRequest("Unable to create inventory for resource provider %s: No such resource class %s.", id, rc)
	}
	if gen == nil {
		g := sp.Provider.Generation
		gen = &g
	}
	p, err := s.writeInventories(c, id, *gen, func(p *etcdschema.Provider) error {
		if _, ok := p.Inventories[rc]; ok {
			// Placement's duplicate-entry conflict is a concurrent_update.
			return errConflict(codeConcurrentUpdate, "Update conflict: Inventory for '%s' on resource provider '%s' already exists.", rc, id)
		}
		p.Inventories[rc] = inv
		return nil
	})
	if err != nil {
		return err
	}
	out := echoInventory(inv, obj)
	out["resource_provider_generation"] = p.Generation
	c.setLocation("/resource_providers/" + id + "/inventories/" + rc)
	c.setCacheHeaders(p.UpdatedAt)
	return c.writeJSON(201, out)
}

func (s *API) updateInventory(c *reqCtx, sp placement.ProviderRecord) error {
	id, rc := c.vars["uuid"], c.vars["resource_class"]
	v, err := c.readBody(schemaInventory)
	if err != nil {
		return err
	}
	obj := v.(map[string]any)
	inv := inventoryRecord(obj)
	g, _ := jsonInt(obj["resource_provider_generation"])
	gen := &g
	if g != sp.Provider.Generation {
		return errConflict(codeConcurrentUpdate, "resource provider generation conflict")
	}
	if err := checkCapacity(c, "update", id, rc, inv); err != nil {
		return err
	}
	p, err := s.writeInventories(c, id, *gen, func(p *etcdschema.Provider) error {
		if _, ok := p.Inventories[rc]; !ok {
			return errBadRequest("No inventory record with resource class for resource provider %s: No inventory of class %s found.", id, rc)
		}
		p.Inventories[rc] = inv
		return nil
	})
	if err != nil {
		return err
	}
	out := echoInventory(inv, obj)
	out["resource_provider_generation"] = p.Generation
	c.setCacheHeaders(p.UpdatedAt)
	return c.writeJSON(200, out)
}

func (s *API) deleteInventory(c *reqCtx, sp placement.ProviderRecord) error {
	id, rc := c.vars["uuid"], c.vars["resource_class"]
	gen := sp.Provider.Generation
	_, err := s.writeInventories(c, id, gen, func(p *etcdschema.Provider) error {
		if _, ok := p.Inventories[rc]; !ok {
			return errNotFound(fmt.Sprintf("No inventory of class %s found for delete: No inventory of class %s found for delete", rc, rc))
		}
		delete(p.Inventories, rc)
		return nil
	})
	if err != nil {
		// Placement answers both a lost race and an allocated class
		// with placement.concurrent_update here.
		var he *httpError
		if errors.As(err, &he) && he.code == codeConcurrentUpdate {
			return errConflict(codeConcurrentUpdate, "Unable to delete inventory of class %s: resource provider generation conflict", rc)
		}
		if errors.Is(err, placement.ErrInventoryInUse) {
			return errConflict(codeConcurrentUpdate, "Unable to delete inventory of class %s: %s", rc, placement.Detail(err))
		}
		return err
	}
	return c.writeEmpty(204)
}

func (s *API) deleteInventories(c *reqCtx, sp placement.ProviderRecord) error {
	id := c.vars["uuid"]
	gen := sp.Provider.Generation
	_, err := s.writeInventories(c, id, gen, func(p *etcdschema.Provider) error {
		p.Inventories = map[string]etcdschema.Inventory{}
		return nil
	})
	if err != nil {
		var he *httpError
		if errors.As(err, &he) && he.code == codeConcurrentUpdate {
			return errConflict(codeConcurrentUpdate, "Unable to delete inventory for resource provider %s because the inventory was updated by another process. Please retry your request.", id)
		}
		if errors.Is(err, placement.ErrInventoryInUse) {
			return errConflict(codeInventoryInUse, "%s", placement.Detail(err))
		}
		return err
	}
	return c.writeEmpty(204)
}
