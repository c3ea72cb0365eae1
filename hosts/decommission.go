package hosts

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/placement"
)

// ErrHasInstances refuses to decommission a host that runs or builds
// instances (or whose provider still holds allocations).
var ErrHasInstances = errors.New("the compute host has instances")

// Decommission removes a compute host as Nova's DELETE /os-services/{id}
// does for a nova-compute: refused while it hosts instances; otherwise its
// compute node provider goes from placement (with its aggregates), the
// host leaves every aggregate, and its host mapping and records go.
//
// The provider goes first: placement refuses while it holds allocations,
// and once it is gone no claim can land on the host, so the records'
// transaction, which also compares that no instance or build key appeared
// since the read, cannot strand a new instance. An agent still running
// on the host registers it again (as a restarted nova-compute re-creates
// its service): stop the agent first.
func (s *Store) Decommission(ctx context.Context, host string) error {
	h, err := s.Get(ctx, host)
	if err != nil {
		return err
	}
	if h == nil {
		return fmt.Errorf("%w: %s", ErrNotFound, host)
	}
	if len(h.Instances) > 0 || h.Builds > 0 {
		return fmt.Errorf("%w: %s has %d instance(s) and %d build(s)", ErrHasInstances, host, len(h.Instances), h.Builds)
	}
	if s.placement == nil {
		return errors.New("this store was built without placement: cannot delete providers")
	}
	if rp := h.Service.ProviderUUID; rp != "" {
		err := s.placement.DeleteProvider(ctx, rp)
		switch {
		case errors.Is(err, placement.ErrProviderInUse) || errors.Is(err, placement.ErrProviderHasChildren):
			return fmt.Errorf("%w: provider %s of %s: %v", ErrHasInstances, rp, host, err)
		case errors.Is(err, placement.ErrProviderNotFound) || errors.Is(err, placement.ErrNotFound):
		case err != nil:
			return fmt.Errorf("delete provider of %s: %w", host, err)
		}
	}
	var has, gone bool
	err = s.retry(ctx, "decommission host", func(ctx context.Context) error {
		for attempt := 0; attempt < 10; attempt++ {
			aggs, mods, err := s.Aggregates(ctx)
			if err != nil {
				return err
			}
			cur, err := s.Get(ctx, host)
			if err != nil {
				return err
			}
			if cur == nil {
				gone = true
				return nil
			}
			if len(cur.Instances) > 0 || cur.Builds > 0 {
				has = true
				return nil
			}
			// No instance or build key created or changed since the read;
			// the service record as read.
			cmps := []clientv3.Cmp{
				clientv3.Compare(clientv3.ModRevision(s.keys.Service(host)), "=", cur.ModRev),
				clientv3.Compare(clientv3.ModRevision(s.keys.HostInstances(host)), "<", cur.readRev+1).WithPrefix(),
				clientv3.Compare(clientv3.ModRevision(s.keys.Builds(host)), "<", cur.readRev+1).WithPrefix(),
			}
			ops := []clientv3.Op{
				clientv3.OpDelete(s.keys.HostPrefix(host), clientv3.WithPrefix()),
				clientv3.OpDelete(s.keys.HostMapping(host)),
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
	s.log.Info("compute host decommissioned", "host", host, "provider", h.Service.ProviderUUID)
	return nil
}
