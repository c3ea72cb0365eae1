package placement

import (
	"context"
	"errors"
	"fmt"
	"sort"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
)

// storedProvider is a provider as read from etcd, with the mod revision a
// write must compare against.
type storedProvider struct {
	p      *etcdschema.Provider
	modRev int64
}

// getProvider reads one provider; ok is false when it does not exist.
func (s *Service) getProvider(ctx context.Context, uuid string) (*storedProvider, error) {
	key := s.keys.Provider(uuid)
	resp, err := s.cli.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("read provider %s: %w", uuid, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, fmt.Errorf("provider %s: %w", uuid, ErrProviderNotFound)
	}
	p := &etcdschema.Provider{}
	if err := etcdschema.Decode(key, resp.Kvs[0].Value, p); err != nil {
		return nil, err
	}
	normalizeProvider(p)
	return &storedProvider{p: p, modRev: resp.Kvs[0].ModRevision}, nil
}

// normalizeProvider fills the maps and defaults a record may omit, so
// callers can index them without nil checks.
func normalizeProvider(p *etcdschema.Provider) {
	if p.Inventories == nil {
		p.Inventories = map[string]etcdschema.Inventory{}
	}
	if p.Usages == nil {
		p.Usages = map[string]int64{}
	}
	if p.Traits == nil {
		p.Traits = []string{}
	}
	if p.Aggregates == nil {
		p.Aggregates = []string{}
	}
	if p.RootProviderUUID == "" {
		p.RootProviderUUID = p.UUID
	}
}

// Provider returns the provider's current record, read from etcd.
func (s *Service) Provider(ctx context.Context, uuid string) (*etcdschema.Provider, error) {
	sp, err := s.getProvider(ctx, uuid)
	if err != nil {
		return nil, err
	}
	return sp.p, nil
}

// EnsureProvider creates the provider if it does not exist yet; an agent
// calls it on every start. A provider that exists is left alone, whatever
// its name; a name held by another provider is ErrDuplicateName.
func (s *Service) EnsureProvider(ctx context.Context, uuid, name, parentUUID string) error {
	_, err := s.CreateProvider(ctx, uuid, name, parentUUID)
	if errors.Is(err, ErrDuplicateUUID) {
		return nil
	}
	return err
}

// CreateProvider creates a provider, reserving its name, in one
// transaction. A parent must exist; the new provider joins its tree.
func (s *Service) CreateProvider(ctx context.Context, uuid, name, parentUUID string) (*etcdschema.Provider, error) {
	for attempt := 0; attempt <= s.retryCount; attempt++ {
		now := s.now()
		p := &etcdschema.Provider{
			UUID: uuid, Name: name, RootProviderUUID: uuid, CreatedAt: now, UpdatedAt: now,
		}
		normalizeProvider(p)
		cmps := []clientv3.Cmp{
			clientv3.Compare(clientv3.CreateRevision(s.keys.Provider(uuid)), "=", 0),
			clientv3.Compare(clientv3.CreateRevision(s.keys.ProviderName(name)), "=", 0),
		}
		var parentPut []clientv3.Op
		if parentUUID != "" {
			parent, err := s.getProvider(ctx, parentUUID)
			if err != nil {
				return nil, fmt.Errorf("create provider %s under parent: %w", uuid, err)
			}
			p.ParentProviderUUID = parentUUID
			p.RootProviderUUID = parent.p.RootProviderUUID
			// The parent must still be where we read it (not deleted or
			// moved to another tree) when the child is written, and the
			// child rewrites it (content unchanged): a new child moves the
			// parent's mod revision, which DeleteProvider compares.
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(s.keys.Provider(parentUUID)), "=", parent.modRev))
			pp, err := etcdschema.Encode(parent.p)
			if err != nil {
				return nil, err
			}
			parentPut = []clientv3.Op{clientv3.OpPut(s.keys.Provider(parentUUID), string(pp))}
		}
		pv, err := etcdschema.Encode(p)
		if err != nil {
			return nil, err
		}
		nv, err := etcdschema.Encode(&etcdschema.ProviderName{UUID: uuid})
		if err != nil {
			return nil, err
		}
		resp, err := s.cli.Txn(ctx).If(cmps...).Then(append([]clientv3.Op{
			clientv3.OpPut(s.keys.Provider(uuid), string(pv)),
			clientv3.OpPut(s.keys.ProviderName(name), string(nv)),
		}, parentPut...)...).Else(
			clientv3.OpGet(s.keys.Provider(uuid), clientv3.WithCountOnly()),
			clientv3.OpGet(s.keys.ProviderName(name)),
		).Commit()
		if err != nil {
			return nil, fmt.Errorf("create provider %s: %w", uuid, err)
		}
		if resp.Succeeded {
			s.log.Debug("provider created", "uuid", uuid, "name", name, "parent", parentUUID)
			p.Generation = 0
			return p, nil
		}
		if resp.Responses[0].GetResponseRange().Count > 0 {
			return nil, fmt.Errorf("create provider %s: %w", uuid, ErrDuplicateUUID)
		}
		if kvs := resp.Responses[1].GetResponseRange().Kvs; len(kvs) > 0 {
			return nil, fmt.Errorf("create provider %s: name %q: %w", uuid, name, ErrDuplicateName)
		}
		// Only the parent moved: read it again.
	}
	return nil, fmt.Errorf("create provider %s: %w", uuid, ErrConcurrentUpdate)
}

