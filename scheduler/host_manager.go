package scheduler

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/backoff"
	"github.com/berth-project/berth/internal/informer"
)

// hostRecord is what the host manager knows of one host from etcd.
type hostRecord struct {
	// name is the host's name, the hosts map's key: its instances' info
	// shares it.
	name string
	// nameHash is hostNameHash(name), the weighing's tie key input.
	nameHash uint64
	// ready is what a request's view reads of the record besides name,
	// service and instances, kept current by refreshLocked (host_view.go).
	// name, ready, service, instances and mappedCell are all a
	// request's view reads: kept together, they are a cache line or two.
	ready   readyFields
	service *etcdschema.Service
	// instances is the agent-reported instance info (seed
	// isolate-scheduler-db), replaced (never mutated) on change so request
	// views can share it without the lock.
	instances map[string]*etcdschema.InstanceInfo
	// mappedCell is the host mapping's cell, "" if none (host_cell.go).
	mappedCell string
	alive      bool
	// down is the leader's /hosts/<h>/down record being present.
	down bool
	// synced turns true once the agent's periodic uuid list (HostSync) was
	// seen: only then is the cache trusted (Nova's "updated"). An agent
	// that never writes one (an older agent) is read from etcd per request.
	synced bool
	// stale is set when a HostSync differed from the cache, until the
	// host's instance info has been re-read.
	stale bool
	// syncFlavors are the flavor ids the last HostSync gave its
	// instances (host_sync.go) while a re-read may read them: kept from a
	// sync that differed from the cache, or came while a re-read was
	// pending; empty otherwise, and for an older agent's uuid-only list.
	syncFlavors syncedFlavors
	// capacity is what the empty-Placement fallback filters on of the
	// agent's HostCapacity report (fallback.go); not reported until one.
	capacity hostCapacity
	// instRev is the revision of the last re-read of the host's instance
	// info; watch events at or below it are already in instances.
	instRev int64
	// builds are the build casts waiting for or running on the host: the
	// IoOpsWeigher's num_io_ops (Nova counts instances in building task
	// states; a Berth build is in flight exactly while its cast exists).
	builds map[string]bool
}

// HostManager keeps every host's service, liveness and instances current
// from one etcd watch over the hosts prefix, plus the host mappings.
type HostManager struct {
	cli   *clientv3.Client
	keys  etcdschema.Keys
	log   hclog.Logger
	track bool

	mu         sync.RWMutex
	hosts      map[string]*hostRecord
	byProvider map[string]*hostRecord // root provider uuid -> its host's record
	// slots remembers byProvider's answers by placement slot, for the
	// candidate join (provider_slots.go); emptied (forget) whenever an
	// answer changes.
	slots providerSlots
	cells map[string]string // host -> cell (host mappings)
	// mappingsGen counts changes to cells, under mu: a hosts list that
	// read them under the read lock knows whether to read them again.
	mappingsGen uint64

	// reread holds hosts whose HostSync differed, for the reconciler.
	reread   map[string]bool
	rereadCh chan struct{}
	// sync is where applySyncLocked decodes each HostSync, under mu (or
	// in the state a list builds): its arrays serve every sync, and a
	// host that keeps a sync's flavors keeps copies.
	sync etcdschema.HostSync

	hostsInf, mapsInf *informer.Informer
	// mapsPrefix is keys.HostMappings(), built once: every scheduler
	// follows every host's mapping as hosts register.
	mapsPrefix string

	// names holds the flavor names and ids instance info and syncs
	// repeat (shared_strings.go); the decoder shares them, on any
	// goroutine, and so does the state a list builds (ResetPaged).
	names *internTable

	// aggs is the aggregate cache (aggregates.go), fed by its own watch.
	aggs    aggregateCache
	aggsInf *informer.Informer
}

// HostManagerOption tunes a host manager.
type HostManagerOption func(*HostManager)

// WithTrackInstanceChanges is scheduler.track_instance_changes: false
// keeps no instance cache at all; every host's instances are then read
// from the cell records when a request needs them.
func WithTrackInstanceChanges(track bool) HostManagerOption {
	return func(hm *HostManager) { hm.track = track }
}

