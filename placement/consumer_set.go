package placement

import "slices"

// consumerSet is the consumers with allocations on one provider
// (indexState.rpConsumers). A host's provider has tens of consumers, a
// shared pool's may have thousands: the set is a slice while it is small
// and a map once it is not. A cold start at 100,000 hosts links a million
// consumers: as a map per provider (a swiss table once past 8 entries,
// grown from a small map) the links allocated 67 MB and took 0.53 s of
// the child's 10.4 s profiled (BenchmarkColdStart100k/process); a list
// of ten uuids is 160 bytes. BenchmarkLinkConsumers: 55 -> 33 bytes kept
// a consumer, 79 -> 50 allocated.
type consumerSet struct {
	// list holds the uuids while there are at most consumerSetListMax,
	// in no particular order; nil once set holds them.
	list []string
	set  map[string]struct{}
}

// consumerSetListMax is the most uuids a set keeps in its list: a
// removal scans the list, which at this length costs less than a map's
// hashing, and a host's provider stays under it.
const consumerSetListMax = 64

// consumerSetFirstCap is the capacity of a set's first list.
const consumerSetFirstCap = 8

// len is how many uuids s holds.
func (s *consumerSet) len() int {
	if s.set != nil {
		return len(s.set)
	}
	return len(s.list)
}

// has says whether uuid is in s.
func (s *consumerSet) has(uuid string) bool {
	if s.set != nil {
		_, ok := s.set[uuid]
		return ok
	}
	return slices.Contains(s.list, uuid)
}

// add adds uuid, which is not in s: the index links a consumer only
// while it is unlinked (putConsumer unlinks the record it replaces
// first), so add does not scan the list for it.
func (s *consumerSet) add(uuid string) {
	if s.set != nil {
		s.set[uuid] = struct{}{}
		return
	}
	if len(s.list) < consumerSetListMax {
		if s.list == nil {
			// A small map's size: append's 1, 2, 4 would leave three
			// arrays to the GC for a host's provider.
			s.list = make([]string, 0, consumerSetFirstCap)
		}
		s.list = append(s.list, uuid)
		return
	}
	s.set = make(map[string]struct{}, 2*consumerSetListMax)
	for _, u := range s.list {
		s.set[u] = struct{}{}
	}
	s.set[uuid] = struct{}{}
	s.list = nil
}

// remove removes uuid if present.
func (s *consumerSet) remove(uuid string) {
	if s.set != nil {
		delete(s.set, uuid)
		return
	}
	if i := slices.Index(s.list, uuid); i >= 0 {
		last := len(s.list) - 1
		s.list[i] = s.list[last]
		s.list[last] = ""
		s.list = s.list[:last]
	}
}

// all yields the uuids, in no particular order.
func (s *consumerSet) all(yield func(string) bool) {
	if s.set != nil {
		for u := range s.set {
			if !yield(u) {
				return
			}
		}
		return
	}
	for _, u := range s.list {
		if !yield(u) {
			return
		}
	}
}
