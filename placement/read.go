package placement

import (
	"context"
	"sort"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
)

// The read API of the index, for the HTTP layer and any other reader that
// must not touch the index's lock or maps. Each read first catches the
// index up with etcd (syncIndex), so it sees every write that finished
// before the call, then answers from the index under its read lock.

// ProviderConsumer is one consumer's allocations on one provider.
type ProviderConsumer struct {
	// Resources is shared with the index: do not mutate.
	Resources map[string]int64
	// Generation is the consumer's generation.
	Generation int64
}

// ProviderAllocations returns the consumers with allocations on the
// provider uuid, by consumer uuid.
func (s *Service) ProviderAllocations(ctx context.Context, uuid string) (map[string]ProviderConsumer, error) {
	if err := s.WaitConsumers(ctx); err != nil {
		return nil, err
	}
	if err := s.syncIndex(ctx); err != nil {
		return nil, err
	}
	out := map[string]ProviderConsumer{}
	s.idx.mu.RLock()
	defer s.idx.mu.RUnlock()
	cs := s.idx.st.rpConsumers[uuid]
	if cs == nil {
		return out, nil
	}
	for cu := range cs.all {
		ce := s.idx.st.consumers[cu]
		out[cu] = ProviderConsumer{Resources: ce.c.Allocations[uuid].Resources, Generation: ce.c.Generation}
	}
	return out, nil
}

// ProviderGenerations reads the providers' generations from etcd (in as
// few transactions as etcd allows); a provider that does not exist, or
// whose record does not decode, is left out.
func (s *Service) ProviderGenerations(ctx context.Context, uuids []string) (map[string]int64, error) {
	ops := make([]clientv3.Op, 0, len(uuids))
	for _, rp := range uuids {
		ops = append(ops, clientv3.OpGet(s.keys.Provider(rp)))
	}
	resps, err := s.readMany(ctx, ops)
	if err != nil {
		return nil, err
	}
	out := make(map[string]int64, len(uuids))
	for i, rp := range uuids {
		if kvs := resps[i].GetResponseRange().Kvs; len(kvs) > 0 {
			p := &etcdschema.Provider{}
			if err := etcdschema.Decode(string(kvs[0].Key), kvs[0].Value, p); err == nil {
				out[rp] = p.Generation
			}
		}
	}
	return out, nil
}

// ProviderQuery selects providers for ListProviders: GET
// /resource_providers' filters. An empty string filters nothing.
type ProviderQuery struct {
	Name string
	// UUID and InTree are canonical uuids; InTree selects the providers
	// in the same tree as that provider (none if it does not exist).
	UUID, InTree string
	// Group's resources must fit a provider's free capacity; its traits
	// and aggregates filter as in a candidate search.
	Group RequestGroup
}

// ListProviders returns the providers that match q, oldest first, as
// Placement lists them (by id). A provider's creation order is the
// revision that created its key, which etcd keeps for every key, those
// written by older versions too; one the index has not learnt it of yet
// (first indexed from this service's own claim, until the watch brings
// its record) sorts after the others, by creation time, then uuid.
func (s *Service) ListProviders(ctx context.Context, q ProviderQuery) ([]*etcdschema.Provider, error) {
	if err := s.syncIndex(ctx); err != nil {
		return nil, err
	}
	var found []*rpEntry
	s.idx.mu.RLock()
	st := s.idx.st
	gc, ok := st.buildGroup(q.Group)
	treeRoot := ""
	if q.InTree != "" {
		if e, has := st.providers[q.InTree]; has {
			treeRoot = e.p.RootProviderUUID
		} else {
			ok = false
		}
	}
	if ok {
		for _, e := range st.slots {
			if e == nil {
				continue
			}
			if (q.Name != "" && e.p.Name != q.Name) || (q.UUID != "" && e.p.UUID != q.UUID) ||
				(treeRoot != "" && e.p.RootProviderUUID != treeRoot) {
				continue
			}
			if !st.traitsOK(gc, e.slot) || (gc.hasMemberOf && !gc.inAggs.has(e.slot)) || gc.badAggs.has(e.slot) {
				continue
			}
			fit := true
			for i, rc := range gc.rcs {
				if !st.cols[rc].fits(e.slot, gc.amounts[i]) {
					fit = false
				}
			}
			if fit {
				found = append(found, e)
			}
		}
	}
	type listed struct {
		p         *etcdschema.Provider
		createRev int64
	}
	out := make([]listed, len(found))
	for i, e := range found {
		out[i] = listed{e.p, e.createRev}
	}
	s.idx.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		switch {
		case a.createRev != b.createRev && a.createRev != 0 && b.createRev != 0:
			return a.createRev < b.createRev
		case (a.createRev == 0) != (b.createRev == 0):
			return a.createRev != 0
		case !a.p.CreatedAt.Equal(b.p.CreatedAt):
			return a.p.CreatedAt.Before(b.p.CreatedAt)
		}
		return a.p.UUID < b.p.UUID
	})
	providers := make([]*etcdschema.Provider, len(out))
	for i, l := range out {
		providers[i] = l.p
	}
	return providers, nil
}

