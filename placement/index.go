package placement

import (
	"bytes"
	"fmt"
	"maps"
	"math/bits"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
)

// TraitSharesViaAggregate marks a provider whose inventory is shared with
// every tree in its aggregates (os-traits MISC_SHARES_VIA_AGGREGATE).
const TraitSharesViaAggregate = "MISC_SHARES_VIA_AGGREGATE"

// index is the in-memory, watch-fed copy of every provider and consumer.
// Candidate searches read it under the read lock; the watch goroutine is
// the only writer apart from a full re-list, which swaps the whole state,
// and this service's own committed claims (assume.go).
type index struct {
	mu sync.RWMutex
	st *indexState
	// assumed holds this service's committed writes applied ahead of the
	// watch, until the watch passes their revision (assume.go).
	assumed map[recordKey]assumedWrite
	// lastConsumer is the consumer record the watch decoded last: the
	// next one shares its project and user strings when they are equal.
	lastConsumer *etcdschema.Consumer
	// prefixes are the record prefixes applyEvents matches keys with,
	// built once rather than per watch response.
	prefixes atomic.Pointer[eventPrefixes]
}

// eventPrefixes are the provider and consumer prefixes of keys.
type eventPrefixes struct {
	keys                 etcdschema.Keys
	providers, consumers string
}

func newIndex() *index {
	return &index{st: newIndexState()}
}

// revision is the etcd revision the index has applied (loaded or
// followed to).
func (ix *index) revision() int64 {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.st.rev
}

func (ix *index) install(st *indexState) {
	ix.mu.Lock()
	ix.reassumeLocked(st)
	ix.st = st
	ix.mu.Unlock()
}

