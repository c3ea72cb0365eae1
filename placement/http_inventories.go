package placement

import (
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/berth-project/berth/etcdschema"
)

// maxInt is Placement's MAX_INT, the default max_unit and every field's cap.
const maxInt = 2147483647

var rcNameRe = regexp.MustCompile(`^[A-Z0-9_]+$`)

func serializeInventory(inv etcdschema.Inventory) map[string]any {
	return map[string]any{
		"total": inv.Total, "reserved": inv.Reserved, "min_unit": inv.MinUnit,
		"max_unit": inv.MaxUnit, "step_size": inv.StepSize, "allocation_ratio": inv.AllocationRatio,
	}
}

// inventoryRecord validates one inventory object against Placement's
// schema; gen is set when want includes resource_provider_generation.
func inventoryRecord(v any, requireGen, allowClass bool) (etcdschema.Inventory, *int64, string, error) {
	inv := etcdschema.Inventory{MinUnit: 1, MaxUnit: maxInt, StepSize: 1, AllocationRatio: 1}
	obj, ok := v.(map[string]any)
	if !ok {
		return inv, nil, "", schemaErr("%s is not of type 'object'", pyRepr(v))
	}
	var gen *int64
	rc := ""
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		val := obj[k]
		switch k {
		case "resource_provider_generation":
			n, ok := jsonInt(val)
			if !ok {
				return inv, nil, "", schemaErr("%s is not of type 'integer'", pyRepr(val))
			}
			gen = &n
		case "resource_class":
			if !allowClass {
				return inv, nil, "", schemaErr("Additional properties are not allowed ('%s' was unexpected)", k)
			}
			s, ok := val.(string)
			if !ok {
				return inv, nil, "", schemaErr("%s is not of type 'string'", pyRepr(val))
			}
			if !rcNameRe.MatchString(s) {
				return inv, nil, "", schemaErr("%s does not match '^[A-Z0-9_]+$'", pyRepr(val))
			}
			rc = s
		case "total", "reserved", "min_unit", "max_unit", "step_size":
			n, ok := jsonInt(val)
			if !ok {
				return inv, nil, "", schemaErr("%s is not of type 'integer'", pyRepr(val))
			}
			minimum := int64(1)
			if k == "reserved" {
				minimum = 0
			}
			if n < minimum {
				return inv, nil, "", schemaErr("%d is less than the minimum of %d", n, minimum)
			}
			if n > maxInt {
				return inv, nil, "", schemaErr("%d is greater than the maximum of %d", n, maxInt)
			}
			switch k {
			case "total":
				inv.Total = n
			case "reserved":
				inv.Reserved = n
			case "min_unit":
				inv.MinUnit = n
			case "max_unit":
				inv.MaxUnit = n
			case "step_size":
				inv.StepSize = n
			}
		case "allocation_ratio":
			f, ok := jsonNumber(val)
			if !ok {
				return inv, nil, "", schemaErr("%s is not of type 'number'", pyRepr(val))
			}
			if f > 3.40282e38 {
				return inv, nil, "", schemaErr("%v is greater than the maximum of 3.40282e+38", f)
			}
			inv.AllocationRatio = f
		default:
			return inv, nil, "", schemaErr("Additional properties are not allowed ('%s' was unexpected)", k)
		}
	}
	if _, ok := obj["total"]; !ok {
		return inv, nil, "", schemaErr("'total' is a required property")
	}
	if requireGen && gen == nil {
		return inv, nil, "", schemaErr("'resource_provider_generation' is a required property")
	}
	if allowClass && rc == "" {
		return inv, nil, "", schemaErr("'resource_class' is a required property")
	}
	return inv, gen, rc, nil
}

// checkCapacity is _validate_inventory_capacity.
func checkCapacity(c *reqCtx, rp, rc string, inv etcdschema.Inventory) error {
	capy := inv.Capacity()
	if c.atLeast(26) {
		if capy < 0 {
			return errBadRequest("Unable to update inventory for resource provider %s: Invalid inventory for '%s' on resource provider '%s'. The reserved value is greater than total.", rp, rc, rp)
		}
	} else if capy <= 0 {
		return errBadRequest("Unable to update inventory for resource provider %s: Invalid inventory for '%s' on resource provider '%s'. The reserved value is greater than or equal to total.", rp, rc, rp)
	}
	return nil
}

func (s *Service) getInventories(c *reqCtx) error {
	if err := c.checkAccept(); err != nil {
		return err
	}
	if err := c.requireReader("placement:resource_providers:inventories:list"); err != nil {
		return err
	}
	id := c.vars["uuid"]
	sp, err := s.getProvider(c.r.Context(), id)
	if errors.Is(err, ErrProviderNotFound) {
		return errNotFound(fmt.Sprintf("No resource provider with uuid %s found : %v", id, err))
	} else if err != nil {
		return err
	}
	invs := map[string]any{}
	for rc, inv := range sp.p.Inventories {
		invs[rc] = serializeInventory(inv)
	}
	c.setCacheHeaders(lastModified(sp.p))
	return c.writeJSON(200, map[string]any{"resource_provider_generation": sp.p.Generation, "inventories": invs})
}

