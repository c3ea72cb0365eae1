package hosts

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
)

// ErrHasInstances refuses to decommission a host that runs or builds
// instances (or whose provider still holds allocations or children).
var ErrHasInstances = errors.New("the compute host has instances")

// Decommission removes a compute host as Nova's DELETE /os-services/{id}
// does for a nova-compute: refused while it hosts instances; otherwise its
// compute node provider goes from placement (with its name and placement
// aggregates), the host leaves every aggregate, and its host mapping and
// records go.
//
// It is one transaction, so there is no state where the provider is gone
// and the host is not, or the reverse. It compares, against what it read:
// the service record; that no instance or build key of the host was
// created since; the provider record, which every claim on it and every
// child added rewrites (placement's DeleteProvider rests on the same
// fact), with no usage and no child at the read; and each aggregate it
// edits. A change to any of them makes it read and decide again.
//
// An agent still running on the host registers it again (as a restarted
// nova-compute re-creates its service): stop the agent first.
func (s *Store) Decommission(ctx context.Context, host string) error {
	var has, gone bool
	var provider string
	err := s.retry(ctx, "decommission host", func(ctx context.Context) error {
		for attempt := 0; attempt < 10; attempt++ {
			h, err := s.Get(ctx, host)
			if err != nil {
				return err
			}
			if h == nil {
				gone = true
				return nil
			}
			if len(h.Instances) > 0 || h.Builds > 0 {
				has = true
				return nil
			}
			cmps := []clientv3.Cmp{
				clientv3.Compare(clientv3.ModRevision(s.keys.Service(host)), "=", h.ModRev),
				clientv3.Compare(clientv3.ModRevision(s.keys.HostInstances(host)), "<", h.readRev+1).WithPrefix(),
				clientv3.Compare(clientv3.ModRevision(s.keys.Builds(host)), "<", h.readRev+1).WithPrefix(),
			}
			ops := []clientv3.Op{
				clientv3.OpDelete(s.keys.HostPrefix(host), clientv3.WithPrefix()),
				clientv3.OpDelete(s.keys.HostMapping(host)),
			}
			provider = h.Service.ProviderUUID
			if provider != "" {
				pc, po, busy, err := s.providerDelete(ctx, provider)
				if err != nil {
					return err
				}
				if busy {
					has = true
					return nil
				}
				cmps, ops = append(cmps, pc...), append(ops, po...)
			}
			aggs, mods, err := s.Aggregates(ctx)
			if err != nil {
				return err
			}
			now := time.Now().UTC()
			for id, a := range aggs {
				if !a.HasHost(host) {
					continue
				}
				next := *a
				next.Hosts = slices.DeleteFunc(slices.Clone(a.Hosts), func(x string) bool { return x == host })
				next.UpdatedAt = now
				cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(s.keys.Aggregate(id)), "=", mods[id]))
				ops = append(ops, clientv3.OpPut(s.keys.Aggregate(id), etcdschema.MustEncode(&next)))
			}
			if len(ops) > 128 {
				return fmt.Errorf("decommission %s: its %d aggregates need more than one etcd transaction", host, len(ops)-4)
			}
			resp, err := s.cli.Txn(ctx).If(cmps...).Then(ops...).Commit()
			if err != nil {
				return err
			}
			if resp.Succeeded {
				return nil
			}
		}
		return fmt.Errorf("%w: %s", ErrKeptChanging, host)
	}, "host", host)
	switch {
	case err != nil:
		return err
	case gone:
		return fmt.Errorf("%w: %s", ErrNotFound, host)
	case has:
		return fmt.Errorf("%w: %s", ErrHasInstances, host)
	}
	s.log.Info("compute host decommissioned", "host", host, "provider", provider)
	return nil
}

// providerDelete reads provider rp and returns the compares and deletes
// that remove it, or busy when it holds allocations or has children. A
// provider that is already gone needs nothing.
func (s *Store) providerDelete(ctx context.Context, rp string) (cmps []clientv3.Cmp, ops []clientv3.Op, busy bool, err error) {
	key := s.keys.Provider(rp)
	resp, err := s.cli.Get(ctx, key)
	if err != nil {
		return nil, nil, false, fmt.Errorf("read provider %s: %w", rp, err)
	}
	if len(resp.Kvs) == 0 {
		return []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(key), "=", 0)}, nil, false, nil
	}
	var p etcdschema.Provider
	if err := etcdschema.Decode(key, resp.Kvs[0].Value, &p); err != nil {
		return nil, nil, false, err
	}
	for _, n := range p.Usages {
		if n > 0 {
			return nil, nil, true, nil
		}
	}
	all, err := s.Providers(ctx, resp.Header.Revision)
	if err != nil {
		return nil, nil, false, err
	}
	for _, other := range all {
		if other.ParentProviderUUID == rp {
			return nil, nil, true, nil
		}
	}
	return []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(key), "=", resp.Kvs[0].ModRevision)},
		[]clientv3.Op{clientv3.OpDelete(key), clientv3.OpDelete(s.keys.ProviderName(p.Name))}, false, nil
}
