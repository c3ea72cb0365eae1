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
	ops := []clientv3.Op{
		clientv3.OpPut(k.CellInstance(inst.Cell, inst.UUID), etcdschema.MustEncode(&inst)),
		clientv3.OpPut(k.Migration(mig.Cell, mig.UUID), etcdschema.MustEncode(&mig)),
		clientv3.OpDelete(k.MigrationMapping(mig.UUID)),
	}
	if inst.Group != "" {
		// The move's claims put its group place on a destination that
		// never took it; it is the source's alone again.
		ops = append(ops, GroupMemberOn(k, inst.Group, inst.UUID, mig.SourceHost))
	}
	return ops
}

// GroupMemberOn is the write that records instance's place in server
// group on host alone, if the group still exists (a deleted group's
// member key is not brought back): a move that ends on its source (a
// revert, a move whose every destination failed) puts it back where the
// move's claim had moved it from, and a confirm lets go of the source
// (GroupMemberMoving). Slots of the member on other hosts are stale from
// then on, and the next reader of the group removes them.
func GroupMemberOn(k etcdschema.Keys, group, instance, host string) clientv3.Op {
	return groupMemberPut(k, group, &etcdschema.ServerGroupMember{InstanceUUID: instance, Host: host})
}

// GroupMemberMoving is the write of a cold move's start: instance, in
// server group on source, keeps its place there while the move is in
// flight (MoveSource), so the claims of its destinations add a place
// rather than move it, and no other member takes the source's
// anti-affinity slot before a revert could bring the server back. Nova
// keeps the source's room the same way, in Placement, under the
// migration's consumer.
func GroupMemberMoving(k etcdschema.Keys, group, instance, source string) clientv3.Op {
	return groupMemberPut(k, group, &etcdschema.ServerGroupMember{InstanceUUID: instance, Host: source, MoveSource: source})
}

func groupMemberPut(k etcdschema.Keys, group string, m *etcdschema.ServerGroupMember) clientv3.Op {
	return clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(k.ServerGroup(group)), ">", 0)},
		[]clientv3.Op{clientv3.OpPut(k.ServerGroupMember(group, m.InstanceUUID), etcdschema.MustEncode(m))}, nil)
}