// UpdateProvider applies mutate to the provider's current record and
// writes it with a compare on its mod revision, retrying when another
// writer got in first. It bumps the generation. Agents use it to report
// inventories and traits. mutate must not change uuid or tree position.
func (s *Service) UpdateProvider(ctx context.Context, uuid string, mutate func(p *etcdschema.Provider) error) error {
	_, err := s.updateProvider(ctx, uuid, nil, mutate)
	return err
}

// updateProvider is UpdateProvider with an optional expected generation:
// when set, a mismatch is ErrGenerationConflict and nothing is retried, as
// the HTTP API requires.
func (s *Service) updateProvider(ctx context.Context, uuid string, expectGen *int64, mutate func(p *etcdschema.Provider) error) (*etcdschema.Provider, error) {
	for attempt := 0; attempt <= s.retryCount; attempt++ {
		cur, err := s.getProvider(ctx, uuid)
		if err != nil {
			return nil, err
		}
		if expectGen != nil && *expectGen != cur.p.Generation {
			return nil, fmt.Errorf("update provider %s: generation %d, caller has %d: %w",
				uuid, cur.p.Generation, *expectGen, ErrGenerationConflict)
		}
		next := cur.p.Clone()
		if err := mutate(next); err != nil {
			return nil, fmt.Errorf("update provider %s: %w", uuid, err)
		}
		next.UUID = cur.p.UUID
		next.ParentProviderUUID = cur.p.ParentProviderUUID
		next.RootProviderUUID = cur.p.RootProviderUUID
		next.Traits = sortedUnique(next.Traits)
		next.Aggregates = sortedUnique(next.Aggregates)
		next.Generation = cur.p.Generation + 1
		next.UpdatedAt = s.now()
		val, err := etcdschema.Encode(next)
		if err != nil {
			return nil, err
		}
		pk := s.keys.Provider(uuid)
		cmps := []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(pk), "=", cur.modRev)}
		ops := []clientv3.Op{clientv3.OpPut(pk, string(val))}
		if next.Name != cur.p.Name {
			nv, err := etcdschema.Encode(&etcdschema.ProviderName{UUID: uuid})
			if err != nil {
				return nil, err
			}
			cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(s.keys.ProviderName(next.Name)), "=", 0))
			ops = append(ops, clientv3.OpDelete(s.keys.ProviderName(cur.p.Name)),
				clientv3.OpPut(s.keys.ProviderName(next.Name), string(nv)))
		}
		resp, err := s.cli.Txn(ctx).If(cmps...).Then(ops...).Else(
			clientv3.OpGet(s.keys.ProviderName(next.Name), clientv3.WithCountOnly()),
		).Commit()
		if err != nil {
			return nil, fmt.Errorf("update provider %s: %w", uuid, err)
		}
		if resp.Succeeded {
			return next, nil
		}
		if next.Name != cur.p.Name && resp.Responses[0].GetResponseRange().Count > 0 {
			return nil, fmt.Errorf("rename provider %s to %q: %w", uuid, next.Name, ErrDuplicateName)
		}
		// The record moved without (necessarily) a new generation: a
		// child was added, or an allocation moved off it. Read it again;
		// the next attempt refuses a caller whose generation is now stale.
	}
	return nil, fmt.Errorf("update provider %s: %w", uuid, ErrConcurrentUpdate)
}

func sortedUnique(in []string) []string {
	out := make([]string, 0, len(in))
	seen := make(map[string]struct{}, len(in))
	for _, s := range in {
		if _, ok := seen[s]; ok {
			continue
		}
		seen[s] = struct{}{}
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// putProviderCAS writes next over sp if sp is still current.
func (s *Service) putProviderCAS(ctx context.Context, sp *storedProvider, next *etcdschema.Provider) error {
	val, err := etcdschema.Encode(next)
	if err != nil {
		return err
	}
	pk := s.keys.Provider(next.UUID)
	resp, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(pk), "=", sp.modRev)).
		Then(clientv3.OpPut(pk, string(val))).Commit()
	if err != nil {
		return fmt.Errorf("write provider %s: %w", next.UUID, err)
	}
	if !resp.Succeeded {
		return fmt.Errorf("write provider %s: %w", next.UUID, ErrConcurrentUpdate)
	}
	return nil
}
