package placement

// VisitCapacity calls visit for every class of every provider in the
// index: the root of its tree, its capacity ((total - reserved) ×
// allocation_ratio) and usage. It runs under the index's read lock, for
// a metrics scrape (berth_resource_*): visit must be quick and must not
// call back into the service.
func (s *Service) VisitCapacity(visit func(root, rc string, capacity, used int64)) {
	s.idx.mu.RLock()
	defer s.idx.mu.RUnlock()
	for _, e := range s.idx.st.slots {
		if e == nil {
			continue
		}
		for rc, inv := range e.p.Inventories {
			visit(e.p.RootProviderUUID, rc, inv.Capacity(), e.p.Usages[rc])
		}
	}
}

// ProviderCount is how many resource providers the index holds: the
// scheduler's empty-Placement fallback applies only when there are none.
func (s *Service) ProviderCount() int {
	s.idx.mu.RLock()
	defer s.idx.mu.RUnlock()
	return len(s.idx.st.providers)
}
