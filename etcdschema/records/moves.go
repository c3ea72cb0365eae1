package records

import (
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
)

// MoveCast is the cast of one step of in's move mig, to the host that
// works the step: the flavor is the one that host runs the guest with
// (the new one on the destination, the old one on the source).
func MoveCast(in *etcdschema.Instance, mig *etcdschema.Migration, step, requestID string, now time.Time) *etcdschema.Build {
	flavor := mig.NewFlavor
	switch step {
	case etcdschema.MoveOut, etcdschema.MoveConfirm, etcdschema.MoveRevertFinish:
		flavor = mig.OldFlavor
	}
	return &etcdschema.Build{Op: etcdschema.OpMove, InstanceUUID: in.UUID, Name: in.Name, Cell: in.Cell,
		Flavor: flavor, ProjectID: in.ProjectID, UserID: in.UserID, Attempt: len(mig.Attempts),
		RequestID: requestID, CastAt: now, Image: in.Image,
		Move: &etcdschema.MoveStep{MigrationUUID: mig.UUID, Step: step, Kind: MoveKind(mig)}}
}

// MoveKind is the MoveRequest/MoveStep kind of mig: "" for the cold
// moves, else its migration type (live-migration, evacuation).
func MoveKind(mig *etcdschema.Migration) string {
	switch mig.MigrationType {
	case etcdschema.MigrationTypeResize, etcdschema.MigrationTypeMigration, "":
		return ""
	}
	return mig.MigrationType
}

// FailedMove is what a move that ended in error before its source
// stopped writes (the superconductor on NoValidHost, the cell conductor
// with no alternate left, an agent on a final prep failure): the
// migration in error with the reason, the server ACTIVE on its source
// with no task and no migration (Nova's _cold_migrate and
// _reschedule_resize_or_reraise). The caller has given the source's
// allocation back to the instance first.
func FailedMove(k etcdschema.Keys, inst etcdschema.Instance, mig etcdschema.Migration, reason string, now time.Time) []clientv3.Op {
	return EndedMove(k, inst, mig, etcdschema.MigrationError, reason, now)
}

// EndedMove is FailedMove ending the migration in status (a live
// migration aborted ends cancelled).
func EndedMove(k etcdschema.Keys, inst etcdschema.Instance, mig etcdschema.Migration, status, reason string, now time.Time) []clientv3.Op {
	mig.Status, mig.Error, mig.UpdatedAt = status, reason, now
	inst.TaskState, inst.MigrationUUID, inst.UpdatedAt = "", "", now
	return []clientv3.Op{
		clientv3.OpPut(k.CellInstance(inst.Cell, inst.UUID), etcdschema.MustEncode(&inst)),
		clientv3.OpPut(k.Migration(mig.Cell, mig.UUID), etcdschema.MustEncode(&mig)),
		clientv3.OpDelete(k.MigrationMapping(mig.UUID)),
	}
}

// GroupMemberOn is the write that records instance's place in server
// group on host, if the group still exists (a deleted group's member key
// is not brought back): a move that ends on its source (a revert, a
// move whose every destination failed) puts it back where the move's
// claim had moved it from.
func GroupMemberOn(k etcdschema.Keys, group, instance, host string) clientv3.Op {
	return clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(k.ServerGroup(group)), ">", 0)},
		[]clientv3.Op{clientv3.OpPut(k.ServerGroupMember(group, instance), etcdschema.MustEncode(
			&etcdschema.ServerGroupMember{InstanceUUID: instance, Host: host}))}, nil)
}