func (ix *index) applyEvents(evs []*clientv3.Event, rev int64, keys etcdschema.Keys, log hclog.Logger) {
	// Decoding is most of the work, and needs no index state: it is done
	// before the write lock, so candidate searches and claims planned from
	// the index wait only for the map updates, not for the JSON.
	//
	// Every scheduler follows every claim's two puts: nothing is made of
	// an event's key but what the index keeps. A key is matched and its
	// uuid looked up in the bytes the event carries; a provider the index
	// has keeps its indexed uuid string, and a new consumer's uuid string
	// is made once, for the index and the record both. The key's string
	// is made only for an error message.
	type change struct {
		ev  *clientv3.Event
		seg []byte    // the key's last segment (nil: the key has more)
		key recordKey // set in the look below; a put is indexed by its record's uuid
		// provider or consumer is a put's record; neither: a delete.
		provider *etcdschema.Provider
		consumer *etcdschema.Consumer
		// prev is the indexed provider a provider put replaces (nil: none).
		prev   *etcdschema.Provider
		modRev int64
		skip   bool
	}
	changes := make([]change, 0, len(evs))
	pre := ix.prefixes.Load()
	if pre == nil || pre.keys != keys {
		pre = &eventPrefixes{keys: keys, providers: keys.Providers(), consumers: keys.Consumers()}
		ix.prefixes.Store(pre)
	}
	providers, consumers := pre.providers, pre.consumers
	for _, ev := range evs {
		key := ev.Kv.Key
		isProvider := hasPrefix(key, providers)
		prefix := providers
		if !isProvider {
			if !hasPrefix(key, consumers) {
				continue
			}
			prefix = consumers
		}
		seg := key[len(prefix):]
		if len(seg) == 0 || bytes.IndexByte(seg, '/') >= 0 {
			if eventIsDelete(ev.Type) {
				continue
			}
			seg = nil // as LastSegment: indexed by its record's uuid alone
		}
		// A delete event's ModRevision is the delete's revision.
		changes = append(changes, change{ev: ev, seg: seg, key: recordKey{provider: isProvider}, modRev: ev.Kv.ModRevision})
	}
	var like *etcdschema.Consumer
	ix.lookUpLocked(func() {
		like = ix.lastConsumer
		for i := range changes {
			ch := &changes[i]
			if ch.seg == nil {
				continue
			}
			// The uuid's string: the indexed one, or made here (a lookup
			// by string(bytes) makes none).
			if ch.key.provider {
				if e, ok := ix.st.providers[string(ch.seg)]; ok {
					ch.key.uuid = e.p.UUID
				}
			} else if e, ok := ix.st.consumers[string(ch.seg)]; ok {
				ch.key.uuid = e.c.UUID
			}
			if ch.key.uuid == "" {
				ch.key.uuid = string(ch.seg)
			}
			// This service's own claims are in the index already
			// (assume.go): their events, and any older ones, are not even
			// decoded.
			if ch.skip = ix.knownRevLocked(ix.st, ch.key) >= ch.modRev; ch.skip {
				continue
			}
			// Decoding shares the unchanged parts of the record a provider
			// put replaces (records are never mutated once indexed), and a
			// claim changes only a provider's usages and generation.
			if ch.key.provider && !eventIsDelete(ch.ev.Type) {
				if e, ok := ix.st.providers[ch.key.uuid]; ok {
					ch.prev = e.p
				}
			}
		}
	})
	var rpBuf [8]string
	for i := range changes {
		ch := &changes[i]
		if ch.skip || eventIsDelete(ch.ev.Type) {
			continue
		}
		// A claim writes its consumer, then the providers it allocates
		// on (planClaimWith), in one transaction whose events come in
		// that order: the consumer's allocations share those providers'
		// uuid strings.
		rps := rpBuf[:0]
		for j := i + 1; !ch.key.provider && j < len(changes) && changes[j].key.provider && len(rps) < len(rpBuf); j++ {
			if changes[j].key.uuid != "" {
				rps = append(rps, changes[j].key.uuid)
			}
		}
		var err error
		if ch.key.provider {
			ch.provider, err = decodeProviderEvent(ch.ev.Kv.Key, ch.ev.Kv.Value, ch.prev)
		} else {
			ch.consumer, err = etcdschema.DecodeConsumerKey(ch.ev.Kv.Key, ch.ev.Kv.Value, ch.key.uuid, like, rps)
		}
		if err != nil {
			log.Error("skipping unreadable placement record", "key", string(ch.ev.Kv.Key), "error", err)
			ch.provider, ch.consumer = nil, nil
			ch.skip = true
			continue
		}
		if ch.key.provider {
			ch.key.uuid = ch.provider.UUID
		} else {
			ch.key.uuid = ch.consumer.UUID
			like = ch.consumer
		}
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if like != nil {
		ix.lastConsumer = like
	}
	st := ix.st
	for _, ch := range changes {
		// Checked again: a claim may have been assumed since the look
		// above. An index that knows a newer state of the key keeps it,
		// and learns its creation order if an assumed claim indexed it.
		if ch.skip || ix.knownRevLocked(st, ch.key) >= ch.modRev {
			if ch.key.provider && !eventIsDelete(ch.ev.Type) {
				st.noteCreated(ch.key.uuid, ch.ev.Kv.CreateRevision)
			}
			continue
		}
		switch {
		case ch.provider != nil:
			st.putProvider(ch.provider, ch.modRev)
			st.noteCreated(ch.provider.UUID, ch.ev.Kv.CreateRevision)
		case ch.consumer != nil:
			st.putConsumer(ch.consumer, ch.modRev)
		case ch.key.provider:
			st.removeProvider(ch.key.uuid)
		default:
			st.removeConsumer(ch.key.uuid, ch.modRev)
		}
	}
	if rev > st.rev {
		st.rev = rev
		ix.confirmLocked(rev)
	}
}

// lookUpLocked runs f under the read lock: the short look at the index
// before decoding.
func (ix *index) lookUpLocked(f func()) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	f()
}

// bitset is a dense set of provider slots.
type bitset []uint64

func (b bitset) has(i int32) bool {
	w := int(i >> 6)
	return w < len(b) && b[w]&(1<<(uint(i)&63)) != 0
}

func (b *bitset) set(i int32) {
	w := int(i >> 6)
	for len(*b) <= w {
		*b = append(*b, 0)
	}
	(*b)[w] |= 1 << (uint(i) & 63)
}

