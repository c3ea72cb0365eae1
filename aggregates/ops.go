package aggregates

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
)

// Ref names one aggregate: by its uuid (Berth's /v1) or by Nova's
// integer id (/os-aggregates/{id}).
type Ref struct {
	UUID string
	ID   int
}

// ByUUID refers to the aggregate with uuid.
func ByUUID(uuid string) Ref { return Ref{UUID: uuid} }

// ByID refers to the aggregate with Nova's integer id.
func ByID(id int) Ref { return Ref{ID: id} }

func (r Ref) find(set *Set) (*etcdschema.Aggregate, error) {
	var a *etcdschema.Aggregate
	if r.UUID != "" {
		a = set.ByUUID(r.UUID)
	} else {
		a = set.ByID(r.ID)
	}
	if a == nil {
		return nil, ErrNotFound
	}
	return a, nil
}

// Find is the aggregate ref names (ErrNotFound if none).
func (s *Store) Find(ctx context.Context, ref Ref) (*etcdschema.Aggregate, error) {
	set, err := s.List(ctx)
	if err != nil {
		return nil, err
	}
	return ref.find(set)
}

// Create is AggregateAPI.create_aggregate: a new aggregate named name,
// an availability zone when zone is not "", with the next integer id.
func (s *Store) Create(ctx context.Context, name, zone string) (*etcdschema.Aggregate, error) {
	a := &etcdschema.Aggregate{UUID: uuid.NewString(), Name: name, Hosts: []string{},
		Metadata: map[string]string{}, CreatedAt: time.Now().UTC()}
	if zone != "" {
		a.Metadata[etcdschema.AggregateAZKey] = zone
	}
	k := s.keys
	err := s.mutate(ctx, func(set *Set) ([]clientv3.Cmp, []clientv3.Op, error) {
		for _, o := range set.byUUID {
			if o.Name == name {
				return nil, nil, &NameExistsError{Name: name}
			}
		}
		a.ID = set.nextID()
		cmp, op := s.claimIDs(set, a.ID)
		return []clientv3.Cmp{cmp, clientv3.Compare(clientv3.CreateRevision(k.AggregateName(name)), "=", 0)},
			[]clientv3.Op{op, clientv3.OpPut(k.Aggregate(a.UUID), etcdschema.MustEncode(a)),
				clientv3.OpPut(k.AggregateName(name), etcdschema.MustEncode(&etcdschema.AggregateName{UUID: a.UUID}))}, nil
	})
	if err != nil {
		return nil, err
	}
	s.log.Info("aggregate created", "aggregate", a.UUID, "id", a.ID, "name", name, "zone", zone)
	return a, nil
}

// Delete is AggregateAPI.delete_aggregate: refused while it has hosts.
func (s *Store) Delete(ctx context.Context, ref Ref) error {
	k := s.keys
	var gone *etcdschema.Aggregate
	err := s.mutate(ctx, func(set *Set) ([]clientv3.Cmp, []clientv3.Op, error) {
		a, err := ref.find(set)
		if err != nil {
			return nil, nil, err
		}
		if len(a.Hosts) > 0 {
			return nil, nil, &NotEmptyError{Hosts: a.Hosts}
		}
		gone = a
		return []clientv3.Cmp{s.unchanged(set, a.UUID)},
			[]clientv3.Op{clientv3.OpDelete(k.Aggregate(a.UUID)), clientv3.OpDelete(k.AggregateName(a.Name))}, nil
	})
	if err != nil {
		return err
	}
	s.log.Info("aggregate deleted", "aggregate", gone.UUID, "id", gone.ID, "name", gone.Name)
	return nil
}

