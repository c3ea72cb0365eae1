package aggregates

import (
	"context"
	"errors"
	"fmt"
	"slices"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/placement"
)

// serviceProvider is the compute node provider of host, from its service
// record; a host that never registered is ErrHostNotFound, as in Nova.
func (s *Store) serviceProvider(ctx context.Context, host string) (string, error) {
	if host == "" {
		return "", ErrHostNotFound
	}
	key := s.keys.Service(host)
	resp, err := s.cli.Get(ctx, key)
	if err != nil {
		return "", fmt.Errorf("read service of %s: %w", host, err)
	}
	if len(resp.Kvs) == 0 {
		return "", ErrHostNotFound
	}
	var svc etcdschema.Service
	if err := etcdschema.Decode(key, resp.Kvs[0].Value, &svc); err != nil {
		return "", err
	}
	return svc.ProviderUUID, nil
}

// AddHost is AggregateAPI.add_host_to_aggregate, in Nova's order: the
// host must be a compute host, the aggregate must exist, the host must
// not be in another zone (if the aggregate is one), and not already in
// the aggregate. The record is stored, then the host's provider joins
// the placement aggregate. Mirroring is idempotent, so adding the host
// again (ErrHostExists) repairs a mirror that failed; a failed mirror
// is a MirrorError, the record being stored.
func (s *Store) AddHost(ctx context.Context, ref Ref, host string) (*etcdschema.Aggregate, error) {
	rp, err := s.serviceProvider(ctx, host)
	if err != nil {
		return nil, err
	}
	var out *etcdschema.Aggregate
	err = s.mutate(ctx, func(set *Set) ([]clientv3.Cmp, []clientv3.Op, error) {
		a, err := ref.find(set)
		if err != nil {
			return nil, nil, err
		}
		out = a
		if z := a.AvailabilityZone(); z != "" {
			if _, others := set.zoneConflicts([]string{host}, a.UUID, z); len(others) > 0 {
				return nil, nil, &ZoneConflictError{Host: host, Zone: z, Others: others}
			}
		}
		if a.HasHost(host) {
			return nil, nil, ErrHostExists
		}
		next := editableCopy(a)
		next.Hosts = append(next.Hosts, host)
		out = next
		return []clientv3.Cmp{s.unchanged(set, a.UUID)},
			[]clientv3.Op{clientv3.OpPut(s.keys.Aggregate(a.UUID), etcdschema.MustEncode(next))}, nil
	})
	if err != nil && !errors.Is(err, ErrHostExists) {
		return nil, err
	}
	if _, merr := s.mirror(ctx, rp, out.UUID, true); merr != nil {
		s.log.Error("aggregate stored but placement not updated; add the host again to retry",
			"aggregate", out.UUID, "host", host, "error", merr)
		if err == nil {
			err = &MirrorError{Host: host, Err: merr}
		}
	}
	if err != nil {
		return nil, err
	}
	s.log.Info("host added to aggregate", "aggregate", out.UUID, "id", out.ID, "host", host)
	return out, nil
}

// RemoveHost is AggregateAPI.remove_host_from_aggregate: the record
// first, then the host's provider leaves the placement aggregate (if the
// host still has a service; a failed mirror is a MirrorError).
func (s *Store) RemoveHost(ctx context.Context, ref Ref, host string) (*etcdschema.Aggregate, error) {
	var out *etcdschema.Aggregate
	err := s.mutate(ctx, func(set *Set) ([]clientv3.Cmp, []clientv3.Op, error) {
		a, err := ref.find(set)
		if err != nil {
			return nil, nil, err
		}
		if !a.HasHost(host) {
			return nil, nil, ErrHostNotInAggregate
		}
		next := editableCopy(a)
		next.Hosts = slices.DeleteFunc(next.Hosts, func(h string) bool { return h == host })
		out = next
		return []clientv3.Cmp{s.unchanged(set, a.UUID)},
			[]clientv3.Op{clientv3.OpPut(s.keys.Aggregate(a.UUID), etcdschema.MustEncode(next))}, nil
	})
	if err != nil {
		return nil, err
	}
	if rp, perr := s.serviceProvider(ctx, host); perr == nil {
		if _, merr := s.mirror(ctx, rp, out.UUID, false); merr != nil {
			s.log.Error("host removed from aggregate but placement not updated", "aggregate", out.UUID, "host", host, "error", merr)
			return nil, &MirrorError{Host: host, Err: merr}
		}
	}
	s.log.Info("host removed from aggregate", "aggregate", out.UUID, "id", out.ID, "host", host)
	return out, nil
}

// errMirrored stops a provider update that would change nothing, so that
// a repeated mirror does not bump the provider's generation.
var errMirrored = errors.New("already mirrored")

// mirror puts provider rp in (or out of) placement aggregate agg;
// changed says whether it had to.
func (s *Store) mirror(ctx context.Context, rp, agg string, in bool) (changed bool, err error) {
	if s.placement == nil {
		return false, errors.New("this API was built without placement's provider updates")
	}
	err = s.placement.UpdateProvider(ctx, rp, func(pr *etcdschema.Provider) error {
		next := slices.DeleteFunc(slices.Clone(pr.Aggregates), func(a string) bool { return a == agg })
		if present := len(next) < len(pr.Aggregates); present == in {
			return errMirrored
		}
		if in {
			next = append(next, agg)
		}
		pr.Aggregates = next
		return nil
	})
	switch {
	case errors.Is(err, errMirrored):
		return false, nil
	case errors.Is(err, placement.ErrNotFound) || errors.Is(err, placement.ErrProviderNotFound):
		return false, fmt.Errorf("provider %s of the host does not exist: %w", rp, err)
	}
	return err == nil, err
}

// SyncResult is what a Sync did.
type SyncResult struct {
	Hosts   int               `json:"hosts"`
	Added   int               `json:"added"`
	Failed  map[string]string `json:"failed"`
	Missing []string          `json:"missing"`
}

// Sync is nova-manage placement sync_aggregates: it puts the compute
// node provider of every host of every aggregate in that aggregate's
// placement aggregate, repairing mirrors that failed or that a
// re-registered provider lost. Like Nova's it only adds. Hosts with no
// service record are reported as missing.
func (s *Store) Sync(ctx context.Context) (*SyncResult, error) {
	set, err := s.List(ctx)
	if err != nil {
		return nil, err
	}
	res := &SyncResult{Failed: map[string]string{}, Missing: []string{}}
	for _, a := range set.All() {
		for _, h := range a.Hosts {
			res.Hosts++
			rp, err := s.serviceProvider(ctx, h)
			if errors.Is(err, ErrHostNotFound) {
				res.Missing = append(res.Missing, h)
				continue
			}
			if err == nil {
				var changed bool
				changed, err = s.mirror(ctx, rp, a.UUID, true)
				if changed {
					res.Added++
				}
			}
			if err != nil {
				res.Failed[h+" in "+a.UUID] = err.Error()
			}
		}
	}
	s.log.Info("aggregates synced to placement", "hosts", res.Hosts, "added", res.Added,
		"failed", len(res.Failed), "missing", len(res.Missing))
	return res, nil
}
