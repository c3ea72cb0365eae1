// Package records holds the multi-key record recipes that several roles
// write: what burying a build request in cell0 puts, and which records
// deleting an instance removes. etcdschema spells every key; this package
// says which keys go together, so that a record an instance gains is added
// to its deletion in one place rather than in the agent, the API and the
// leader's duties separately.
//
// A recipe returns compares and operations, not a transaction: each caller
// runs them inside its own guards (a cast unchanged, a lease still held, a
// leader's fence) and adds what ends its own part (the cast, the queue
// item, the BuildRequest).
package records

import (
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
)

// BuryInCell0 is Nova's _bury_in_cell0 for build request br: the instance
// recorded in cell0, in ERROR with reason as its fault (code 500) at now,
// and its instance mapping pointing to cell0. The compares hold only while
// the request's instance mapping exists: a request the user deleted
// meanwhile has nothing left to record.
func BuryInCell0(k etcdschema.Keys, br *etcdschema.BuildRequest, reason string, now time.Time) ([]clientv3.Cmp, []clientv3.Op) {
	return BuryInCell0WithDetails(k, br, reason, "", now)
}

// BuryInCell0WithDetails is BuryInCell0 with the fault's details (what
// Nova fills with the traceback, shown to admins): for a NoValidHost,
// every filter's count and reasons.
func BuryInCell0WithDetails(k etcdschema.Keys, br *etcdschema.BuildRequest, reason, details string, now time.Time) ([]clientv3.Cmp, []clientv3.Op) {
	inst := &etcdschema.Instance{
		UUID: br.InstanceUUID, Name: br.Name, Status: etcdschema.StatusError, Cell: etcdschema.Cell0,
		Flavor: br.Flavor, ProjectID: br.ProjectID, UserID: br.UserID,
		Fault:     &etcdschema.Fault{Code: 500, Message: reason, Details: details, Created: now},
		CreatedAt: br.CreatedAt, UpdatedAt: now, AvailabilityZone: br.AvailabilityZone,
	}
	br.CarryTo(inst)
	mapping := &etcdschema.InstanceMapping{InstanceUUID: br.InstanceUUID, Cell: etcdschema.Cell0,
		ProjectID: br.ProjectID, CreatedAt: br.CreatedAt}
	cmps := []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(k.InstanceMapping(br.InstanceUUID)), ">", 0)}
	ops := []clientv3.Op{
		clientv3.OpPut(k.CellInstance(etcdschema.Cell0, br.InstanceUUID), etcdschema.MustEncode(inst)),
		clientv3.OpPut(k.InstanceMapping(br.InstanceUUID), etcdschema.MustEncode(mapping)),
	}
	return cmps, ops
}

// DeleteInstance is every record of instance uuid of project in cell,
// deleted: its cell record, its instance mapping with its entry in the
// project's quota index, its alternates, a pending retry and, when host
// is not "", the host's report of it. The caller frees the instance's
// allocations first (placement's claim is not a record here) and guards
// the deletes. An unknown project ("": a record of an older Berth) leaves
// the index entry, which counting skips and the leader removes.
func DeleteInstance(k etcdschema.Keys, cell, host, uuid, project string) []clientv3.Op {
	ops := []clientv3.Op{
		clientv3.OpDelete(k.CellInstance(cell, uuid)),
		clientv3.OpDelete(k.InstanceMapping(uuid)),
	}
	if project != "" {
		ops = append(ops, clientv3.OpDelete(k.QuotaInstance(project, uuid)))
	}
	if host != "" {
		ops = append(ops, clientv3.OpDelete(k.HostInstance(host, uuid)))
	}
	return append(ops,
		clientv3.OpDelete(k.Alternates(uuid)),
		clientv3.OpDelete(k.Retry(cell, uuid)))
}