func (b bitset) clear(i int32) {
	w := int(i >> 6)
	if w < len(b) {
		b[w] &^= 1 << (uint(i) & 63)
	}
}

func (b bitset) count() int {
	n := 0
	for _, w := range b {
		n += bits.OnesCount64(w)
	}
	return n
}

// classCol holds one resource class for every provider slot, in compact
// arrays so the candidate loop touches a few cache lines per provider.
// capacity < 0 means the slot has no inventory of the class.
type classCol struct {
	capacity []int64
	used     []int64
	minUnit  []int64
	maxUnit  []int64
	step     []int64
}

func (c *classCol) grow(n int) {
	for len(c.capacity) < n {
		c.capacity = append(c.capacity, -1)
		c.used = append(c.used, 0)
		c.minUnit = append(c.minUnit, 0)
		c.maxUnit = append(c.maxUnit, 0)
		c.step = append(c.step, 0)
	}
}

// fits is Placement's per-provider condition for amount a.
func (c *classCol) fits(slot int32, a int64) bool {
	capy := c.capacity[slot]
	if capy < 0 || c.used[slot]+a > capy {
		return false
	}
	if a < c.minUnit[slot] || a > c.maxUnit[slot] {
		return false
	}
	st := c.step[slot]
	return st <= 1 || a%st == 0
}

type rpEntry struct {
	slot int32
	p    *etcdschema.Provider // never mutated once indexed
	// uuid is p.UUID, kept here: the compact candidates name every
	// candidate's root and provider, and reading the uuid from p cost a
	// cache miss per candidate (the entry's line is one the search has
	// just read). Set when the entry is made: a provider's uuid is its
	// key.
	uuid string
	// isRoot is p's RootProviderUUID == UUID and hasParent its
	// ParentProviderUUID != "", kept with p: every candidate search asks
	// them of every provider that fits, and reading them from p there
	// cost a cache miss or two (p, the uuids' bytes) per provider.
	isRoot, hasParent bool
	modRev            int64
	// createRev is the revision that created the provider's key: its
	// creation order, Placement's provider id order (0: not known yet,
	// for a provider first indexed from this service's own claim).
	createRev int64
	traits    []int32
	aggs      []int32
	// summary is p's ProviderSummary, rendered once per provider record
	// and shared by every answer that names it until p is replaced (a
	// claim on another provider leaves this one's summary valid). Render
	// runs under the read lock, so concurrent searches may both store it.
	summary atomic.Pointer[ProviderSummary]
}

// consumerEntry is held by value in the consumers map: every claim adds
// one to every scheduler's index, and a million of them are loaded at a
// cold start; a pointer to each was an allocation apiece.
type consumerEntry struct {
	c      *etcdschema.Consumer
	modRev int64
}

// indexState is everything the index knows at one revision.
type indexState struct {
	rev       int64
	providers map[string]*rpEntry
	slots     []*rpEntry
	free      []int32

	classIDs map[string]int32
	cols     []*classCol
	// classNamesByID is classIDs inverted (classNames), appended to as
	// classes are made: every answer names its classes, and inverting
	// the map per answer was an allocation and a map walk apiece.
	classNamesByID []string

	traitIDs  map[string]int32
	traitBits []bitset
	aggIDs    map[string]int32
	aggBits   []bitset

	// trees maps a root uuid to the slots in its tree.
	trees map[string]treeSet
	// children maps a parent uuid to its direct children's uuids.
	children map[string]map[string]struct{}
	sharing  bitset

	consumers   map[string]consumerEntry
	rpConsumers map[string]*consumerSet

	// indexSlots is, in a search's view (candidate_view.go), each slot's
	// slot in the index it was copied from: the one Candidate.RootSlot
	// names. nil in the index itself.
	indexSlots []int32

	// pending is set while the consumers are still being listed into
	// this state, after it was installed (consumers_deferred.go); nil
	// once they are all in, and in a state loaded whole.
	pending *pendingConsumers

	// slotsHint is how many slots a load expects (reserve): a class
	// column made meanwhile is made for them.
	slotsHint int
}

