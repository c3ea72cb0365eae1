package placement

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
)

var (
	stdTraitSet = toSet(standardTraits)
	stdClassSet = toSet(standardResourceClasses)
)

func toSet(in []string) map[string]bool {
	m := make(map[string]bool, len(in))
	for _, s := range in {
		m[s] = true
	}
	return m
}

// customNames lists the custom traits or classes stored under prefix.
func (s *Service) customNames(ctx context.Context, prefix string) ([]string, error) {
	resp, err := s.cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", prefix, err)
	}
	out := make([]string, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		if n, ok := etcdschema.LastSegment(string(kv.Key), prefix); ok {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out, nil
}

// AllTraits lists standard and custom traits.
func (s *Service) AllTraits(ctx context.Context) ([]string, error) {
	custom, err := s.customNames(ctx, s.keys.CustomTraits())
	if err != nil {
		return nil, err
	}
	return append(append([]string(nil), standardTraits...), custom...), nil
}

// AllResourceClasses lists standard classes (in os-resource-classes order)
// then custom ones in the order they were created: Placement's class id
// order (class_order.go).
func (s *Service) AllResourceClasses(ctx context.Context) ([]string, error) {
	prefix := s.keys.CustomResourceClasses()
	resp, err := s.cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", prefix, err)
	}
	o := make(classOrder, len(resp.Kvs))
	custom := make([]string, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		if n, ok := etcdschema.LastSegment(string(kv.Key), prefix); ok {
			custom = append(custom, n)
			o[n] = kv.CreateRevision
		}
	}
	return append(append([]string(nil), standardResourceClasses...), o.sorted(custom)...), nil
}

// MissingTraits returns the names that are neither standard nor created.
func (s *Service) MissingTraits(ctx context.Context, names []string) ([]string, error) {
	var custom map[string]bool
	var missing []string
	for _, n := range names {
		if stdTraitSet[n] {
			continue
		}
		if custom == nil {
			all, err := s.customNames(ctx, s.keys.CustomTraits())
			if err != nil {
				return nil, err
			}
			custom = toSet(all)
		}
		if !custom[n] {
			missing = append(missing, n)
		}
	}
	return missing, nil
}

// ClassExists says whether rc is standard or a created custom class.
func (s *Service) ClassExists(ctx context.Context, rc string) (bool, error) {
	if stdClassSet[rc] {
		return true, nil
	}
	if !strings.HasPrefix(rc, "CUSTOM_") {
		return false, nil
	}
	resp, err := s.cli.Get(ctx, s.keys.CustomResourceClass(rc), clientv3.WithCountOnly())
	if err != nil {
		return false, fmt.Errorf("read class %s: %w", rc, err)
	}
	return resp.Count > 0, nil
}

// createCustom stores a custom trait or class; false if it existed.
func (s *Service) createCustom(ctx context.Context, key string, v etcdschema.Versioned) (bool, error) {
	val, err := etcdschema.Encode(v)
	if err != nil {
		return false, err
	}
	resp, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(val))).Commit()
	if err != nil {
		return false, fmt.Errorf("create %s: %w", key, err)
	}
	return resp.Succeeded, nil
}

// CreateTrait creates the custom trait name; false if it existed.
func (s *Service) CreateTrait(ctx context.Context, name string) (bool, error) {
	return s.createCustom(ctx, s.keys.CustomTrait(name), &etcdschema.CustomTrait{Name: name, CreatedAt: s.now()})
}

// CreateResourceClass creates the custom resource class name; false if it
// existed.
func (s *Service) CreateResourceClass(ctx context.Context, name string) (bool, error) {
	return s.createCustom(ctx, s.keys.CustomResourceClass(name), &etcdschema.CustomResourceClass{Name: name, CreatedAt: s.now()})
}

// DeleteTrait deletes the custom trait name. Whether it may go (not
// standard, on no provider: TraitsInUse) is the caller's check.
func (s *Service) DeleteTrait(ctx context.Context, name string) error {
	if _, err := s.cli.Delete(ctx, s.keys.CustomTrait(name)); err != nil {
		return fmt.Errorf("delete trait %s: %w", name, err)
	}
	return nil
}

// DeleteResourceClass deletes the custom resource class name. Whether it
// may go (not standard, in no inventory: ClassInUse) is the caller's check.
func (s *Service) DeleteResourceClass(ctx context.Context, name string) error {
	if _, err := s.cli.Delete(ctx, s.keys.CustomResourceClass(name)); err != nil {
		return fmt.Errorf("delete class %s: %w", name, err)
	}
	return nil
}

// IsStandardTrait says whether name is one of os-traits' standard traits.
func IsStandardTrait(name string) bool { return stdTraitSet[name] }

// IsStandardResourceClass says whether rc is one of os-resource-classes'
// standard classes.
func IsStandardResourceClass(rc string) bool { return stdClassSet[rc] }

// StandardResourceClasses lists the standard classes in os-resource-classes'
// order, which is the order of their ids in Placement's database.
func StandardResourceClasses() []string { return slices.Clone(standardResourceClasses) }
