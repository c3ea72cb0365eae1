package placement

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
)

func (s *Service) home(c *reqCtx) error {
	if err := c.checkAccept(); err != nil {
		return err
	}
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
func (s *Service) lookupProvider(c *reqCtx, id string) (*storedProvider, error) {
	sp, err := s.getProvider(c.r.Context(), id)
	if errors.Is(err, ErrProviderNotFound) {
		return nil, raisedErr(errNotFound(fmt.Sprintf("No resource provider with uuid %s found", id)))
	}
	return sp, err
}

func (s *Service) getResourceProvider(c *reqCtx) error {
	if err := c.acceptAndRead("placement:resource_providers:show"); err != nil {
		return err
	}
	sp, err := s.lookupProvider(c, c.vars["uuid"])
	if err != nil {
		return err
	}
	c.setCacheHeaders(lastModified(sp.p))
	return c.writeJSON(200, serializeProvider(c, sp.p))
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

func (s *Service) createResourceProvider(c *reqCtx) error {
	if err := c.requireContent(); err != nil {
		return err
	}
	if err := c.requireAdmin("placement:resource_providers:create"); err != nil {
		return err
	}
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
	p, err := s.CreateProvider(c.r.Context(), id, name, parent)
	switch {
	case errors.Is(err, ErrDuplicateUUID):
		return errConflict(codeDuplicateName, "Conflicting resource provider uuid: %s already exists.", id)
	case errors.Is(err, ErrDuplicateName):
		return errConflict(codeDuplicateName, "Conflicting resource provider name: %s already exists.", name)
	case errors.Is(err, ErrProviderNotFound):
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

func (s *Service) updateResourceProvider(c *reqCtx) error {
	if err := c.requireContent(); err != nil {
		return err
	}
	if err := c.requireAdmin("placement:resource_providers:update"); err != nil {
		return err
	}
	id := c.vars["uuid"]
	sp, err := s.lookupProvider(c, id)
	if err != nil {
		return err
	}
	obj, err := providerBody(c, false)
	if err != nil {
		return err
	}
	name := obj["name"].(string)
	pu, setParent := obj["parent_provider_uuid"]
	newParent := sp.p.ParentProviderUUID
	if setParent {
		newParent = ""
		if ps, ok := pu.(string); ok {
			newParent = normalizeUUID(ps)
		}
	}
	p, err := s.moveProvider(c.r.Context(), sp, name, newParent, c.atLeast(37))
	if err != nil {
		var he *httpError
		if errors.As(err, &he) {
			return err
		}
		if errors.Is(err, ErrDuplicateName) {
			return errConflict(codeDuplicateName, "Conflicting resource provider %s already exists.", name)
		}
		return err
	}
	c.setCacheHeaders(p.UpdatedAt)
	return c.writeJSON(200, serializeProvider(c, p))
}

// moveProvider renames and/or re-parents a provider; a move carries the
// whole subtree to the new root in the same transaction. It does not bump
// generations, as Placement's save does not.
func (s *Service) moveProvider(ctx context.Context, sp *storedProvider, name, newParent string, allowReparent bool) (*etcdschema.Provider, error) {
	cur := sp.p
	bad := func(action, reason string) error {
		return errBadRequest("Unable to save resource provider %s: Object action %s failed because: %s", cur.UUID, action, reason)
	}
	next := cur.Clone()
	next.Name = name
	next.UpdatedAt = s.now()
	cmps := []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(s.keys.Provider(cur.UUID)), "=", sp.modRev)}
	var ops []clientv3.Op
	var subtree []*etcdschema.Provider
	if newParent != cur.ParentProviderUUID {
		if newParent != "" {
			parent, err := s.getProvider(ctx, newParent)
			if errors.Is(err, ErrProviderNotFound) {
				return nil, bad("create", "parent provider UUID does not exist.")
			} else if err != nil {
				return nil, err
			}
			if cur.ParentProviderUUID != "" && !allowReparent {
				return nil, bad("update", "re-parenting a provider is not currently allowed.")
			}
			if err := s.syncIndex(ctx); err != nil {
				return nil, err
			}
			subtree = s.subtree(cur.UUID)
			for _, d := range subtree {
				if d.UUID == newParent {
					return nil, bad("update", "creating loop in the provider tree is not allowed.")
				}
			}
			if newParent == cur.UUID {
				return nil, bad("update", "creating loop in the provider tree is not allowed.")
			}
			next.ParentProviderUUID = newParent
			next.RootProviderUUID = parent.p.RootProviderUUID
			// As for a new child, the new parent is rewritten so that its
			// mod revision moves (DeleteProvider compares it).
			pp, err := etcdschema.Encode(parent.p)
			if err != nil {
				return nil, err
			}
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(s.keys.Provider(newParent)), "=", parent.modRev))
			ops = append(ops, clientv3.OpPut(s.keys.Provider(newParent), string(pp)))
		} else {
			if !allowReparent {
				return nil, bad("update", "un-parenting a provider is not currently allowed.")
			}
			if err := s.syncIndex(ctx); err != nil {
				return nil, err
			}
			subtree = s.subtree(cur.UUID)
			next.ParentProviderUUID = ""
			next.RootProviderUUID = cur.UUID
		}
	}
	val, err := etcdschema.Encode(next)
	if err != nil {
		return nil, err
	}
	ops = append(ops, clientv3.OpPut(s.keys.Provider(cur.UUID), string(val)))
	for _, d := range subtree {
		if d.UUID == cur.UUID {
			continue
		}
		dsp, err := s.getProvider(ctx, d.UUID)
		if err != nil {
			return nil, err
		}
		dn := dsp.p.Clone()
		dn.RootProviderUUID = next.RootProviderUUID
		dv, err := etcdschema.Encode(dn)
		if err != nil {
			return nil, err
		}
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(s.keys.Provider(d.UUID)), "=", dsp.modRev))
		ops = append(ops, clientv3.OpPut(s.keys.Provider(d.UUID), string(dv)))
	}
	if name != cur.Name {
		nv, err := etcdschema.Encode(&etcdschema.ProviderName{UUID: cur.UUID})
		if err != nil {
			return nil, err
		}
		cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(s.keys.ProviderName(name)), "=", 0))
		ops = append(ops, clientv3.OpDelete(s.keys.ProviderName(cur.Name)), clientv3.OpPut(s.keys.ProviderName(name), string(nv)))
	}
	resp, err := s.cli.Txn(ctx).If(cmps...).Then(ops...).Else(
		clientv3.OpGet(s.keys.ProviderName(name), clientv3.WithCountOnly())).Commit()
	if err != nil {
		return nil, fmt.Errorf("update provider %s: %w", cur.UUID, err)
	}
	if !resp.Succeeded {
		if name != cur.Name && resp.Responses[0].GetResponseRange().Count > 0 {
			return nil, fmt.Errorf("rename provider %s: %w", cur.UUID, ErrDuplicateName)
		}
		return nil, fmt.Errorf("update provider %s: %w", cur.UUID, ErrConcurrentUpdate)
	}
	_ = s.WaitForRevision(ctx, resp.Header.Revision)
	return next, nil
}