// NewHostManager builds a host manager; Run starts following etcd.
func NewHostManager(cli *clientv3.Client, keys etcdschema.Keys, log hclog.Logger, opts ...HostManagerOption) *HostManager {
	hm := &HostManager{cli: cli, keys: keys, log: log, track: true, hosts: map[string]*hostRecord{},
		byProvider: map[string]*hostRecord{}, cells: map[string]string{},
		reread: map[string]bool{}, rereadCh: make(chan struct{}, 1), mapsPrefix: keys.HostMappings(),
		names: &internTable{}}
	for _, o := range opts {
		o(hm)
	}
	hm.aggs.reset(nil)
	hm.aggsInf = informer.New(cli, keys.Aggregates(), aggregatesHandler{hm}, log)
	// Most of the events a scheduler follows (casts, instance info,
	// liveness): on a watch stream of its own (informer.OwnStream).
	hm.hostsInf = informer.New(cli, keys.HostsPrefix(), hostsHandler{hm}, log, informer.OwnStream())
	hm.mapsInf = informer.New(cli, keys.HostMappings(), mappingsHandler{hm}, log)
	return hm
}

// Run follows etcd until ctx ends.
func (hm *HostManager) Run(ctx context.Context) {
	go hm.mapsInf.Run(ctx)
	go hm.aggsInf.Run(ctx)
	go hm.reconcile(ctx)
	hm.hostsInf.Run(ctx)
}

// WaitSynced blocks until the first full load is in memory.
func (hm *HostManager) WaitSynced(ctx context.Context) error {
	if err := hm.hostsInf.WaitSynced(ctx); err != nil {
		return err
	}
	if err := hm.mapsInf.WaitSynced(ctx); err != nil {
		return err
	}
	return hm.aggsInf.WaitSynced(ctx)
}

// WaitForRevision returns once the host manager has seen every change to
// hosts, host mappings and aggregates up to etcd revision rev.
func (hm *HostManager) WaitForRevision(ctx context.Context, rev int64) error {
	if err := hm.hostsInf.WaitForRevision(ctx, rev); err != nil {
		return err
	}
	if err := hm.mapsInf.WaitForRevision(ctx, rev); err != nil {
		return err
	}
	return hm.aggsInf.WaitForRevision(ctx, rev)
}

// HostForProvider returns the host whose compute node is provider uuid.
func (hm *HostManager) HostForProvider(uuid string) (string, bool) {
	hm.mu.RLock()
	defer hm.mu.RUnlock()
	r, ok := hm.byProvider[uuid]
	if !ok {
		return "", false
	}
	return r.name, true
}

func (hm *HostManager) view(host string) (hostView, bool) {
	hm.mu.RLock()
	defer hm.mu.RUnlock()
	return hm.viewLocked(host)
}

// viewForProvider is HostForProvider and view under one read lock: it is
// called for every candidate of every request.
func (hm *HostManager) viewForProvider(uuid string) (hostView, bool) {
	hm.mu.RLock()
	defer hm.mu.RUnlock()
	r, ok := hm.byProvider[uuid]
	if !ok {
		return hostView{}, false
	}
	return hm.viewOf(r)
}

// ReportsInstance says whether provider is a compute node's (a host with
// a service owns it), and whether that host's agent reports instance on
// it: the leader's orphaned-allocation duty leaves those alone.
func (hm *HostManager) ReportsInstance(provider, instance string) (compute, reported bool) {
	v, ok := hm.viewForProvider(provider)
	if !ok {
		return false, false
	}
	_, reported = v.Instances[instance]
	return true, reported
}

// viewsForProviders is viewForProvider for many providers under one read
// lock: a request joins up to max_placement_results candidates, and a lock
// round per candidate queued them behind every watch update.
// The views are written into views and oks (each len(uuids); oks zeroed):
// views[i] is written, and means something, only where oks[i].
// slots[i] is uuids[i]'s Candidate.RootSlot (0 when not known; slots may
// be nil): a record found through the slot table skips the map.
func (hm *HostManager) viewsForProviders(uuids []string, slots []int32, views []hostView, oks []bool) ([]hostView, []bool) {
	hm.mu.RLock()
	defer hm.mu.RUnlock()
	var spare slotEntries
	for i, uuid := range uuids {
		var slot int32
		if slots != nil {
			slot = slots[i]
		}
		r := hm.slots.lookup(slot, uuid)
		if r == nil {
			var ok bool
			if r, ok = hm.byProvider[uuid]; !ok {
				continue
			}
			hm.slots.remember(slot, uuid, r, &spare, len(uuids)-i)
		}
		views[i], oks[i] = hm.viewOf(r)
	}
	return views, oks
}