// reserve sizes st, fresh, for n providers: a load counts them first, so
// the maps and columns it fills are made once instead of regrown through
// every doubling (100,000 providers' columns and maps were ~60 MB of
// garbage of a scheduler's cold start).
func (st *indexState) reserve(n int) {
	st.providers = make(map[string]*rpEntry, n)
	st.trees = make(map[string]treeSet, n)
	st.slots = make([]*rpEntry, 0, n)
	st.slotsHint = n
}

// reserve makes c's columns for n slots.
func (c *classCol) reserve(n int) {
	c.capacity = make([]int64, 0, n)
	c.used = make([]int64, 0, n)
	c.minUnit = make([]int64, 0, n)
	c.maxUnit = make([]int64, 0, n)
	c.step = make([]int64, 0, n)
}

// indexSlot is slot's number in the index: itself, or in a view the
// index slot its provider was copied from.
func (st *indexState) indexSlot(slot int32) int32 {
	if st.indexSlots != nil {
		return st.indexSlots[slot]
	}
	return slot
}

func newIndexState() *indexState {
	return &indexState{
		providers:   map[string]*rpEntry{},
		classIDs:    map[string]int32{},
		traitIDs:    map[string]int32{},
		aggIDs:      map[string]int32{},
		trees:       map[string]treeSet{},
		children:    map[string]map[string]struct{}{},
		consumers:   map[string]consumerEntry{},
		rpConsumers: map[string]*consumerSet{},
	}
}

func (st *indexState) classID(rc string, create bool) (int32, bool) {
	if id, ok := st.classIDs[rc]; ok {
		return id, true
	}
	if !create {
		return -1, false
	}
	id := int32(len(st.cols))
	st.classIDs[rc] = id
	st.classNamesByID = append(st.classNamesByID, rc)
	c := &classCol{}
	c.reserve(max(st.slotsHint, len(st.slots)))
	c.grow(len(st.slots))
	st.cols = append(st.cols, c)
	return id, true
}

func (st *indexState) traitID(t string, create bool) (int32, bool) {
	if id, ok := st.traitIDs[t]; ok {
		return id, true
	}
	if !create {
		return -1, false
	}
	id := int32(len(st.traitBits))
	st.traitIDs[t] = id
	st.traitBits = append(st.traitBits, nil)
	return id, true
}

func (st *indexState) aggID(a string, create bool) (int32, bool) {
	if id, ok := st.aggIDs[a]; ok {
		return id, true
	}
	if !create {
		return -1, false
	}
	id := int32(len(st.aggBits))
	st.aggIDs[a] = id
	st.aggBits = append(st.aggBits, nil)
	return id, true
}

// decodeProvider reads a provider record; it touches no index state, so
// a load runs it on several goroutines (informer.List). Its inventories
// map is every equal provider's (etcdschema.DecodeProviderAfter): an
// indexed record's maps are read-only, and a write changes a Clone.
func decodeProvider(key string, val []byte) (any, error) {
	return decodeProviderAfter(key, val, nil)
}

// decodeProviderAfter is decodeProvider sharing the unchanged parts of
// prev, the record it replaces (nil: none).
func decodeProviderAfter(key string, val []byte, prev *etcdschema.Provider) (any, error) {
	p, err := etcdschema.DecodeProviderAfter(key, val, prev)
	if err != nil {
		return nil, err
	}
	if !completeProvider(p) {
		return nil, fmt.Errorf("provider at %s has no uuid", key)
	}
	return p, nil
}

// completeProvider fills a decoded provider's root (a root provider's own
// uuid when the record leaves it out) and says whether it is usable: a
// record without a uuid is not.
func completeProvider(p *etcdschema.Provider) bool {
	if p.UUID == "" {
		return false
	}
	if p.RootProviderUUID == "" {
		p.RootProviderUUID = p.UUID
	}
	return true
}

