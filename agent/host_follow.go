package agent

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/informer"
)

// hostFollow is what the agent knows of its own host's service record
// and instance info from its watch of them (Keys.HostInstancesToService,
// one watcher): the service's disabled flag and the host's instance info
// uuids. The periodic provider sync and instance sync answer from it
// instead of reading both from etcd every period, as a kubelet answers
// its periodic sync from its informer's cache: at 100,000 hosts those
// reads were ~1,770 read-only transactions a second (the provider tick's
// service get and instance range) and ~890 ranges (the instance sync's
// list), and a read-only range costs the member far more than the watch
// event that delivers a change once.
//
// The watch is the same guarantee as a read: it is listed at start and
// again after a compaction (informer), so a disabled flag flipped while
// the agent was down is in the list and reaches Placement at the first
// sync, and so is instance info another writer changed (a live
// migration's source writes the destination's, the API's local delete
// and the leader's down-host cleanup delete a host's). Until the follow
// has listed, or while it knows no service record (a fleet's shared
// watch not yet caught up with the host's registration, or the record
// deleted), the syncs read etcd as before.
//
// The host mapping is not in the host's keys, so it has a watcher of its
// own (Agent.mappingInf, on that one key; a fleet's second shared watch):
// the provider tick compared it in a read-only transaction every period,
// the one round trip left of an idle host's tick (~1,770 a second at
// 100,000 hosts, each a gRPC call on both sides and a bolt read of the
// mapping in the member). An operator's removal is still repaired at the
// next tick, now from the watch's delete. Until the mapping's watch has
// listed, the tick compares it as before. What it costs: one more
// watcher per real agent in etcd, an exact-key one (a map entry in the
// member's synced watcher group, no interval tree), for a record that
// changes once in a host's life.
type hostFollow struct {
	mu     sync.Mutex
	synced bool // listed (or fed from a watch that saw every change)
	// mappingSynced: the mapping's watch has listed (or the fleet's saw
	// every change), so mapped is the host mapping's presence.
	mappingSynced, mapped bool
	// hasSvc: a service record is known; svcErr is set when it is
	// unreadable, disabled is its flag otherwise. known: a readable
	// record was ever seen (kept across a re-list, so that a re-list
	// that finds the flag unchanged syncs nothing).
	hasSvc, known bool
	svcErr        error
	disabled      bool
	// uuids are the host's instance info uuids, sorted (as etcd lists
	// them).
	uuids []string
}

// apply notes one change of the followed keys. disabledChanged says
// whether it was a readable service record whose disabled flag differs
// from what was known (or the first one known): the agent syncs its
// provider at once then (service_watch.go). err is an unreadable
// record's.
func (f *hostFollow) apply(own ownKeys, ev informer.Event) (disabledChanged bool, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if ev.Key == own.mapping {
		f.mapped = !ev.Deleted
		return false, nil
	}
	if u, ok := strings.CutPrefix(ev.Key, own.instances); ok {
		i, found := slices.BinarySearch(f.uuids, u)
		switch {
		case ev.Deleted && found:
			f.uuids = slices.Delete(f.uuids, i, i+1)
		case !ev.Deleted && !found:
			f.uuids = slices.Insert(f.uuids, i, strings.Clone(u))
		}
		return false, nil
	}
	if ev.Key != own.service {
		return false, nil
	}
	if ev.Deleted {
		f.hasSvc, f.svcErr = false, nil
		return false, nil
	}
	var s etcdschema.Service
	if err := etcdschema.Decode(ev.Key, ev.Value, &s); err != nil {
		f.hasSvc, f.svcErr = true, err
		return false, err
	}
	changed := !f.known || s.Disabled != f.disabled
	f.hasSvc, f.known, f.svcErr, f.disabled = true, true, nil, s.Disabled
	return changed, nil
}

// reset forgets what was known of the followed keys before a list of
// them (the disabled flag last seen stays: see known).
func (f *hostFollow) reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hasSvc, f.svcErr, f.uuids = false, nil, nil
}

// setSynced marks what apply was handed as the whole of the followed
// keys (after a list, or from the start of a watch that saw every change).
func (f *hostFollow) setSynced() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.synced = true
}

// resetMapping forgets the mapping's presence before a list of it.
func (f *hostFollow) resetMapping() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mapped = false
}

// setMappingSynced marks what apply was handed of the host mapping as all
// of it (after a list of the key, or from the start of a watch that saw
// every change of it).
func (f *hostFollow) setMappingSynced() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mappingSynced = true
}

// tickReads is what a provider sync reads of the host's own keys, if the
// follow knows it (ok): the service record (its disabled flag, all a
// provider sync reads of it) and, with withUUIDs, the instance info
// uuids; and the host mapping's presence if the follow knows that too
// (mappingKnown), otherwise the caller checks it.
func (f *hostFollow) tickReads(host string, withUUIDs bool) (r tickReads, mappingKnown, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.synced || !f.hasSvc {
		return tickReads{}, false, false
	}
	mappingKnown, r.mapped = f.mappingSynced, f.mapped
	if f.svcErr != nil {
		r.svcErr = fmt.Errorf("agent %s: %w", host, f.svcErr)
	} else {
		r.svc.Disabled = f.disabled
	}
	if withUUIDs {
		r.uuids = slices.Clone(f.uuids)
		if r.uuids == nil {
			r.uuids = []string{}
		}
	}
	return r, mappingKnown, true
}

// instanceUUIDs are the host's instance info uuids, if the follow has
// listed them (ok).
func (f *hostFollow) instanceUUIDs() (uuids []string, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.synced {
		return nil, false
	}
	return slices.Clone(f.uuids), true
}