func (hm *HostManager) viewLocked(host string) (hostView, bool) {
	r, ok := hm.hosts[host]
	if !ok {
		return hostView{}, false
	}
	return hm.viewOf(r)
}

type hostsHandler struct{ hm *HostManager }

// Decode reads one host key's value (informer.Decoder): outside the host
// manager's lock, and during a list on a few goroutines while the next
// page is fetched. Keys applyLocked reads nothing from decode to nil, and
// so do syncs, which applySyncLocked reads itself (their uuids are the
// strings of the instances the host manager holds). During a list key
// and value alias the list's buffer (informer.PagedResetter): nothing
// decoded keeps them.
func (h hostsHandler) Decode(key string, value []byte) (any, error) {
	host, rest, err := h.hm.keys.ParseHostKey(key)
	if err != nil {
		return nil, nil
	}
	switch {
	case rest == "service":
		s := &etcdschema.Service{}
		if err := etcdschema.Decode(key, value, s); err != nil {
			return s, err
		}
		h.hm.shareServiceStrings(s)
		return s, nil
	case rest == "capacity":
		// Its inventories and usage are shared with every equal host's:
		// read-only. The record keeps only its maps (hostCapacity).
		return etcdschema.DecodeHostCapacityShared(key, value)
	case strings.HasPrefix(rest, "instances/") && h.hm.track:
		// Straight into shared strings: applyLocked swaps the key's host
		// (the key's bytes, during a list) for the host record's name.
		return etcdschema.DecodeInstanceInfoSharing(key, value, host, h.hm.names)
	case strings.HasPrefix(rest, "builds/"):
		// Only the op is kept (the record is checked whole): every
		// scheduler decodes every cast.
		b := &etcdschema.BuildOp{}
		return b, etcdschema.Decode(key, value, b)
	}
	return nil, nil
}

// Reset is ResetPaged for a list in one page (the informer hands a
// PagedResetter its list page by page; tests build one).
func (h hostsHandler) Reset(kvs []informer.Event, rev int64) {
	_ = h.ResetPaged(rev, func(page func([]informer.Event)) error {
		page(kvs)
		return nil
	})
}

// ResetPaged (informer.PagedResetter) builds the listed state page by
// page in a host manager of its own, outside the lock, and swaps it in at
// the end: the listed events (1.4M at 100,000 hosts) are garbage as soon
// as they are applied instead of all held until a Reset, and requests
// keep reading the old state meanwhile, as they did during a list before.
// Hosts whose sync differed from their listed instances are re-read after
// the swap. The events are borrowed (their keys and values are the list's
// buffer): what the state keeps of a key is copied or shared.
//
// A host's keys list together and in order (builds/ < instances/ <
// service < sync), so its instances are gathered as they come and put
// into a map of their number once its next key comes (fillInstances):
// growing each host's map one instance at a time left every smaller
// table to the GC. Each sync is then compared with the host's listed
// instances.
func (h hostsHandler) ResetPaged(rev int64, list func(page func([]informer.Event)) error) error {
	hm := h.hm
	next := &HostManager{keys: hm.keys, log: hm.log, track: hm.track,
		hosts: map[string]*hostRecord{}, byProvider: map[string]*hostRecord{},
		reread: map[string]bool{}, rereadCh: make(chan struct{}, 1), names: hm.names}
	var listed listedInstances
	if err := list(func(page []informer.Event) {
		for _, ev := range page {
			host, rest, err := next.keys.ParseHostKey(ev.Key)
			if err != nil {
				continue
			}
			if uuid, ok := strings.CutPrefix(rest, "instances/"); ok && next.track && !ev.Deleted {
				if listed.r == nil || listed.r.name != host {
					next.fillInstances(&listed)
					listed.r = next.record(host)
				}
				if key, info, ok := next.decodedInstance(listed.r, uuid, ev); ok {
					listed.keys, listed.infos = append(listed.keys, key), append(listed.infos, info)
				}
				continue
			}
			next.fillInstances(&listed)
			next.applyParsedLocked(host, rest, ev, true)
		}
	}); err != nil {
		return err
	}
	next.fillInstances(&listed)
	// A re-read older than this list must not replace it.
	for _, r := range next.hosts {
		r.instRev = rev
		r.refreshLocked(hm.track)
	}
	// The listed records' mapped cells, read under the read lock (a
	// 100,000-host list's lookups would hold requests off), and read
	// again under the write lock only if a mapping changed meanwhile.
	hm.mu.RLock()
	setMappedCellsLocked(next.hosts, hm.cells)
	gen := hm.mappingsGen
	hm.mu.RUnlock()
	hm.mu.Lock()
	if hm.mappingsGen != gen {
		setMappedCellsLocked(next.hosts, hm.cells)
	}
	hm.hosts, hm.byProvider = next.hosts, next.byProvider
	hm.slots.forget()
	for host := range next.reread {
		hm.reread[host] = true
	}
	hm.mu.Unlock()
	if len(next.reread) > 0 {
		select {
		case hm.rereadCh <- struct{}{}:
		default:
		}
	}
	return nil
}

