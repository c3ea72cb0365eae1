package scheduler

import (
	"context"
	"strings"
	"sync"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/informer"
)

// hostRecord is what the host manager knows of one host from etcd.
type hostRecord struct {
	service *etcdschema.Service
	alive   bool
	// instances is the agent-reported instance info (seed
	// isolate-scheduler-db); updated turns true once the agent reported.
	instances map[string]*etcdschema.InstanceInfo
	updated   bool
}

// HostManager keeps every host's service, liveness and instances current
// from one etcd watch over the hosts prefix, plus the host mappings.
type HostManager struct {
	keys etcdschema.Keys
	log  hclog.Logger

	mu         sync.RWMutex
	hosts      map[string]*hostRecord
	byProvider map[string]string // root provider uuid -> host
	cells      map[string]string // host -> cell (host mappings)

	hostsInf, mapsInf *informer.Informer
}

// NewHostManager builds a host manager; Run starts following etcd.
func NewHostManager(cli *clientv3.Client, keys etcdschema.Keys, log hclog.Logger) *HostManager {
	hm := &HostManager{keys: keys, log: log, hosts: map[string]*hostRecord{},
		byProvider: map[string]string{}, cells: map[string]string{}}
	hm.hostsInf = informer.New(cli, keys.HostsPrefix(), hostsHandler{hm}, log)
	hm.mapsInf = informer.New(cli, keys.HostMappings(), mappingsHandler{hm}, log)
	return hm
}

// Run follows etcd until ctx ends.
func (hm *HostManager) Run(ctx context.Context) {
	go hm.mapsInf.Run(ctx)
	hm.hostsInf.Run(ctx)
}

// WaitSynced blocks until the first full load is in memory.
func (hm *HostManager) WaitSynced(ctx context.Context) error {
	if err := hm.hostsInf.WaitSynced(ctx); err != nil {
		return err
	}
	return hm.mapsInf.WaitSynced(ctx)
}

// HostForProvider returns the host whose compute node is provider uuid.
func (hm *HostManager) HostForProvider(uuid string) (string, bool) {
	hm.mu.RLock()
	defer hm.mu.RUnlock()
	h, ok := hm.byProvider[uuid]
	return h, ok
}

// hostView is a consistent copy of one host's record for a request.
type hostView struct {
	Host      string
	Cell      string
	Service   etcdschema.Service
	Up        bool
	Instances map[string]*etcdschema.InstanceInfo
	Updated   bool
}

func (hm *HostManager) view(host string) (hostView, bool) {
	hm.mu.RLock()
	defer hm.mu.RUnlock()
	r, ok := hm.hosts[host]
	if !ok || r.service == nil {
		return hostView{}, false
	}
	cell := hm.cells[host]
	if cell == "" {
		cell = r.service.Cell
	}
	return hostView{Host: host, Cell: cell, Service: *r.service,
		Up: r.alive && !r.service.ForcedDown, Instances: r.instances, Updated: r.updated}, true
}

type hostsHandler struct{ hm *HostManager }

func (h hostsHandler) Reset(kvs []informer.Event, _ int64) {
	hm := h.hm
	hm.mu.Lock()
	defer hm.mu.Unlock()
	hm.hosts = map[string]*hostRecord{}
	hm.byProvider = map[string]string{}
	for _, kv := range kvs {
		hm.applyLocked(kv)
	}
}

func (h hostsHandler) Apply(evs []informer.Event) {
	hm := h.hm
	hm.mu.Lock()
	defer hm.mu.Unlock()
	for _, ev := range evs {
		hm.applyLocked(ev)
	}
}

func (hm *HostManager) record(host string) *hostRecord {
	r, ok := hm.hosts[host]
	if !ok {
		r = &hostRecord{instances: map[string]*etcdschema.InstanceInfo{}}
		hm.hosts[host] = r
	}
	return r
}

func (hm *HostManager) applyLocked(ev informer.Event) {
	host, rest, err := hm.keys.ParseHostKey(ev.Key)
	if err != nil {
		return
	}
	switch {
	case rest == "service":
		if ev.Deleted {
			if r, ok := hm.hosts[host]; ok && r.service != nil {
				delete(hm.byProvider, r.service.ProviderUUID)
				r.service = nil
			}
			return
		}
		var s etcdschema.Service
		if err := etcdschema.Decode(ev.Key, ev.Value, &s); err != nil {
			hm.log.Warn("ignoring unreadable service record", "host", host, "error", err)
			return
		}
		r := hm.record(host)
		if r.service != nil && r.service.ProviderUUID != s.ProviderUUID {
			delete(hm.byProvider, r.service.ProviderUUID)
		}
		r.service = &s
		hm.byProvider[s.ProviderUUID] = host
	case rest == "alive":
		hm.record(host).alive = !ev.Deleted
	case strings.HasPrefix(rest, "instances/"):
		uuid := strings.TrimPrefix(rest, "instances/")
		r := hm.record(host)
		// Copy on write: request-time views share the map without locks.
		next := make(map[string]*etcdschema.InstanceInfo, len(r.instances)+1)
		for k, v := range r.instances {
			next[k] = v
		}
		if ev.Deleted {
			delete(next, uuid)
		} else {
			var info etcdschema.InstanceInfo
			if err := etcdschema.Decode(ev.Key, ev.Value, &info); err != nil {
				hm.log.Warn("ignoring unreadable instance info", "host", host, "instance", uuid, "error", err)
				return
			}
			next[uuid] = &info
		}
		r.instances = next
		r.updated = true
	}
}

type mappingsHandler struct{ hm *HostManager }

func (h mappingsHandler) Reset(kvs []informer.Event, _ int64) {
	hm := h.hm
	hm.mu.Lock()
	defer hm.mu.Unlock()
	hm.cells = map[string]string{}
	for _, kv := range kvs {
		hm.applyMappingLocked(kv)
	}
}

func (h mappingsHandler) Apply(evs []informer.Event) {
	hm := h.hm
	hm.mu.Lock()
	defer hm.mu.Unlock()
	for _, ev := range evs {
		hm.applyMappingLocked(ev)
	}
}

func (hm *HostManager) applyMappingLocked(ev informer.Event) {
	host, ok := etcdschema.LastSegment(ev.Key, hm.keys.HostMappings())
	if !ok {
		return
	}
	if ev.Deleted {
		delete(hm.cells, host)
		return
	}
	var m etcdschema.HostMapping
	if err := etcdschema.Decode(ev.Key, ev.Value, &m); err != nil {
		hm.log.Warn("ignoring unreadable host mapping", "host", host, "error", err)
		return
	}
	hm.cells[host] = m.Cell
}