// Update is AggregateAPI.update_aggregate: a new name (nil: unchanged)
// and a new zone (nil: unchanged; "": none, which only /v1 allows).
func (s *Store) Update(ctx context.Context, ref Ref, name, zone *string) (*etcdschema.Aggregate, error) {
	k := s.keys
	var out *etcdschema.Aggregate
	err := s.mutate(ctx, func(set *Set) ([]clientv3.Cmp, []clientv3.Op, error) {
		a, err := ref.find(set)
		if err != nil {
			return nil, nil, err
		}
		next := editableCopy(a)
		cmps := []clientv3.Cmp{s.unchanged(set, a.UUID)}
		var ops []clientv3.Op
		if name != nil && *name != a.Name {
			for _, o := range set.byUUID {
				if o.Name == *name {
					return nil, nil, &NameExistsError{Name: *name}
				}
			}
			next.Name = *name
			cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(k.AggregateName(next.Name)), "=", 0))
			ops = append(ops, clientv3.OpDelete(k.AggregateName(a.Name)),
				clientv3.OpPut(k.AggregateName(next.Name), etcdschema.MustEncode(&etcdschema.AggregateName{UUID: a.UUID})))
		}
		if zone != nil {
			if *zone == "" {
				delete(next.Metadata, etcdschema.AggregateAZKey)
			} else {
				next.Metadata[etcdschema.AggregateAZKey] = *zone
			}
		}
		if err := s.checkZoneChange(ctx, set, a, next); err != nil {
			return nil, nil, err
		}
		next.UpdatedAt = time.Now().UTC()
		out = next
		return cmps, append(ops, clientv3.OpPut(k.Aggregate(a.UUID), etcdschema.MustEncode(next))), nil
	})
	if err != nil {
		return nil, err
	}
	s.log.Info("aggregate updated", "aggregate", out.UUID, "id", out.ID, "name", out.Name)
	return out, nil
}

// SetMetadata is AggregateAPI.update_aggregate_metadata: each key set to
// its value, or deleted for nil. The zone key is checked as a zone
// change.
func (s *Store) SetMetadata(ctx context.Context, ref Ref, meta map[string]*string) (*etcdschema.Aggregate, error) {
	var out *etcdschema.Aggregate
	err := s.mutate(ctx, func(set *Set) ([]clientv3.Cmp, []clientv3.Op, error) {
		a, err := ref.find(set)
		if err != nil {
			return nil, nil, err
		}
		next := editableCopy(a)
		for key, v := range meta {
			if v == nil {
				delete(next.Metadata, key)
			} else {
				next.Metadata[key] = *v
			}
		}
		if err := s.checkZoneChange(ctx, set, a, next); err != nil {
			return nil, nil, err
		}
		next.UpdatedAt = time.Now().UTC()
		out = next
		return []clientv3.Cmp{s.unchanged(set, a.UUID)},
			[]clientv3.Op{clientv3.OpPut(s.keys.Aggregate(a.UUID), etcdschema.MustEncode(next))}, nil
	})
	if err != nil {
		return nil, err
	}
	s.log.Info("aggregate metadata set", "aggregate", out.UUID, "id", out.ID, "keys", len(meta))
	return out, nil
}

// checkZoneChange is Nova's is_safe_to_update_az when an aggregate's
// zone changes (set_metadata or update): none of its hosts may be in
// another zone through another aggregate, and a zone whose hosts run
// servers cannot be renamed or removed, since those servers are
// recorded in the old one. The servers are counted from the hosts'
// instance info and build casts.
func (s *Store) checkZoneChange(ctx context.Context, set *Set, old, next *etcdschema.Aggregate) error {
	z := next.AvailabilityZone()
	if z == old.AvailabilityZone() {
		return nil
	}
	if z != "" {
		if host, others := set.zoneConflicts(next.Hosts, next.UUID, z); len(others) > 0 {
			return &ZoneConflictError{Host: host, Zone: z, Others: others}
		}
	}
	for _, h := range next.Hosts {
		n, err := s.serversOn(ctx, h)
		if err != nil {
			return err
		}
		if n > 0 {
			return &ServersInZoneError{Host: h, Servers: n}
		}
	}
	return nil
}

// serversOn counts what a host runs or is building.
func (s *Store) serversOn(ctx context.Context, host string) (int64, error) {
	resp, err := s.cli.Txn(ctx).Then(
		clientv3.OpGet(s.keys.HostInstances(host), clientv3.WithPrefix(), clientv3.WithCountOnly()),
		clientv3.OpGet(s.keys.Builds(host), clientv3.WithPrefix(), clientv3.WithCountOnly()),
	).Commit()
	if err != nil {
		return 0, fmt.Errorf("count servers on %s: %w", host, err)
	}
	return resp.Responses[0].GetResponseRange().Count + resp.Responses[1].GetResponseRange().Count, nil
}
