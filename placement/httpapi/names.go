package httpapi

import (
	"fmt"
	"sort"
	"strings"

	"github.com/berth-project/berth/internal/pycompat"
	"github.com/berth-project/berth/placement"
)

// ---- traits -----------------------------------------------------------------

func (s *API) listTraits(c *reqCtx) error {
	if err := validateQuery(c, schemaListTraits); err != nil {
		return err
	}
	q := c.query()
	all, err := s.svc.AllTraits(c.r.Context())
	if err != nil {
		return err
	}
	var filter func(string) bool
	if q.Has("name") {
		v := q.Get("name")
		op, val, ok := strings.Cut(v, ":")
		switch {
		case ok && op == "in":
			set := map[string]bool{}
			for _, n := range strings.Split(val, ",") {
				set[n] = true
			}
			filter = func(t string) bool { return set[t] }
		case ok && op == "startswith":
			filter = func(t string) bool { return strings.HasPrefix(t, val) }
		default:
			return errBadRequest("Badly formatted name parameter. Expected name query string parameter in form: ?name=[in|startswith]:[name1,name2|prefix]. Got: \"%s\"", v)
		}
	}
	var assoc *bool
	if q.Has("associated") {
		v := strings.ToLower(q.Get("associated"))
		if v != "true" && v != "false" {
			return errBadRequest("The query parameter \"associated\" only accepts \"true\" or \"false\"")
		}
		b := v == "true"
		assoc = &b
	}
	var inUse map[string]bool
	if assoc != nil {
		if inUse, err = s.svc.TraitsInUse(c.r.Context(), all); err != nil {
			return err
		}
	}
	out := []string{}
	for _, t := range all {
		if filter != nil && !filter(t) {
			continue
		}
		if assoc != nil && inUse[t] != *assoc {
			continue
		}
		out = append(out, t)
	}
	if strings.HasPrefix(q.Get("name"), "in:") {
		// Placement's name IN (...) lookup comes back by name; its other
		// lists come in id order (standard traits first).
		sort.Strings(out)
	}
	c.setCacheHeaders(s.now())
	return c.writeJSON(200, map[string]any{"traits": out})
}

func (s *API) getTrait(c *reqCtx) error {
	name := c.vars["name"]
	missing, err := s.svc.MissingTraits(c.r.Context(), []string{name})
	if err != nil {
		return err
	}
	if len(missing) > 0 {
		return errNotFound(fmt.Sprintf("No such trait(s): %s.", name))
	}
	c.setCacheHeaders(s.now())
	return c.writeEmpty(204)
}

func (s *API) putTrait(c *reqCtx) error {
	name := c.vars["name"]
	if pycompat.Validate(name, schemaCustomTrait, nil) != nil {
		return errBadRequest("The trait is invalid. A valid trait must be no longer than 255 characters, start with the prefix \"CUSTOM_\" and use following characters: \"A\"-\"Z\", \"0\"-\"9\" and \"_\"")
	}
	created, err := s.svc.CreateTrait(c.r.Context(), name)
	if err != nil {
		return err
	}
	c.setLocation("/traits/" + name)
	c.setCacheHeaders(s.now())
	if created {
		return c.writeEmpty(201)
	}
	return c.writeEmpty(204)
}

func (s *API) deleteTrait(c *reqCtx) error {
	name := c.vars["name"]
	ctx := c.r.Context()
	if placement.IsStandardTrait(name) {
		return errBadRequest("Cannot delete standard trait %s.", name)
	}
	missing, err := s.svc.MissingTraits(ctx, []string{name})
	if err != nil {
		return err
	}
	if len(missing) > 0 {
		return errNotFound(fmt.Sprintf("No such trait(s): %s.", name))
	}
	inUse, err := s.svc.TraitsInUse(ctx, []string{name})
	if err != nil {
		return err
	}
	if inUse[name] {
		return errConflict(codeDefault, "The trait %s is in use by a resource provider.", name)
	}
	if err := s.svc.DeleteTrait(ctx, name); err != nil {
		return err
	}
	return c.writeEmpty(204)
}

// ---- resource classes -------------------------------------------------------

func classLinks(name string) []map[string]string {
	return []map[string]string{{"rel": "self", "href": "/resource_classes/" + name}}
}