func (h hostsHandler) Apply(evs []informer.Event) {
	hm := h.hm
	hm.mu.Lock()
	defer hm.mu.Unlock()
	for _, ev := range evs {
		hm.applyLocked(ev, false)
	}
}

func (hm *HostManager) record(host string) *hostRecord {
	r, ok := hm.hosts[host]
	if !ok {
		// instances and builds stay nil until the host has some (reads
		// of a nil map are empty): every scheduler keeps a record per
		// host, and two empty maps each were garbage as soon as the
		// host's first instance replaced one.
		// host is a substring of an etcd key: a copy does not keep the
		// whole key alive.
		r = &hostRecord{name: strings.Clone(host), nameHash: hostNameHash(host), mappedCell: hm.cells[host]}
		hm.hosts[r.name] = r
	}
	return r
}

// listedInstances are one host's instances as a list hands them over,
// until its next key (ResetPaged).
type listedInstances struct {
	r     *hostRecord
	keys  []string
	infos []*etcdschema.InstanceInfo
}

// fillInstances puts the gathered instances into their host's map (made
// for their number) and empties l; the caller builds a fresh state.
func (hm *HostManager) fillInstances(l *listedInstances) {
	if l.r == nil || len(l.keys) == 0 {
		l.r = nil
		return
	}
	m := l.r.instances
	if m == nil {
		m = make(map[string]*etcdschema.InstanceInfo, len(l.keys))
	}
	for i, k := range l.keys {
		m[k] = l.infos[i]
	}
	l.r.instances = m
	clear(l.keys)
	clear(l.infos)
	l.r, l.keys, l.infos = nil, l.keys[:0], l.infos[:0]
}

// decodedInstance is the instance info ev (a put of r's instance uuid)
// decoded, with its cache key, sharing r's strings; false when it is
// unreadable (logged) or older than r's last re-read.
func (hm *HostManager) decodedInstance(r *hostRecord, uuid string, ev informer.Event) (string, *etcdschema.InstanceInfo, bool) {
	if ev.Revision <= r.instRev {
		return "", nil, false // already in the last re-read
	}
	info, err := decoded[*etcdschema.InstanceInfo](ev)
	if err != nil {
		hm.log.Warn("ignoring unreadable instance info", "host", r.name, "instance", uuid, "error", err)
		return "", nil, false
	}
	holdName(&info.Host, r.name)
	return keyOf(uuid, info), info, true
}

// applyLocked applies one key. During a Reset (fresh) the instance maps
// are new and not yet shared with any request, so they are filled in
// place; afterwards every change copies the host's map (copy on write).
// The key may be a list's borrowed bytes (ResetPaged): what is kept of
// it is copied (record, keyOf).
func (hm *HostManager) applyLocked(ev informer.Event, fresh bool) {
	host, rest, err := hm.keys.ParseHostKey(ev.Key)
	if err != nil {
		return
	}
	hm.applyParsedLocked(host, rest, ev, fresh)
	// A list (fresh) refreshes every record once it is done (Reset,
	// ResetPaged).
	if !fresh {
		if r, ok := hm.hosts[host]; ok {
			r.refreshLocked(hm.track)
		}
	}
}

