package aggregates

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
)

// ProviderAggregates is what mirroring needs of placement: to put a
// host's compute node provider in or out of a placement aggregate, as
// Nova's API does (aggregate_add_host / aggregate_remove_host).
type ProviderAggregates interface {
	UpdateProvider(ctx context.Context, uuid string, mutate func(p *etcdschema.Provider) error) error
}

// Store is the aggregates of one deployment.
type Store struct {
	cli       *clientv3.Client
	keys      etcdschema.Keys
	placement ProviderAggregates // nil: changes that need mirroring fail
	log       hclog.Logger
}

// New returns the store of the aggregates under keys, mirroring hosts
// into placement p.
func New(cli *clientv3.Client, keys etcdschema.Keys, p ProviderAggregates, log hclog.Logger) *Store {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	return &Store{cli: cli, keys: keys, placement: p, log: log}
}

// Set is every aggregate read at one revision.
type Set struct {
	rev    int64
	byUUID map[string]*etcdschema.Aggregate
	mods   map[string]int64
	// lastID is the AggregateLastID read with the records (0: none) and
	// lastIDMod its mod revision (0: absent).
	lastID, lastIDMod int64
}

// ByUUID is the aggregate with uuid, or nil.
func (s *Set) ByUUID(uuid string) *etcdschema.Aggregate { return s.byUUID[uuid] }

// ByID is the aggregate with Nova's integer id, or nil.
func (s *Set) ByID(id int) *etcdschema.Aggregate {
	for _, a := range s.byUUID {
		if a.ID == id {
			return a
		}
	}
	return nil
}

// All is every aggregate in id order (Nova's list order), then by uuid
// for any without an id yet.
func (s *Set) All() []*etcdschema.Aggregate {
	out := make([]*etcdschema.Aggregate, 0, len(s.byUUID))
	for _, a := range s.byUUID {
		out = append(out, a)
	}
	slices.SortFunc(out, func(x, y *etcdschema.Aggregate) int {
		if x.ID != y.ID {
			return x.ID - y.ID
		}
		return strings.Compare(x.UUID, y.UUID)
	})
	return out
}

// Zones is every availability zone an aggregate names.
func (s *Set) Zones() map[string]bool {
	out := map[string]bool{}
	for _, a := range s.byUUID {
		if z := a.AvailabilityZone(); z != "" {
			out[z] = true
		}
	}
	return out
}

// zoneConflicts is Nova's is_safe_to_update_az: the zones, other than
// zone, of the aggregates other than except that hold one of hosts, one
// entry per such aggregate in id order; host is the first host found in
// one of them.
func (s *Set) zoneConflicts(hosts []string, except, zone string) (host string, others []string) {
	for _, a := range s.All() {
		z := a.AvailabilityZone()
		if a.UUID == except || z == "" || z == zone {
			continue
		}
		for _, h := range hosts {
			if a.HasHost(h) {
				if host == "" {
					host = h
				}
				others = append(others, z)
				break
			}
		}
	}
	return host, others
}

// List reads every aggregate at one revision, first giving an id to any
// record written before ids (see assignIDs).
func (s *Store) List(ctx context.Context) (*Set, error) {
	for range maxAttempts {
		set, err := s.read(ctx)
		if err != nil {
			return nil, err
		}
		if !set.lacksIDs() {
			return set, nil
		}
		if err := s.assignIDs(ctx, set); err != nil {
			return nil, err
		}
	}
	return nil, ErrContention
}

// Get is the aggregate with uuid (ErrNotFound if none).
func (s *Store) Get(ctx context.Context, uuid string) (*etcdschema.Aggregate, error) {
	set, err := s.List(ctx)
	if err != nil {
		return nil, err
	}
	if a := set.ByUUID(uuid); a != nil {
		return a, nil
	}
	return nil, ErrNotFound
}

// read gets the records and the id counter in one transaction, so both
// are seen at one revision.
func (s *Store) read(ctx context.Context) (*Set, error) {
	resp, err := s.cli.Txn(ctx).Then(
		clientv3.OpGet(s.keys.Aggregates(), clientv3.WithPrefix()),
		clientv3.OpGet(s.keys.AggregateLastID()),
	).Commit()
	if err != nil {
		return nil, fmt.Errorf("read aggregates: %w", err)
	}
	set := &Set{rev: resp.Header.Revision, byUUID: map[string]*etcdschema.Aggregate{}, mods: map[string]int64{}}
	for _, kv := range resp.Responses[0].GetResponseRange().Kvs {
		var a etcdschema.Aggregate
		if err := etcdschema.Decode(string(kv.Key), kv.Value, &a); err != nil {
			return nil, err // a rule checked over a partial set could pass wrongly
		}
		set.byUUID[a.UUID] = &a
		set.mods[a.UUID] = kv.ModRevision
	}
	if kvs := resp.Responses[1].GetResponseRange().Kvs; len(kvs) > 0 {
		var last etcdschema.AggregateLastID
		if err := etcdschema.Decode(string(kvs[0].Key), kvs[0].Value, &last); err != nil {
			return nil, err
		}
		set.lastID, set.lastIDMod = int64(last.ID), kvs[0].ModRevision
	}
	return set, nil
}

// maxAttempts bounds the optimistic retries of one change: each lost
// race means another writer committed, so the loop always progresses.
const maxAttempts = 16

// mutate applies change to the aggregates read at one revision and
// commits its operations only if no aggregate was created or changed
// since (a compare on the whole prefix's mod revision), retrying a lost
// race with a fresh read. change's own compares guard keys outside the
// prefix (names, the id counter) and a deletion, which the prefix
// compare cannot see.
func (s *Store) mutate(ctx context.Context, change func(set *Set) ([]clientv3.Cmp, []clientv3.Op, error)) error {
	for range maxAttempts {
		set, err := s.List(ctx)
		if err != nil {
			return err
		}
		cmps, ops, err := change(set)
		if err != nil {
			return err
		}
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(s.keys.Aggregates()), "<", set.rev+1).WithPrefix())
		resp, err := s.cli.Txn(ctx).If(cmps...).Then(ops...).Commit()
		if err != nil {
			return fmt.Errorf("write aggregates: %w", err)
		}
		if resp.Succeeded {
			return nil
		}
	}
	return ErrContention
}

// unchanged compares aggregate uuid as read: the prefix compare of mutate
// sees changes and creations, not a deletion.
func (s *Store) unchanged(set *Set, uuid string) clientv3.Cmp {
	return clientv3.Compare(clientv3.ModRevision(s.keys.Aggregate(uuid)), "=", set.mods[uuid])
}

// editableCopy returns a copy of a whose hosts and metadata can change
// without touching a, which the set shares.
func editableCopy(a *etcdschema.Aggregate) *etcdschema.Aggregate {
	next := *a
	next.Hosts = slices.Clone(a.Hosts)
	next.Metadata = make(map[string]string, len(a.Metadata))
	for k, v := range a.Metadata {
		next.Metadata[k] = v
	}
	return &next
}
