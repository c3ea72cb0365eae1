package placement

import (
	"context"
	"errors"
	"fmt"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
)

// Provider writes beyond create and update (store.go): moving a provider
// in its tree, deleting it, and the generation-checked updates Placement's
// API makes. Each compares the mod revisions it read, so a concurrent
// writer makes it fail or retry rather than be overwritten.

// ProviderRecord is a provider as read from etcd, with the mod revision a
// later write compares against (see MoveProvider).
type ProviderRecord struct {
	Provider *etcdschema.Provider
	ModRev   int64
}

// ReadProvider reads a provider and its mod revision from etcd;
// ErrProviderNotFound when it does not exist.
func (s *Service) ReadProvider(ctx context.Context, uuid string) (ProviderRecord, error) {
	sp, err := s.getProvider(ctx, uuid)
	if err != nil {
		return ProviderRecord{}, err
	}
	return ProviderRecord{Provider: sp.p, ModRev: sp.modRev}, nil
}

// UpdateProviderAt is UpdateProvider for a caller that read the provider
// at generation: a provider at another generation is ErrGenerationConflict
// and nothing is retried, as Placement's API requires. It returns the
// record written.
func (s *Service) UpdateProviderAt(ctx context.Context, uuid string, generation int64, mutate func(p *etcdschema.Provider) error) (*etcdschema.Provider, error) {
	return s.updateProvider(ctx, uuid, &generation, mutate)
}

// UpdateInventoriesAt is UpdateProviderAt for a change of inventories,
// with Placement's rule that a class with allocations keeps its
// inventory: removing one is ErrInventoryInUse, naming the classes.
func (s *Service) UpdateInventoriesAt(ctx context.Context, uuid string, generation int64, mutate func(p *etcdschema.Provider) error) (*etcdschema.Provider, error) {
	rec, err := s.UpdateProviderAt(ctx, uuid, generation, func(p *etcdschema.Provider) error {
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
			return &inventoryInUse{classes: inUse, provider: uuid}
		}
		return nil
	})
	var iu *inventoryInUse
	if errors.As(err, &iu) {
		// Named in Placement's class id order, which needs the custom
		// classes' creation order: read once the write has failed.
		o, oerr := s.classOrderOf(ctx, iu.classes)
		if oerr != nil {
			return nil, oerr
		}
		return nil, fmt.Errorf("update provider %s: %w", uuid, iu.in(o))
	}
	return rec, err
}

// inventoryInUse is ErrInventoryInUse before its classes are put in
// Placement's order (classOrder.in).
type inventoryInUse struct {
	classes  []string
	provider string
}

func (e *inventoryInUse) Error() string { return e.in(nil).Error() }
func (e *inventoryInUse) Unwrap() error { return ErrInventoryInUse }

// in is the error naming e's classes in o's order.
func (e *inventoryInUse) in(o classOrder) error {
	return detailf(ErrInventoryInUse, "Inventory for '%s' on resource provider '%s' in use.", strings.Join(o.sorted(e.classes), ", "), e.provider)
}

// SetAggregatesKeepGeneration sets the provider's aggregates without
// bumping its generation, as Placement does before microversion 1.19. It
// fails with ErrConcurrentUpdate if the provider changed since rec was read.
func (s *Service) SetAggregatesKeepGeneration(ctx context.Context, rec ProviderRecord, aggs []string) (*etcdschema.Provider, error) {
	next := rec.Provider.Clone()
	next.Aggregates = aggs
	next.UpdatedAt = s.now()
	if err := s.putProviderCAS(ctx, &storedProvider{p: rec.Provider, modRev: rec.ModRev}, next); err != nil {
		return nil, err
	}
	return next, nil
}

// MoveProvider renames and/or re-parents the provider rec read; a move
// carries the whole subtree to the new root in the same transaction. It
// does not bump generations, as Placement's save does not. A move
// Placement refuses (a loop, a missing parent, a re-parent before
// allowReparent) is ErrInvalid with Placement's words (Detail); a change
// since rec was read is ErrConcurrentUpdate.
func (s *Service) MoveProvider(ctx context.Context, rec ProviderRecord, name, newParent string, allowReparent bool) (*etcdschema.Provider, error) {
	sp := &storedProvider{p: rec.Provider, modRev: rec.ModRev}
	cur := sp.p
	bad := func(action, reason string) error {
		return detailf(ErrInvalid, "Unable to save resource provider %s: Object action %s failed because: %s", cur.UUID, action, reason)
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
	if err := s.WaitConsumers(ctx); err != nil {
		return err
	}
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
		hasAllocs := s.idx.st.rpConsumers[id] != nil
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