func (s *API) listResourceClasses(c *reqCtx) error {
	all, err := s.svc.AllResourceClasses(c.r.Context())
	if err != nil {
		return err
	}
	out := make([]any, 0, len(all))
	for _, n := range all {
		out = append(out, map[string]any{"name": n, "links": classLinks(n)})
	}
	c.setCacheHeaders(s.now())
	return c.writeJSON(200, map[string]any{"resource_classes": out})
}

func (s *API) getResourceClass(c *reqCtx) error {
	name := c.vars["name"]
	ok, err := s.svc.ClassExists(c.r.Context(), name)
	if err != nil {
		return err
	}
	if !ok {
		return raisedErr(errNotFound(fmt.Sprintf("No such resource class %s.", name)))
	}
	c.setCacheHeaders(s.now())
	return c.writeJSON(200, map[string]any{"name": name, "links": classLinks(name)})
}

// classBody validates {"name": "CUSTOM_..."}.
func classBody(c *reqCtx) (string, error) {
	v, err := c.readBody(schemaResourceClass)
	if err != nil {
		return "", err
	}
	name := v.(map[string]any)["name"].(string)
	return name, nil
}

func (s *API) createResourceClass(c *reqCtx) error {
	name, err := classBody(c)
	if err != nil {
		return err
	}
	created, err := s.svc.CreateResourceClass(c.r.Context(), name)
	if err != nil {
		return err
	}
	if !created {
		return errConflict(codeDefault, "Conflicting resource class already exists: %s", name)
	}
	c.setLocation("/resource_classes/" + name)
	return c.writeEmpty(201)
}

// putResourceClass is PUT /resource_classes/{name} from 1.7: create a
// custom class if it does not exist (no body).
func (s *API) putResourceClass(c *reqCtx) error {
	name := c.vars["name"]
	// Placement validates the name as the body {"name": NAME}.
	if err := c.validateBody(map[string]any{"name": name}, schemaResourceClass); err != nil {
		return err
	}
	created, err := s.svc.CreateResourceClass(c.r.Context(), name)
	if err != nil {
		return err
	}
	c.setLocation("/resource_classes/" + name)
	if created {
		return c.writeEmpty(201)
	}
	return c.writeEmpty(204)
}

// updateResourceClass is PUT /resource_classes/{name} from 1.2 to 1.6:
// rename a custom class to the body's name.
func (s *API) updateResourceClass(c *reqCtx) error {
	name := c.vars["name"]
	ctx := c.r.Context()
	newName, err := classBody(c)
	if err != nil {
		return err
	}
	ok, err := s.svc.ClassExists(ctx, name)
	if err != nil {
		return err
	}
	if !ok {
		return raisedErr(errNotFound(fmt.Sprintf("No such resource class %s.", name)))
	}
	if placement.IsStandardResourceClass(name) {
		return errBadRequest("Cannot update standard resource class %s", name)
	}
	if err := s.renameClass(c, name, newName); err != nil {
		return err
	}
	return c.writeJSON(200, map[string]any{"name": newName, "links": classLinks(newName)})
}

func (s *API) renameClass(c *reqCtx, from, to string) error {
	ctx := c.r.Context()
	created, err := s.svc.CreateResourceClass(ctx, to)
	if err != nil {
		return err
	}
	if !created {
		return errConflict(codeDefault, "Resource class already exists: %s", to)
	}
	if err := s.svc.DeleteResourceClass(ctx, from); err != nil {
		return fmt.Errorf("rename class %s: %w", from, err)
	}
	return nil
}

func (s *API) deleteResourceClass(c *reqCtx) error {
	name := c.vars["name"]
	ctx := c.r.Context()
	ok, err := s.svc.ClassExists(ctx, name)
	if err != nil {
		return err
	}
	if !ok {
		return raisedErr(errNotFound(fmt.Sprintf("No such resource class %s.", name)))
	}
	if placement.IsStandardResourceClass(name) {
		return errBadRequest("Error in delete resource class: Cannot delete standard resource class %s.", name)
	}
	inUse, err := s.svc.ClassInUse(ctx, name)
	if err != nil {
		return err
	}
	if inUse {
		return errConflict(codeDefault, "Error in delete resource class: Cannot delete resource class %s. Class is in use in inventory.", name)
	}
	if err := s.svc.DeleteResourceClass(ctx, name); err != nil {
		return err
	}
	return c.writeEmpty(204)
}