func (s *Service) getInventory(c *reqCtx) error {
	if err := c.checkAccept(); err != nil {
		return err
	}
	if err := c.requireReader("placement:resource_providers:inventories:show"); err != nil {
		return err
	}
	id, rc := c.vars["uuid"], c.vars["resource_class"]
	sp, err := s.getProvider(c.r.Context(), id)
	if errors.Is(err, ErrProviderNotFound) {
		return errNotFound(fmt.Sprintf("No resource provider with uuid %s found : %v", id, err))
	} else if err != nil {
		return err
	}
	inv, ok := sp.p.Inventories[rc]
	if !ok {
		return errNotFound(fmt.Sprintf("No inventory of class %s for %s", rc, id))
	}
	out := serializeInventory(inv)
	out["resource_provider_generation"] = sp.p.Generation
	c.setCacheHeaders(lastModified(sp.p))
	return c.writeJSON(200, out)
}

// writeInventories replaces the provider's inventories via mutate, with
// Placement's rules: the generation must match, every class must exist,
// and a class with allocations cannot be removed.
func (s *Service) writeInventories(c *reqCtx, id string, gen *int64, mutate func(p *etcdschema.Provider) error) (*etcdschema.Provider, error) {
	p, err := s.updateProvider(c.r.Context(), id, gen, func(p *etcdschema.Provider) error {
		before := map[string]bool{}
		for rc := range p.Inventories {
			before[rc] = true
		}
		if err := mutate(p); err != nil {
			return err
		}
		var inUse []string
		for rc := range before {
			if _, ok := p.Inventories[rc]; !ok && p.Usages[rc] > 0 {
				inUse = append(inUse, rc)
			}
		}
		if len(inUse) > 0 {
			sort.Strings(inUse)
			return fmt.Errorf("Inventory for '%s' on resource provider '%s' in use.: %w", strings.Join(inUse, ", "), id, ErrInventoryInUse)
		}
		return nil
	})
	switch {
	case errors.Is(err, ErrProviderNotFound):
		return nil, errNotFound(fmt.Sprintf("No resource provider with uuid %s found", id))
	case errors.Is(err, ErrGenerationConflict):
		return nil, errConflict(codeConcurrentUpdate, "resource provider generation conflict")
	case errors.Is(err, ErrInventoryInUse):
		return nil, errConflict(codeInventoryInUse, "update conflict: %s", strings.TrimPrefix(err.Error(), "update provider "+id+": "))
	}
	return p, err
}

// unknownClass returns a 400 for the first class that does not exist.
func (s *Service) unknownClass(c *reqCtx, id string, classes []string) error {
	for _, rc := range classes {
		ok, err := s.classExists(c.r.Context(), rc)
		if err != nil {
			return err
		}
		if !ok {
			return errBadRequest("Unknown resource class in inventory for resource provider %s: No such resource class %s.", id, rc)
		}
	}
	return nil
}