// subtree lists a provider and its descendants from the index.
func (s *Service) subtree(root string) []*etcdschema.Provider {
	s.idx.mu.RLock()
	defer s.idx.mu.RUnlock()
	st := s.idx.st
	var out []*etcdschema.Provider
	var walk func(string)
	walk = func(u string) {
		if e, ok := st.providers[u]; ok {
			out = append(out, e.p)
		}
		for ch := range st.children[u] {
			walk(ch)
		}
	}
	walk(root)
	return out
}

func (s *Service) deleteResourceProvider(c *reqCtx) error {
	if err := c.requireAdmin("placement:resource_providers:delete"); err != nil {
		return err
	}
	id := c.vars["uuid"]
	err := s.DeleteProvider(c.r.Context(), id)
	switch {
	case errors.Is(err, ErrProviderNotFound):
		return errNotFound(fmt.Sprintf("No resource provider with uuid %s found for delete", id))
	case errors.Is(err, ErrProviderHasChildren):
		return errConflict(codeCannotDelParent, "Unable to delete parent resource provider %s: It has child resource providers.", id)
	case errors.Is(err, ErrProviderInUse):
		return errConflict(codeProviderInUse, "Unable to delete resource provider %s: Resource provider has allocations.", id)
	case err != nil:
		return err
	}
	return c.writeEmpty(204)
}

// DeleteProvider removes a provider with no children and no allocations,
// and frees its name.
//
// The proof that neither exists is the provider's own mod revision,
// compared in the delete's transaction: every write that adds a child
// (CreateProvider, a re-parent) or an allocation (a claim, which updates
// the provider's usages) rewrites the provider in its own transaction. So
// if the provider is still at the revision read here, nothing was added
// since, and what was there by then is in the provider's usages and in the
// index once it has caught up with that read.
func (s *Service) DeleteProvider(ctx context.Context, id string) error {
	for attempt := 0; attempt <= s.retryCount; attempt++ {
		sp, err := s.getProvider(ctx, id)
		if err != nil {
			return err
		}
		if err := s.syncIndex(ctx); err != nil {
			return err
		}
		s.idx.mu.RLock()
		hasChildren := len(s.idx.st.children[id]) > 0
		hasAllocs := len(s.idx.st.rpConsumers[id]) > 0
		s.idx.mu.RUnlock()
		if hasChildren {
			return fmt.Errorf("delete provider %s: %w", id, ErrProviderHasChildren)
		}
		for _, n := range sp.p.Usages {
			if n > 0 {
				hasAllocs = true
			}
		}
		if hasAllocs {
			return fmt.Errorf("delete provider %s: %w", id, ErrProviderInUse)
		}
		if s.beforeDeleteTxn != nil {
			s.beforeDeleteTxn(id)
		}
		resp, err := s.cli.Txn(ctx).If(
			clientv3.Compare(clientv3.ModRevision(s.keys.Provider(id)), "=", sp.modRev),
		).Then(
			clientv3.OpDelete(s.keys.Provider(id)),
			clientv3.OpDelete(s.keys.ProviderName(sp.p.Name)),
		).Commit()
		if err != nil {
			return fmt.Errorf("delete provider %s: %w", id, err)
		}
		if resp.Succeeded {
			return s.WaitForRevision(ctx, resp.Header.Revision)
		}
		// Something wrote the provider since the read (a child, an
		// allocation, an update): look again.
	}
	return fmt.Errorf("delete provider %s: %w", id, ErrConcurrentUpdate)
}