// applyParsedLocked is applyLocked of ev's key parsed into host and rest.
func (hm *HostManager) applyParsedLocked(host, rest string, ev informer.Event, fresh bool) {
	switch {
	case rest == "service":
		if ev.Deleted {
			if r, ok := hm.hosts[host]; ok && r.service != nil {
				hm.unmapProviderLocked(r.service.ProviderUUID)
				r.service = nil
			}
			return
		}
		s, err := decoded[*etcdschema.Service](ev)
		if err != nil {
			hm.log.Warn("ignoring unreadable service record", "host", host, "error", err)
			return
		}
		r := hm.record(host)
		holdName(&s.Host, r.name)
		if r.service != nil && r.service.ProviderUUID != s.ProviderUUID {
			hm.unmapProviderLocked(r.service.ProviderUUID)
		}
		r.service = s
		if old, ok := hm.byProvider[s.ProviderUUID]; ok && old != r {
			hm.slots.forget() // another host's provider now: the slot table's answer changes
		}
		hm.byProvider[s.ProviderUUID] = r
	case rest == "alive":
		hm.record(host).alive = !ev.Deleted
	case rest == "down":
		hm.record(host).down = !ev.Deleted
	case rest == "sync" && hm.track:
		hm.applySyncLocked(host, ev)
	case rest == "capacity":
		hm.applyCapacityLocked(host, ev)
	case strings.HasPrefix(rest, "instances/") && hm.track:
		uuid := strings.TrimPrefix(rest, "instances/")
		r := hm.record(host)
		if ev.Revision <= r.instRev {
			return // already in the last re-read
		}
		var key string
		var info *etcdschema.InstanceInfo
		if !ev.Deleted {
			var ok bool
			if key, info, ok = hm.decodedInstance(r, uuid, ev); !ok {
				return
			}
		}
		// Copy on write: request-time views share the map without locks.
		next := r.instances
		if fresh && next == nil {
			next = map[string]*etcdschema.InstanceInfo{}
		}
		if !fresh {
			next = make(map[string]*etcdschema.InstanceInfo, len(r.instances)+1)
			for k, v := range r.instances {
				next[k] = v
			}
		}
		if ev.Deleted {
			delete(next, uuid)
		} else {
			next[key] = info
		}
		r.instances = next
	case strings.HasPrefix(rest, "builds/"):
		uuid := strings.TrimPrefix(rest, "builds/")
		r := hm.record(host)
		delete(r.builds, uuid)
		if !ev.Deleted {
			if b, err := decoded[*etcdschema.BuildOp](ev); err == nil && b.Op == etcdschema.OpBuild {
				if r.builds == nil {
					r.builds = map[string]bool{}
				}
				r.builds[strings.Clone(uuid)] = true // the key may be a list's borrowed bytes
			}
		}
	}
}

// unmapProviderLocked deletes provider uuid's record from byProvider,
// and the slot table's answers with it; the caller holds the write lock.
func (hm *HostManager) unmapProviderLocked(uuid string) {
	delete(hm.byProvider, uuid)
	hm.slots.forget()
}

type mappingsHandler struct{ hm *HostManager }

// Decode (informer.Decoder) reads a host mapping's cell outside the lock
// (during a list on a few goroutines), as the cell names' one shared
// string (internCell): every scheduler keeps every host's mapping.
func (h mappingsHandler) Decode(key string, value []byte) (any, error) {
	var m etcdschema.HostMapping
	if err := etcdschema.Decode(key, value, &m); err != nil {
		return nil, err
	}
	return internCell(m.Cell), nil
}

// Reset is ResetPaged for a list in one page.
func (h mappingsHandler) Reset(kvs []informer.Event, rev int64) {
	_ = h.ResetPaged(rev, func(page func([]informer.Event)) error {
		page(kvs)
		return nil
	})
}

// ResetPaged (informer.PagedResetter) builds the listed mappings page by
// page outside the lock and swaps them in; the events are borrowed, so
// each host name kept is copied.
func (h mappingsHandler) ResetPaged(_ int64, list func(page func([]informer.Event)) error) error {
	hm := h.hm
	cells := map[string]string{}
	if err := list(func(page []informer.Event) {
		for _, ev := range page {
			if host, cell, ok := hm.mappingOf(ev); ok && !ev.Deleted {
				cells[strings.Clone(host)] = cell
			}
		}
	}); err != nil {
		return err
	}
	hm.mu.Lock()
	defer hm.mu.Unlock()
	hm.cells = cells
	hm.mappingsGen++
	setMappedCellsLocked(hm.hosts, cells)
	return nil
}