// ConsumerType is a consumer's type as Placement reports it: "unknown"
// when none was given.
func ConsumerType(rec *etcdschema.Consumer) string {
	if rec.ConsumerType == "" {
		return "unknown"
	}
	return rec.ConsumerType
}

// UsageQuery selects the consumers whose allocations Usages sums: GET
// /usages' parameters.
type UsageQuery struct {
	ProjectID string
	UserID    string // "": any user
	// ConsumerType "" groups the usages by consumer type, "all" sums them
	// in one group named "all", and any other value (including
	// "unknown") keeps only that type's consumers.
	ConsumerType string
}

// TypeUsage is the usages of one group of consumers (see UsageQuery).
type TypeUsage struct {
	Consumers int64
	Resources map[string]int64
}

// Usages sums the allocations of the consumers q selects, by group.
func (s *Service) Usages(ctx context.Context, q UsageQuery) (map[string]*TypeUsage, error) {
	if err := s.WaitConsumers(ctx); err != nil {
		return nil, err
	}
	if err := s.syncIndex(ctx); err != nil {
		return nil, err
	}
	out := map[string]*TypeUsage{}
	s.idx.mu.RLock()
	defer s.idx.mu.RUnlock()
	for _, ce := range s.idx.st.consumers {
		rec := ce.c
		if rec.ProjectID != q.ProjectID || (q.UserID != "" && rec.UserID != q.UserID) {
			continue
		}
		ct := ConsumerType(rec)
		key := ct
		switch q.ConsumerType {
		case "":
		case "all":
			key = "all"
		case "unknown":
			if ct != "unknown" {
				continue
			}
		default:
			if ct != q.ConsumerType {
				continue
			}
		}
		u := out[key]
		if u == nil {
			u = &TypeUsage{Resources: map[string]int64{}}
			out[key] = u
		}
		u.Consumers++
		for _, a := range rec.Allocations {
			for rc, n := range a.Resources {
				u.Resources[rc] += n
			}
		}
	}
	return out, nil
}

// TraitsInUse says which of names some provider has.
func (s *Service) TraitsInUse(ctx context.Context, names []string) (map[string]bool, error) {
	if err := s.syncIndex(ctx); err != nil {
		return nil, err
	}
	out := make(map[string]bool, len(names))
	s.idx.mu.RLock()
	defer s.idx.mu.RUnlock()
	for _, t := range names {
		id, ok := s.idx.st.traitIDs[t]
		out[t] = ok && s.idx.st.traitBits[id].count() > 0
	}
	return out, nil
}

// ClassInUse says whether some provider has inventory of class rc.
func (s *Service) ClassInUse(ctx context.Context, rc string) (bool, error) {
	if err := s.syncIndex(ctx); err != nil {
		return false, err
	}
	s.idx.mu.RLock()
	defer s.idx.mu.RUnlock()
	if id, ok := s.idx.st.classIDs[rc]; ok {
		for _, capy := range s.idx.st.cols[id].capacity {
			if capy >= 0 {
				return true, nil
			}
		}
	}
	return false, nil
}

// SyncIndex makes the index at least as new as etcd is now, so that a
// search that follows (AllocationCandidates) sees every write that
// finished before the call.
func (s *Service) SyncIndex(ctx context.Context) error { return s.syncIndex(ctx) }
