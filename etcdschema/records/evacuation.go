package records

import (
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
)

// FailedEvacuation is what an evacuation that could not rebuild the
// server anywhere writes: the migration in status (error when it could
// not be scheduled, failed when every destination's rebuild failed)
// with the reason, and the server in ERROR with the reason as its
// fault, still naming its (down) source host, no task and no migration
// (Nova's conductor and compute rebuild_instance on failure: vm_state
// ERROR, the source's allocation kept). The caller has given the
// source's allocation back to the instance first.
func FailedEvacuation(k etcdschema.Keys, inst etcdschema.Instance, mig etcdschema.Migration, status, reason string, now time.Time) []clientv3.Op {
	mig.Status, mig.Error, mig.UpdatedAt = status, reason, now
	inst.Status, inst.TaskState, inst.MigrationUUID, inst.UpdatedAt = etcdschema.StatusError, "", "", now
	inst.Fault = &etcdschema.Fault{Code: 500, Message: reason, Created: now}
	return []clientv3.Op{
		clientv3.OpPut(k.CellInstance(inst.Cell, inst.UUID), etcdschema.MustEncode(&inst)),
		clientv3.OpPut(k.Migration(mig.Cell, mig.UUID), etcdschema.MustEncode(&mig)),
		clientv3.OpDelete(k.MigrationMapping(mig.UUID)),
	}
}
