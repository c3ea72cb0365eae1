package httpapi

import (
	"errors"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/placement"
)

// reshape is POST /reshaper (1.30; mappings accepted from 1.34,
// consumer_type required from 1.38); Service.Reshape does the work.
func (s *API) reshape(c *reqCtx) error {
	v, err := c.readBody(pickSchema(c.mv, reshaperVersions, schemaReshaper))
	if err != nil {
		return err
	}
	rev, err := s.svc.Reshape(c.r.Context(), reshapeBody(c, v.(map[string]any)))
	if err != nil {
		return reshapeError(err)
	}
	_ = s.svc.WaitForRevision(c.r.Context(), rev)
	return c.writeEmpty(204)
}

// reshapeBody reads a body its schema has validated into a placement.Reshape.
func reshapeBody(c *reqCtx, obj map[string]any) placement.Reshape {
	r := placement.Reshape{Inventories: map[string]placement.ProviderInventories{}, Allocations: map[string]placement.AllocationWrite{}}
	for rp, pv := range obj["inventories"].(map[string]any) {
		po := pv.(map[string]any)
		gen, _ := jsonInt(po["resource_provider_generation"])
		invs := map[string]etcdschema.Inventory{}
		for rc, iv := range po["inventories"].(map[string]any) {
			// The schema checks only keys that look like class names; any
			// other key names a class that cannot exist, which the reshape
			// refuses as unknown, as Placement does.
			rec, _ := iv.(map[string]any)
			invs[rc] = inventoryRecord(rec)
		}
		r.Inventories[rp] = placement.ProviderInventories{Generation: gen, Inventories: invs}
	}
	for cu, body := range obj["allocations"].(map[string]any) {
		r.Allocations[cu] = allocationBody(c, body.(map[string]any), true, "allocations", cu)
	}
	return r
}

// reshapeError answers a failed reshape in the reshaper handler's words.
func reshapeError(err error) error {
	msg := placement.Detail(err)
	switch {
	case errors.Is(err, placement.ErrInventoryProviderNotFound):
		return &httpError{status: 400, code: codeProviderNotFound, detail: msg}
	case errors.Is(err, placement.ErrProviderNotFound):
		return errBadRequest("%s", msg)
	case errors.Is(err, placement.ErrResourceClassNotFound):
		return errBadRequest("malformed reshaper data: %s", msg)
	case errors.Is(err, placement.ErrGenerationConflict), errors.Is(err, placement.ErrConsumerGenerationConflict):
		return errConflict(codeConcurrentUpdate, "%s", msg)
	case errors.Is(err, placement.ErrConcurrentUpdate):
		return errConflict(codeConcurrentUpdate, "update conflict: %s", msg)
	case errors.Is(err, placement.ErrInventoryInUse):
		return errConflict(codeInventoryInUse, "update conflict: %s", msg)
	case errors.Is(err, placement.ErrInsufficientCapacity):
		return errConflict(codeDefault, "Unable to allocate inventory: %s", msg)
	}
	return err
}
