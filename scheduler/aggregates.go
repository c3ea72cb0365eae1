package scheduler

import (
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/informer"
)

// aggregateCache is the host manager's copy of every host aggregate, kept
// current by a watch on the aggregates prefix, as Nova's HostManager keeps
// aggregates current from update_aggregates casts. Aggregates are few and
// change rarely, so every change builds a new snapshot, and a request
// takes the current one under the lock once and reads it without.
type aggregateCache struct {
	mu     sync.RWMutex
	byUUID map[string]*etcdschema.Aggregate
	snap   *aggregateSnapshot
}

// aggregateSnapshot is every aggregate at one point, never modified.
type aggregateSnapshot struct {
	// all is every aggregate, in uuid order.
	all []*etcdschema.Aggregate
	// byHost lists each host's aggregates, in uuid order.
	byHost map[string][]*etcdschema.Aggregate
}

func (c *aggregateCache) reset(aggs map[string]*etcdschema.Aggregate) {
	if aggs == nil {
		aggs = map[string]*etcdschema.Aggregate{}
	}
	snap := &aggregateSnapshot{byHost: map[string][]*etcdschema.Aggregate{}}
	for _, u := range sortedKeys(aggs) {
		a := aggs[u]
		snap.all = append(snap.all, a)
		for _, h := range a.Hosts {
			snap.byHost[h] = append(snap.byHost[h], a)
		}
	}
	c.byUUID, c.snap = aggs, snap
}

// aggregates returns the current snapshot (shared, read-only).
func (hm *HostManager) aggregates() *aggregateSnapshot {
	hm.aggs.mu.RLock()
	defer hm.aggs.mu.RUnlock()
	return hm.aggs.snap
}

// Aggregates returns every aggregate, in uuid order. The records are
// shared and must not be modified.
func (hm *HostManager) Aggregates() []*etcdschema.Aggregate { return hm.aggregates().all }

type aggregatesHandler struct{ hm *HostManager }

func (h aggregatesHandler) Reset(kvs []informer.Event, _ int64) {
	next := map[string]*etcdschema.Aggregate{}
	for _, kv := range kvs {
		if a := h.decode(kv); a != nil {
			next[a.UUID] = a
		}
	}
	c := &h.hm.aggs
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reset(next)
}

func (h aggregatesHandler) Apply(evs []informer.Event) {
	c := &h.hm.aggs
	c.mu.Lock()
	defer c.mu.Unlock()
	next := make(map[string]*etcdschema.Aggregate, len(c.byUUID)+1)
	for k, v := range c.byUUID {
		next[k] = v
	}
	for _, ev := range evs {
		uuid, ok := etcdschema.LastSegment(ev.Key, h.hm.keys.Aggregates())
		if !ok {
			continue
		}
		if ev.Deleted {
			delete(next, uuid)
			continue
		}
		if a := h.decode(ev); a != nil {
			next[uuid] = a
		}
	}
	c.reset(next)
}

func (h aggregatesHandler) decode(ev informer.Event) *etcdschema.Aggregate {
	if _, ok := etcdschema.LastSegment(ev.Key, h.hm.keys.Aggregates()); !ok {
		return nil
	}
	var a etcdschema.Aggregate
	if err := etcdschema.Decode(ev.Key, ev.Value, &a); err != nil {
		h.hm.log.Warn("ignoring unreadable aggregate", "key", ev.Key, "error", err)
		return nil
	}
	return &a
}

// aggregateValues is Nova's aggregate_values_from_key: the set of values
// key has in the host's aggregates.
func aggregateValues(h *HostState, key string) []string {
	var out []string
	for _, a := range h.Aggregates {
		if v, ok := a.Metadata[key]; ok && !contains(out, v) {
			out = append(out, v)
		}
	}
	sort.Strings(out)
	return out
}

// hostAvailabilityZone is the host's AZ: the availability_zone of its
// aggregates (a host is in one AZ at most; the API enforces it), else the
// default. Several values, which only a hand-edited etcd could produce,
// are joined sorted, as Nova's availability_zones.get_host_availability_zone.
func hostAvailabilityZone(aggs []*etcdschema.Aggregate, def string) string {
	var zones []string
	for _, a := range aggs {
		if z := a.AvailabilityZone(); z != "" && !contains(zones, z) {
			zones = append(zones, z)
		}
	}
	if len(zones) == 0 {
		return def
	}
	sort.Strings(zones)
	return strings.Join(zones, ",")
}

// weightMultiplier is Nova's utils.get_weight_multiplier: the host's
// aggregates may override a weigher's multiplier with metadata
// "<name>_weight_multiplier"; when several do, the lowest wins. An
// unreadable value falls back to the configured one (Nova logs a warning).
func weightMultiplier(h *HostState, key string, def float64) float64 {
	found := false
	lowest := 0.0
	for _, a := range h.Aggregates {
		v, ok := a.Metadata[key]
		if !ok {
			continue
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil {
			return def
		}
		if !found || f < lowest {
			lowest, found = f, true
		}
	}
	if !found {
		return def
	}
	return lowest
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