func (s *Service) setInventories(c *reqCtx) error {
	if err := c.requireAdmin("placement:resource_providers:inventories:update"); err != nil {
		return err
	}
	id := c.vars["uuid"]
	if _, err := s.lookupProvider(c, id); err != nil {
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
	if err := onlyProps(obj, "resource_provider_generation", "inventories"); err != nil {
		return err
	}
	gv, ok := obj["resource_provider_generation"]
	if !ok {
		return schemaErr("'resource_provider_generation' is a required property")
	}
	gen, ok := jsonInt(gv)
	if !ok {
		return schemaErr("%s is not of type 'integer'", pyRepr(gv))
	}
	iv, ok := obj["inventories"]
	if !ok {
		return schemaErr("'inventories' is a required property")
	}
	invObj, ok := iv.(map[string]any)
	if !ok {
		return schemaErr("%s is not of type 'object'", pyRepr(iv))
	}
	invs := map[string]etcdschema.Inventory{}
	classes := make([]string, 0, len(invObj))
	for rc := range invObj {
		classes = append(classes, rc)
	}
	sort.Strings(classes)
	for _, rc := range classes {
		if !rcNameRe.MatchString(rc) {
			continue // patternProperties ignores other keys, as does Placement
		}
		inv, _, _, err := inventoryRecord(invObj[rc], false, false)
		if err != nil {
			return err
		}
		invs[rc] = inv
	}
	if err := s.unknownClass(c, id, sortedKeys(invs)); err != nil {
		return err
	}
	for _, rc := range sortedKeys(invs) {
		if err := checkCapacity(c, id, rc, invs[rc]); err != nil {
			return err
		}
	}
	p, err := s.writeInventories(c, id, &gen, func(p *etcdschema.Provider) error {
		p.Inventories = invs
		return nil
	})
	if err != nil {
		return err
	}
	out := map[string]any{}
	for rc, inv := range p.Inventories {
		out[rc] = serializeInventory(inv)
	}
	c.setCacheHeaders(p.UpdatedAt)
	return c.writeJSON(200, map[string]any{"resource_provider_generation": p.Generation, "inventories": out})
}

func (s *Service) createInventory(c *reqCtx) error {
	if err := c.requireAdmin("placement:resource_providers:inventories:create"); err != nil {
		return err
	}
	id := c.vars["uuid"]
	sp, err := s.lookupProvider(c, id)
	if err != nil {
		return err
	}
	v, err := c.readJSON()
	if err != nil {
		return err
	}
	inv, gen, rc, err := inventoryRecord(v, false, true)
	if err != nil {
		return err
	}
	if err := s.unknownClass(c, id, []string{rc}); err != nil {
		return err
	}
	if err := checkCapacity(c, id, rc, inv); err != nil {
		return err
	}
	if gen == nil {
		g := sp.p.Generation
		gen = &g
	}
	p, err := s.writeInventories(c, id, gen, func(p *etcdschema.Provider) error {
		if _, ok := p.Inventories[rc]; ok {
			return errConflict(codeDefault, "Update conflict: Inventory for '%s' on resource provider '%s' already exists.", rc, id)
		}
		p.Inventories[rc] = inv
		return nil
	})
	if err != nil {
		return err
	}
	out := serializeInventory(inv)
	out["resource_provider_generation"] = p.Generation
	c.w.Header().Set("Location", "/resource_providers/"+id+"/inventories/"+rc)
	c.setCacheHeaders(p.UpdatedAt)
	return c.writeJSON(201, out)
}

func (s *Service) updateInventory(c *reqCtx) error {
	if err := c.requireAdmin("placement:resource_providers:inventories:update"); err != nil {
		return err
	}
	id, rc := c.vars["uuid"], c.vars["resource_class"]
	if _, err := s.lookupProvider(c, id); err != nil {
		return err
	}
	v, err := c.readJSON()
	if err != nil {
		return err
	}
	inv, gen, _, err := inventoryRecord(v, true, false)
	if err != nil {
		return err
	}
	if err := checkCapacity(c, id, rc, inv); err != nil {
		return err
	}
	p, err := s.writeInventories(c, id, gen, func(p *etcdschema.Provider) error {
		if _, ok := p.Inventories[rc]; !ok {
			return errBadRequest("No inventory record with resource class for resource provider %s: No inventory of class %s found", id, rc)
		}
		p.Inventories[rc] = inv
		return nil
	})
	if err != nil {
		return err
	}
	out := serializeInventory(inv)
	out["resource_provider_generation"] = p.Generation
	c.setCacheHeaders(p.UpdatedAt)
	return c.writeJSON(200, out)
}

func (s *Service) deleteInventory(c *reqCtx) error {
	if err := c.requireAdmin("placement:resource_providers:inventories:delete"); err != nil {
		return err
	}
	id, rc := c.vars["uuid"], c.vars["resource_class"]
	sp, err := s.lookupProvider(c, id)
	if err != nil {
		return err
	}
	gen := sp.p.Generation
	_, err = s.writeInventories(c, id, &gen, func(p *etcdschema.Provider) error {
		if _, ok := p.Inventories[rc]; !ok {
			return errNotFound(fmt.Sprintf("No inventory of class %s found for delete: No inventory of class %s found for delete", rc, rc))
		}
		delete(p.Inventories, rc)
		return nil
	})
	if err != nil {
		var he *httpError
		if errors.As(err, &he) && he.code == codeConcurrentUpdate {
			return errConflict(codeConcurrentUpdate, "Unable to delete inventory of class %s: resource provider generation conflict", rc)
		}
		return err
	}
	return c.writeEmpty(204)
}

func (s *Service) deleteInventories(c *reqCtx) error {
	if err := c.minVersion(5, 405); err != nil {
		return err
	}
	if err := c.requireAdmin("placement:resource_providers:inventories:delete"); err != nil {
		return err
	}
	id := c.vars["uuid"]
	sp, err := s.lookupProvider(c, id)
	if err != nil {
		return err
	}
	gen := sp.p.Generation
	_, err = s.writeInventories(c, id, &gen, func(p *etcdschema.Provider) error {
		p.Inventories = map[string]etcdschema.Inventory{}
		return nil
	})
	if err != nil {
		var he *httpError
		if errors.As(err, &he) && he.code == codeConcurrentUpdate {
			return errConflict(codeConcurrentUpdate, "Unable to delete inventory for resource provider %s because the inventory was updated by another process. Please retry your request.", id)
		}
		return err
	}
	return c.writeEmpty(204)
}