func (h mappingsHandler) Apply(evs []informer.Event) {
	hm := h.hm
	hm.mu.Lock()
	defer hm.mu.Unlock()
	for _, ev := range evs {
		hm.applyMappingLocked(ev)
	}
}

// mappingOf is the host ev's key names and, for a put, the cell its
// mapping gives; false for a key that is not a host's mapping or an
// unreadable one (logged).
func (hm *HostManager) mappingOf(ev informer.Event) (host, cell string, ok bool) {
	host, ok = etcdschema.LastSegment(ev.Key, hm.mapsPrefix)
	if !ok || ev.Deleted {
		return host, "", ok
	}
	p, err := decoded[*string](ev)
	if err != nil {
		hm.log.Warn("ignoring unreadable host mapping", "host", host, "error", err)
		return host, "", false
	}
	return host, *p, true
}

func (hm *HostManager) applyMappingLocked(ev informer.Event) {
	host, cell, ok := hm.mappingOf(ev)
	if !ok {
		return
	}
	hm.mappingsGen++
	if ev.Deleted {
		delete(hm.cells, host)
	} else {
		hm.cells[host] = cell
	}
	if r, ok := hm.hosts[host]; ok {
		r.mappedCell = cell
	}
}

// applySyncLocked compares an agent's periodic uuid list with the cache
// (sync_instance_info): equal, the host is trusted; different, the host is
// untrusted until the reconciler has re-read its instance info.
func (hm *HostManager) applySyncLocked(host string, ev informer.Event) {
	r := hm.record(host)
	if ev.Deleted {
		r.synced = false
		return
	}
	// Decoded here, not by Decode: its uuids are the strings of the
	// instances r holds (one lookup each, no copy), and so are the keys of
	// the flavors r keeps; into hm.sync's arrays, since most syncs agree
	// and nothing of them is kept.
	hs := &hm.sync
	err := etcdschema.DecodeHostSyncReusing(ev.Key, ev.Value, hs, func(uuid []byte) string {
		if info, ok := r.instances[string(uuid)]; ok && info.UUID == string(uuid) {
			return info.UUID
		}
		return string(uuid)
	}, hm.names)
	if err != nil {
		hm.log.Warn("ignoring unreadable instance sync", "host", host, "error", err)
		return
	}
	r.synced = true
	flavors := syncedFlavorsOf(hs)
	diff := syncDiffers(hs.UUIDs, flavors, r.instances)
	if diff == "" && !r.stale {
		// The sync agrees with the cache and no re-read is pending: only
		// a re-read reads the flavors (correctFlavors), and only a sync
		// that differs asks for one, with its own. Kept for every host,
		// they were 32 MB of a cold start's heap at 100,000 hosts of
		// ten instances.
		r.syncFlavors = syncedFlavors{}
		return
	}
	r.syncFlavors = flavors.clone() // hm.sync's arrays serve the next sync
	if diff == "" {
		return
	}
	hm.log.Info("instance sync differs from the cache; re-reading the host", "host", host,
		"reported", len(hs.UUIDs), "cached", len(r.instances), "difference", diff)
	r.stale = true
	hm.reread[host] = true
	select {
	case hm.rereadCh <- struct{}{}:
	default:
	}
}

// reconcile re-reads the instance info of hosts whose sync differed.
func (hm *HostManager) reconcile(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-hm.rereadCh:
		}
		hm.mu.Lock()
		hosts := sortedKeys(hm.reread)
		hm.reread = map[string]bool{}
		hm.mu.Unlock()
		for _, h := range hosts {
			if err := hm.rereadHost(ctx, h); err != nil && ctx.Err() == nil {
				hm.log.Warn("could not re-read host instances; retrying", "host", h, "error", err)
				hm.mu.Lock()
				hm.reread[h] = true
				hm.mu.Unlock()
				backoff.Sleep(ctx, time.Second)
				select {
				case hm.rereadCh <- struct{}{}:
				default:
				}
			}
		}
	}
}

