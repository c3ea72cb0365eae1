package scheduler

import "github.com/berth-project/berth/etcdschema"

// A request joins each of its candidates (100 by default, up to 1,000)
// with its host's view. Built from the record at each request, a view read
// the record and from it the service, the instance and build maps'
// headers: several cache misses per candidate in a boot, where the records
// are cold, for values that change a few times per server booted on the
// host while every request reads them. So each record keeps what its view
// derives ready, next to the fields the view copies: refreshLocked sets it
// after every change to the record, all of which happen under the host
// manager's write lock (applyLocked, rereadHost) or before anyone reads
// the record (a list, which refreshes every record at its end). A view
// then reads one record, its mapped cell included (host_cell.go).

// hostView is a consistent copy of one host's record for a request.
type hostView struct {
	Host string
	// NameHash is hostNameHash(Host), worked out once per record.
	NameHash uint64
	Cell     string
	// Service is the host's record, shared read-only: a change replaces
	// the record, never writes into it, and a copy per candidate per
	// request was a third of the candidate join.
	Service   *etcdschema.Service
	Up        bool
	Updated   bool
	Instances map[string]*etcdschema.InstanceInfo
	// NumInstances is len(Instances) and FailedBuilds the service's
	// count: read here, the join touches neither the map nor the
	// service.
	NumInstances int
	FailedBuilds int
	IOOps        int
}

// readyFields are a record's view's derived fields.
type readyFields struct {
	up, updated  bool
	numInstances int32
	ioOps        int32
	failedBuilds int32
}

// refreshLocked sets r's ready fields from the rest of the record; the
// caller holds the write lock (or has the record to itself).
func (r *hostRecord) refreshLocked(track bool) {
	f := readyFields{updated: track && r.synced && !r.stale,
		numInstances: int32(len(r.instances)), ioOps: int32(len(r.builds))}
	if r.service != nil {
		f.up = r.alive && !r.service.ForcedDown
		f.failedBuilds = int32(r.service.FailedBuilds)
	}
	r.ready = f
}

// viewOf is the view of record r; the caller holds the read lock.
func (hm *HostManager) viewOf(r *hostRecord) (hostView, bool) {
	if r.service == nil {
		return hostView{}, false
	}
	cell := cellOf(r)
	f := &r.ready
	return hostView{Host: r.name, NameHash: r.nameHash, Cell: cell, Service: r.service, Up: f.up, Updated: f.updated,
		Instances: r.instances, NumInstances: int(f.numInstances), FailedBuilds: int(f.failedBuilds),
		IOOps: int(f.ioOps)}, true
}