// decodeProviderEvent is decodeProviderAfter for a watch event's key
// bytes (etcdschema.DecodeProviderAfterKey).
func decodeProviderEvent(key, val []byte, prev *etcdschema.Provider) (*etcdschema.Provider, error) {
	p, err := etcdschema.DecodeProviderAfterKey(key, val, prev)
	if err != nil {
		return nil, err
	}
	if !completeProvider(p) {
		return nil, fmt.Errorf("provider at %s has no uuid", key)
	}
	return p, nil
}

// hasPrefix is strings.HasPrefix for a key's bytes, without converting
// them.
func hasPrefix(key []byte, prefix string) bool {
	return len(key) >= len(prefix) && string(key[:len(prefix)]) == prefix
}

// putProvider indexes a decoded provider record.
func (st *indexState) putProvider(p *etcdschema.Provider, modRev int64) {
	e, ok := st.providers[p.UUID]
	if ok && sameLinks(e.p, p) {
		// Only usages (with generation and timestamps) moved: a claim's
		// write, which every scheduler follows for every server. The
		// slot's classes, traits, aggregates and tree stay as linked;
		// unlinking and relinking them recreated a singleton tree's map.
		for rc := range p.Inventories {
			st.cols[st.classIDs[rc]].used[e.slot] = p.Usages[rc]
		}
		e.p = p // sameLinks: the same root and parent, so isRoot and hasParent stand
		e.modRev = modRev
		e.summary.Store(nil)
		return
	}
	if ok {
		st.unlink(e)
	} else {
		e = &rpEntry{uuid: p.UUID}
		if n := len(st.free); n > 0 {
			e.slot = st.free[n-1]
			st.free = st.free[:n-1]
			st.slots[e.slot] = e
		} else {
			e.slot = int32(len(st.slots))
			st.slots = append(st.slots, e)
			for _, c := range st.cols {
				c.grow(len(st.slots))
			}
		}
		st.providers[p.UUID] = e
	}
	e.p = p
	e.isRoot, e.hasParent = p.RootProviderUUID == p.UUID, p.ParentProviderUUID != ""
	e.modRev = modRev
	e.summary.Store(nil)
	st.link(e)
}

// noteCreated records the revision that created provider uuid's key,
// when the index does not know it yet.
func (st *indexState) noteCreated(uuid string, createRev int64) {
	if e, ok := st.providers[uuid]; ok && e.createRev == 0 {
		e.createRev = createRev
	}
}

func (st *indexState) removeProvider(uuid string) {
	e, ok := st.providers[uuid]
	if !ok {
		return
	}
	st.unlink(e)
	delete(st.providers, uuid)
	st.slots[e.slot] = nil
	st.free = append(st.free, e.slot)
}

// link records e's classes, traits, aggregates and tree position.
func (st *indexState) link(e *rpEntry) {
	p := e.p
	for rc, inv := range p.Inventories {
		id, _ := st.classID(rc, true)
		c := st.cols[id]
		c.capacity[e.slot] = inv.Capacity()
		c.used[e.slot] = p.Usages[rc]
		c.minUnit[e.slot] = inv.MinUnit
		c.maxUnit[e.slot] = inv.MaxUnit
		c.step[e.slot] = inv.StepSize
	}
	e.traits = e.traits[:0]
	for _, t := range p.Traits {
		id, _ := st.traitID(t, true)
		st.traitBits[id].set(e.slot)
		e.traits = append(e.traits, id)
		if t == TraitSharesViaAggregate {
			st.sharing.set(e.slot)
		}
	}
	e.aggs = e.aggs[:0]
	for _, a := range p.Aggregates {
		id, _ := st.aggID(a, true)
		st.aggBits[id].set(e.slot)
		e.aggs = append(e.aggs, id)
	}
	if tree, ok := st.trees[p.RootProviderUUID]; ok {
		st.trees[p.RootProviderUUID] = tree.with(e.slot)
	} else {
		st.trees[p.RootProviderUUID] = singleTree(e.slot)
	}
	if p.ParentProviderUUID != "" {
		ch := st.children[p.ParentProviderUUID]
		if ch == nil {
			ch = map[string]struct{}{}
			st.children[p.ParentProviderUUID] = ch
		}
		ch[p.UUID] = struct{}{}
	}
}