// rereadHost replaces a host's cached instances with what etcd holds now:
// its instance info, corrected from the instance records where the info's
// flavor is not the one the host's last sync reported (correctFlavors).
func (hm *HostManager) rereadHost(ctx context.Context, host string) error {
	prefix := hm.keys.HostInstances(host)
	var synced syncedFlavors
	hm.mu.RLock()
	cell := hm.cells[host] // the mapping's, when the host has no record
	if r, ok := hm.hosts[host]; ok {
		synced = r.syncFlavors
		cell = cellOf(r)
	}
	hm.mu.RUnlock()
	resp, err := hm.cli.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		return fmt.Errorf("re-read instances of %s: %w", host, err)
	}
	next := make(map[string]*etcdschema.InstanceInfo, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		uuid, ok := etcdschema.LastSegment(string(kv.Key), prefix)
		if !ok {
			continue
		}
		var info etcdschema.InstanceInfo
		if err := etcdschema.Decode(string(kv.Key), kv.Value, &info); err != nil {
			hm.log.Warn("ignoring unreadable instance info", "host", host, "instance", uuid, "error", err)
			continue
		}
		next[keyOf(uuid, &info)] = &info
	}
	if err := hm.correctFlavors(ctx, host, cell, synced, next); err != nil {
		return err
	}
	hm.mu.Lock()
	defer hm.mu.Unlock()
	r := hm.record(host)
	if resp.Header.Revision > r.instRev {
		r.instances, r.instRev = next, resp.Header.Revision
	}
	r.stale = hm.reread[host] // a newer difference arrived meanwhile
	r.refreshLocked(hm.track)
	return nil
}

// DownHosts lists hosts with a service record whose alive key is gone
// (down), and hosts the leader recorded down that are alive again (back):
// what the leader's down-host duty acts on.
func (hm *HostManager) DownHosts() (down, back []string) {
	hm.mu.RLock()
	defer hm.mu.RUnlock()
	for h, r := range hm.hosts {
		switch {
		case r.service != nil && !r.alive:
			down = append(down, h)
		case r.alive && r.down:
			back = append(back, h)
		}
	}
	return down, back
}

// instancesFromCells reads, for hosts whose cache is not trusted, the
// instances the cells place on them: Nova's InstanceList.get_by_host for
// hosts that never reported, whose sync differed, or when tracking is off.
// One range read per cell involved, whatever the number of hosts.
func (hm *HostManager) instancesFromCells(ctx context.Context, hostsByCell map[string]map[string]bool) (map[string]map[string]*etcdschema.InstanceInfo, error) {
	out := map[string]map[string]*etcdschema.InstanceInfo{}
	for _, cell := range sortedKeys(hostsByCell) {
		want := hostsByCell[cell]
		_, err := informer.List(ctx, hm.cli, hm.keys.CellInstances(cell), 0, nil, func(page []informer.Event) error {
			for _, ev := range page {
				var inst etcdschema.Instance
				if etcdschema.Decode(ev.Key, ev.Value, &inst) != nil || !want[inst.Host] || inst.Status == etcdschema.StatusDeleted {
					continue
				}
				m := out[inst.Host]
				if m == nil {
					m = map[string]*etcdschema.InstanceInfo{}
					out[inst.Host] = m
				}
				m[inst.UUID] = infoOf(&inst)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("read instances of cell %s: %w", cell, err)
		}
	}
	return out, nil
}

// Stats is a debug figure of what the host manager holds.
type Stats struct {
	Hosts, Instances, Trusted int
}

// Stats counts hosts, cached instances and hosts whose cache is trusted.
func (hm *HostManager) Stats() Stats {
	hm.mu.RLock()
	defer hm.mu.RUnlock()
	var st Stats
	for _, r := range hm.hosts {
		st.Hosts++
		st.Instances += len(r.instances)
		if hm.track && r.synced && !r.stale {
			st.Trusted++
		}
	}
	return st
}

// decoded is what hostsHandler.Decode made of ev's value.
func decoded[T any](ev informer.Event) (T, error) {
	v, ok := ev.Decoded.(T)
	if ev.DecodeErr != nil {
		return v, ev.DecodeErr
	}
	if !ok {
		return v, fmt.Errorf("decode %s: got %T, want %T", ev.Key, ev.Decoded, v)
	}
	return v, nil
}

// keyOf is the cache key of an instance: its uuid as decoded from the
// value when that matches the key's last segment. The key's segment is a
// substring of the whole etcd key and would keep all of it alive (about
// 70 bytes more per cached instance).
func keyOf(fromKey string, info *etcdschema.InstanceInfo) string {
	if info.UUID == fromKey {
		return info.UUID
	}
	return strings.Clone(fromKey)
}
