package placement

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/berth-project/berth/etcdschema"
)

func (s *Service) providerTraits(c *reqCtx) error {
	if err := c.minVersion(6, 404); err != nil {
		return err
	}
	if err := c.checkAccept(); err != nil {
		return err
	}
	if err := c.requireReader("placement:resource_providers:traits:list"); err != nil {
		return err
	}
	id := c.vars["uuid"]
	sp, err := s.getProvider(c.r.Context(), id)
	if errors.Is(err, ErrProviderNotFound) {
		return errNotFound(fmt.Sprintf("No resource provider with uuid %s found: %v", id, err))
	} else if err != nil {
		return err
	}
	c.setCacheHeaders(lastModified(sp.p))
	return c.writeJSON(200, map[string]any{"traits": sortedStrings(sp.p.Traits), "resource_provider_generation": sp.p.Generation})
}

func (s *Service) setProviderTraits(c *reqCtx) error {
	if err := c.minVersion(6, 404); err != nil {
		return err
	}
	if err := c.requireAdmin("placement:resource_providers:traits:update"); err != nil {
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
	if err := onlyProps(obj, "traits", "resource_provider_generation"); err != nil {
		return err
	}
	tv, ok := obj["traits"]
	if !ok {
		return schemaErr("'traits' is a required property")
	}
	gv, ok := obj["resource_provider_generation"]
	if !ok {
		return schemaErr("'resource_provider_generation' is a required property")
	}
	gen, ok := jsonInt(gv)
	if !ok {
		return schemaErr("%s is not of type 'integer'", pyRepr(gv))
	}
	list, ok := tv.([]any)
	if !ok {
		return schemaErr("%s is not of type 'array'", pyRepr(tv))
	}
	traits := make([]string, 0, len(list))
	for _, t := range list {
		ts, ok := t.(string)
		if !ok {
			return schemaErr("%s is not of type 'string'", pyRepr(t))
		}
		if ts == "" {
			return schemaErr("'' is too short")
		}
		if len(ts) > 255 {
			return schemaErr("%s is too long", pyRepr(t))
		}
		traits = append(traits, ts)
	}
	missing, err := s.missingTraits(c.r.Context(), traits)
	if err != nil {
		return err
	}
	p, err := s.updateProvider(c.r.Context(), id, &gen, func(p *etcdschema.Provider) error {
		if len(missing) > 0 {
			return errBadRequest("No such trait %s", strings.Join(missing, ", "))
		}
		p.Traits = traits
		return nil
	})
	if errors.Is(err, ErrGenerationConflict) {
		return errConflict(codeConcurrentUpdate, "Resource provider's generation already changed. Please update the generation and try again.")
	} else if err != nil {
		return err
	}
	c.setCacheHeaders(p.UpdatedAt)
	return c.writeJSON(200, map[string]any{"traits": p.Traits, "resource_provider_generation": p.Generation})
}

func (s *Service) deleteProviderTraits(c *reqCtx) error {
	if err := c.minVersion(6, 404); err != nil {
		return err
	}
	if err := c.requireAdmin("placement:resource_providers:traits:delete"); err != nil {
		return err
	}
	id := c.vars["uuid"]
	sp, err := s.lookupProvider(c, id)
	if err != nil {
		return err
	}
	gen := sp.p.Generation
	_, err = s.updateProvider(c.r.Context(), id, &gen, func(p *etcdschema.Provider) error {
		p.Traits = nil
		return nil
	})
	if errors.Is(err, ErrGenerationConflict) {
		return errConflict(codeConcurrentUpdate, "Resource provider %s generation conflict", id)
	} else if err != nil {
		return err
	}
	return c.writeEmpty(204)
}

func (s *Service) getAggregates(c *reqCtx) error {
	if err := c.minVersion(1, 404); err != nil {
		return err
	}
	if err := c.checkAccept(); err != nil {
		return err
	}
	if err := c.requireReader("placement:resource_providers:aggregates:list"); err != nil {
		return err
	}
	id := c.vars["uuid"]
	sp, err := s.lookupProvider(c, id)
	if err != nil {
		return err
	}
	out := map[string]any{"aggregates": sortedStrings(sp.p.Aggregates)}
	if c.atLeast(19) {
		out["resource_provider_generation"] = sp.p.Generation
	}
	c.setCacheHeaders(lastModified(sp.p))
	return c.writeJSON(200, out)
}

func aggregateList(v any) ([]string, error) {
	list, ok := v.([]any)
	if !ok {
		return nil, schemaErr("%s is not of type 'array'", pyRepr(v))
	}
	seen := map[string]bool{}
	out := make([]string, 0, len(list))
	for _, a := range list {
		as, ok := a.(string)
		if !ok {
			return nil, schemaErr("%s is not of type 'string'", pyRepr(a))
		}
		if !isUUIDLike(as) {
			return nil, schemaErr("%s is not a 'uuid'", pyRepr(a))
		}
		if seen[as] {
			return nil, schemaErr("%s has non-unique elements", pyRepr(v))
		}
		seen[as] = true
		out = append(out, as)
	}
	sort.Strings(out)
	return out, nil
}

func (s *Service) setAggregates(c *reqCtx) error {
	if err := c.minVersion(1, 404); err != nil {
		return err
	}
	if err := c.requireAdmin("placement:resource_providers:aggregates:update"); err != nil {
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
	var aggs []string
	var gen *int64
	if c.atLeast(19) {
		obj, ok := v.(map[string]any)
		if !ok {
			return schemaErr("%s is not of type 'object'", pyRepr(v))
		}
		if err := onlyProps(obj, "aggregates", "resource_provider_generation"); err != nil {
			return err
		}
		av, ok := obj["aggregates"]
		if !ok {
			return schemaErr("'aggregates' is a required property")
		}
		gv, ok := obj["resource_provider_generation"]
		if !ok {
			return schemaErr("'resource_provider_generation' is a required property")
		}
		g, ok := jsonInt(gv)
		if !ok {
			return schemaErr("%s is not of type 'integer'", pyRepr(gv))
		}
		gen = &g
		if aggs, err = aggregateList(av); err != nil {
			return err
		}
	} else {
		if aggs, err = aggregateList(v); err != nil {
			return err
		}
	}
	var p *etcdschema.Provider
	if gen != nil {
		p, err = s.updateProvider(c.r.Context(), id, gen, func(p *etcdschema.Provider) error {
			p.Aggregates = aggs
			return nil
		})
		if errors.Is(err, ErrGenerationConflict) {
			return errConflict(codeConcurrentUpdate, "Resource provider's generation already changed. Please update the generation and try again.")
		}
	} else {
		// Before 1.19 aggregates carry no generation and setting them
		// does not bump it.
		p, err = s.setAggregatesNoBump(c, sp, aggs)
	}
	if err != nil {
		return err
	}
	out := map[string]any{"aggregates": p.Aggregates}
	if c.atLeast(19) {
		out["resource_provider_generation"] = p.Generation
	}
	c.setCacheHeaders(p.UpdatedAt)
	return c.writeJSON(200, out)
}

func (s *Service) setAggregatesNoBump(c *reqCtx, sp *storedProvider, aggs []string) (*etcdschema.Provider, error) {
	next := sp.p.Clone()
	next.Aggregates = aggs
	next.UpdatedAt = s.now()
	if err := s.putProviderCAS(c.r.Context(), sp, next); err != nil {
		return nil, err
	}
	return next, nil
}
