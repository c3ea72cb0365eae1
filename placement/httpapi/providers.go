package httpapi

import (
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/placement"
)

func (s *API) home(c *reqCtx) error {
	c.setCacheHeaders(time.Now().UTC())
	return c.writeJSON(200, map[string]any{"versions": []any{map[string]any{
		"id": "v1.0", "max_version": fmt.Sprintf("1.%d", maxMinor), "min_version": "1.0",
		"status": "CURRENT", "links": []any{map[string]string{"rel": "self", "href": ""}},
	}}})
}

func providerLinks(c *reqCtx, uuid string) []map[string]string {
	url := "/resource_providers/" + uuid
	links := []map[string]string{{"rel": "self", "href": url}}
	rels := []string{"inventories", "usages"}
	if c.atLeast(1) {
		rels = append(rels, "aggregates")
	}
	if c.atLeast(6) {
		rels = append(rels, "traits")
	}
	if c.atLeast(11) {
		rels = append(rels, "allocations")
	}
	for _, r := range rels {
		links = append(links, map[string]string{"rel": r, "href": url + "/" + r})
	}
	return links
}

func serializeProvider(c *reqCtx, p *etcdschema.Provider) map[string]any {
	out := map[string]any{
		"uuid": p.UUID, "name": p.Name, "generation": p.Generation, "links": providerLinks(c, p.UUID),
	}
	if c.atLeast(14) {
		var parent any
		if p.ParentProviderUUID != "" {
			parent = p.ParentProviderUUID
		}
		out["parent_provider_uuid"] = parent
		out["root_provider_uuid"] = p.RootProviderUUID
	}
	return out
}

func lastModified(p *etcdschema.Provider) time.Time {
	if !p.UpdatedAt.IsZero() {
		return p.UpdatedAt
	}
	return p.CreatedAt
}

// lookupProvider reads a provider for a handler: 404 when missing.
func (s *API) lookupProvider(c *reqCtx, id string) (placement.ProviderRecord, error) {
	rec, err := s.svc.ReadProvider(c.r.Context(), id)
	if errors.Is(err, placement.ErrProviderNotFound) {
		return rec, raisedErr(errNotFound(fmt.Sprintf("No resource provider with uuid %s found", id)))
	}
	return rec, err
}

func (s *API) getResourceProvider(c *reqCtx, sp placement.ProviderRecord) error {
	c.setCacheHeaders(lastModified(sp.Provider))
	return c.writeJSON(200, serializeProvider(c, sp.Provider))
}

// providerBody validates POST/PUT /resource_providers bodies.
func providerBody(c *reqCtx, withUUID bool) (map[string]any, error) {
	sch := schemaPutRP
	switch {
	case withUUID && c.atLeast(14):
		sch = schemaPostRP114
	case withUUID:
		sch = schemaPostRP
	case c.atLeast(14):
		sch = schemaPutRP114
	}
	v, err := c.readBody(sch)
	if err != nil {
		return nil, err
	}
	return v.(map[string]any), nil
}

func (s *API) createResourceProvider(c *reqCtx) error {
	obj, err := providerBody(c, true)
	if err != nil {
		return err
	}
	name := obj["name"].(string)
	id := uuid.NewString()
	if u, ok := obj["uuid"].(string); ok && u != "" {
		id = normalizeUUID(u)
	}
	parent := ""
	if pu, ok := obj["parent_provider_uuid"].(string); ok {
		parent = normalizeUUID(pu)
		if parent == id {
			return errBadRequest("Unable to create resource provider \"%s\", %s: Object action create failed because: parent provider UUID cannot be same as UUID. Please set parent provider UUID to None if there is no parent.", name, id)
		}
	}
	if name == "" {
		return errBadRequest("Unable to create resource provider \"%s\", %s: Object action create failed because: name is required", name, id)
	}
	p, err := s.svc.CreateProvider(c.r.Context(), id, name, parent)
	switch {
	case errors.Is(err, placement.ErrDuplicateUUID):
		return errConflict(codeDuplicateName, "Conflicting resource provider uuid: %s already exists.", id)
	case errors.Is(err, placement.ErrDuplicateName):
		return errConflict(codeDuplicateName, "Conflicting resource provider name: %s already exists.", name)
	case errors.Is(err, placement.ErrProviderNotFound):
		return errBadRequest("Unable to create resource provider \"%s\", %s: Object action create failed because: parent provider UUID does not exist.", name, id)
	case err != nil:
		return err
	}
	c.setLocation("/resource_providers/" + id)
	if c.atLeast(20) {
		c.setCacheHeaders(p.CreatedAt)
		return c.writeJSON(200, serializeProvider(c, p))
	}
	return c.writeEmpty(201)
}

func (s *API) updateResourceProvider(c *reqCtx, sp placement.ProviderRecord) error {
	obj, err := providerBody(c, false)
	if err != nil {
		return err
	}
	name := obj["name"].(string)
	pu, setParent := obj["parent_provider_uuid"]
	newParent := sp.Provider.ParentProviderUUID
	if setParent {
		newParent = ""
		if ps, ok := pu.(string); ok {
			newParent = normalizeUUID(ps)
		}
	}
	p, err := s.svc.MoveProvider(c.r.Context(), sp, name, newParent, c.atLeast(37))
	if err != nil {
		if errors.Is(err, placement.ErrInvalid) {
			return errBadRequest("%s", placement.Detail(err))
		}
		if errors.Is(err, placement.ErrDuplicateName) {
			return errConflict(codeDuplicateName, "Conflicting resource provider %s already exists.", name)
		}
		return err
	}
	c.setCacheHeaders(p.UpdatedAt)
	return c.writeJSON(200, serializeProvider(c, p))
}

func (s *API) deleteResourceProvider(c *reqCtx) error {
	id := c.vars["uuid"]
	err := s.svc.DeleteProvider(c.r.Context(), id)
	switch {
	case errors.Is(err, placement.ErrProviderNotFound):
		return errNotFound(fmt.Sprintf("No resource provider with uuid %s found for delete", id))
	case errors.Is(err, placement.ErrProviderHasChildren):
		return errConflict(codeCannotDelParent, "Unable to delete parent resource provider %s: It has child resource providers.", id)
	case errors.Is(err, placement.ErrProviderInUse):
		return errConflict(codeProviderInUse, "Unable to delete resource provider %s: Resource provider has allocations.", id)
	case err != nil:
		return err
	}
	return c.writeEmpty(204)
}