// sameLinks says whether next leaves everything link records of prev as
// it is: tree position, inventories (hence classes and their limits),
// traits and aggregates. Usages may differ (putProvider writes them).
func sameLinks(prev, next *etcdschema.Provider) bool {
	return prev.RootProviderUUID == next.RootProviderUUID && prev.ParentProviderUUID == next.ParentProviderUUID &&
		maps.Equal(prev.Inventories, next.Inventories) && slices.Equal(prev.Traits, next.Traits) &&
		slices.Equal(prev.Aggregates, next.Aggregates)
}

// unlink undoes link before e is replaced or removed.
func (st *indexState) unlink(e *rpEntry) {
	p := e.p
	for rc := range p.Inventories {
		if id, ok := st.classID(rc, false); ok {
			st.cols[id].capacity[e.slot] = -1
			st.cols[id].used[e.slot] = 0
		}
	}
	for _, id := range e.traits {
		st.traitBits[id].clear(e.slot)
	}
	st.sharing.clear(e.slot)
	for _, id := range e.aggs {
		st.aggBits[id].clear(e.slot)
	}
	if tree, ok := st.trees[p.RootProviderUUID]; ok {
		if rest, empty := tree.without(e.slot); empty {
			delete(st.trees, p.RootProviderUUID)
		} else {
			st.trees[p.RootProviderUUID] = rest
		}
	}
	if p.ParentProviderUUID != "" {
		if ch := st.children[p.ParentProviderUUID]; ch != nil {
			delete(ch, p.UUID)
			if len(ch) == 0 {
				delete(st.children, p.ParentProviderUUID)
			}
		}
	}
}

// decodeConsumer reads a consumer record (like decodeProvider, without
// index state).
func decodeConsumer(key string, val []byte) (any, error) {
	c := &etcdschema.Consumer{}
	if err := etcdschema.Decode(key, val, c); err != nil {
		return nil, err
	}
	return c, nil
}

// putConsumer indexes a decoded consumer record.
func (st *indexState) putConsumer(c *etcdschema.Consumer, modRev int64) {
	if old, ok := st.consumers[c.UUID]; ok {
		st.unlinkConsumer(old.c)
	}
	st.consumers[c.UUID] = consumerEntry{c: c, modRev: modRev}
	st.linkConsumer(c)
}

// linkConsumer records c under each provider it allocates from.
func (st *indexState) linkConsumer(c *etcdschema.Consumer) {
	for rp := range c.Allocations {
		cs := st.rpConsumers[rp]
		if cs == nil {
			cs = &consumerSet{}
			st.rpConsumers[rp] = cs
		}
		cs.add(c.UUID)
	}
}

// removeConsumer unindexes a consumer deleted at revision rev.
func (st *indexState) removeConsumer(uuid string, rev int64) {
	if st.pending != nil {
		st.pending.deleted(uuid, rev)
	}
	if old, ok := st.consumers[uuid]; ok {
		st.unlinkConsumer(old.c)
		delete(st.consumers, uuid)
	}
}

func (st *indexState) unlinkConsumer(c *etcdschema.Consumer) {
	for rp := range c.Allocations {
		if cs := st.rpConsumers[rp]; cs != nil {
			cs.remove(c.UUID)
			if cs.len() == 0 {
				delete(st.rpConsumers, rp)
			}
		}
	}
}

// hasTrait reports whether the provider in slot has trait t.
func (st *indexState) hasTrait(slot int32, t string) bool {
	id, ok := st.traitIDs[t]
	return ok && st.traitBits[id].has(slot)
}

// treeSlots returns the slots of a tree in slot order, so answers are
// deterministic.
func (st *indexState) treeSlots(root string) []int32 {
	t, ok := st.trees[root]
	if !ok {
		return make([]int32, 0)
	}
	out := make([]int32, 0, t.len())
	for s := range t.all() {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// allSingletons says whether no tree has more than one provider, which
// lets the candidate search take its fast path.
func (st *indexState) allSingletons() bool {
	return len(st.trees) == len(st.providers)
}
