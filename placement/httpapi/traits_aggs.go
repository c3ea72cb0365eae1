package httpapi

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/placement"
)

func (s *API) providerTraits(c *reqCtx) error {
	id := c.vars["uuid"]
	sp, err := s.svc.ReadProvider(c.r.Context(), id)
	if errors.Is(err, placement.ErrProviderNotFound) {
		return errNotFound(fmt.Sprintf("No resource provider with uuid %s found: No resource provider with uuid %s found", id, id))
	} else if err != nil {
		return err
	}
	c.setCacheHeaders(lastModified(sp.Provider))
	return c.writeJSON(200, map[string]any{"traits": traitOrder(sp.Provider.Traits), "resource_provider_generation": sp.Provider.Generation})
}

func (s *API) setProviderTraits(c *reqCtx, _ placement.ProviderRecord) error {
	id := c.vars["uuid"]
	v, err := c.readBody(schemaSetProviderTraits)
	if err != nil {
		return err
	}
	obj := v.(map[string]any)
	gen, _ := jsonInt(obj["resource_provider_generation"])
	traits := []string{}
	for _, t := range obj["traits"].([]any) {
		if !slices.Contains(traits, t.(string)) {
			traits = append(traits, t.(string))
		}
	}
	missing, err := s.svc.MissingTraits(c.r.Context(), traits)
	if err != nil {
		return err
	}
	p, err := s.svc.UpdateProviderAt(c.r.Context(), id, gen, func(p *etcdschema.Provider) error {
		if len(missing) > 0 {
			return errBadRequest("No such trait %s", strings.Join(missing, ", "))
		}
		p.Traits = traits
		return nil
	})
	if errors.Is(err, placement.ErrGenerationConflict) {
		return errConflict(codeConcurrentUpdate, "Resource provider's generation already changed. Please update the generation and try again.")
	} else if err != nil {
		return err
	}
	c.setCacheHeaders(p.UpdatedAt)
	// Placement answers a PUT with the traits as its name lookup returns
	// them, sorted by name (a GET lists them by id, see traitOrder).
	return c.writeJSON(200, map[string]any{"traits": sortedStrings(p.Traits), "resource_provider_generation": p.Generation})
}

func (s *API) deleteProviderTraits(c *reqCtx, sp placement.ProviderRecord) error {
	id := c.vars["uuid"]
	gen := sp.Provider.Generation
	_, err := s.svc.UpdateProviderAt(c.r.Context(), id, gen, func(p *etcdschema.Provider) error {
		p.Traits = nil
		return nil
	})
	if errors.Is(err, placement.ErrGenerationConflict) {
		return errConflict(codeConcurrentUpdate, "Resource provider %s generation conflict", id)
	} else if err != nil {
		return err
	}
	return c.writeEmpty(204)
}

func (s *API) getAggregates(c *reqCtx, sp placement.ProviderRecord) error {
	out := map[string]any{"aggregates": nonNil(sp.Provider.Aggregates)}
	if c.atLeast(19) {
		out["resource_provider_generation"] = sp.Provider.Generation
	}
	c.setCacheHeaders(lastModified(sp.Provider))
	return c.writeJSON(200, out)
}

// aggregateUUIDs reads a validated aggregates list, keeping the order
// given (Placement answers a PUT with the list as sent).
func aggregateUUIDs(v any) []string {
	out := []string{}
	for _, a := range v.([]any) {
		out = append(out, a.(string))
	}
	return out
}

func (s *API) setAggregates(c *reqCtx, sp placement.ProviderRecord) error {
	id := c.vars["uuid"]
	sch := schemaAggregates
	if c.atLeast(19) {
		sch = schemaAggregates119
	}
	v, err := c.readBody(sch)
	if err != nil {
		return err
	}
	var aggs []string
	var gen *int64
	if c.atLeast(19) {
		obj := v.(map[string]any)
		g, _ := jsonInt(obj["resource_provider_generation"])
		gen = &g
		aggs = aggregateUUIDs(obj["aggregates"])
	} else {
		aggs = aggregateUUIDs(v)
	}
	var p *etcdschema.Provider
	if gen != nil {
		p, err = s.svc.UpdateProviderAt(c.r.Context(), id, *gen, func(p *etcdschema.Provider) error {
			p.Aggregates = aggs
			return nil
		})
		if errors.Is(err, placement.ErrGenerationConflict) {
			return errConflict(codeConcurrentUpdate, "Resource provider's generation already changed. Please update the generation and try again.")
		}
	} else {
		// Before 1.19 aggregates carry no generation and setting them
		// does not bump it.
		p, err = s.svc.SetAggregatesKeepGeneration(c.r.Context(), sp, aggs)
	}
	if err != nil {
		return err
	}
	out := map[string]any{"aggregates": aggs}
	if c.atLeast(19) {
		out["resource_provider_generation"] = p.Generation
	}
	c.setCacheHeaders(p.UpdatedAt)
	return c.writeJSON(200, out)
}
