package quotas

import (
	"context"
	"fmt"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/rawtxn"
)

// The usage record: a check that does not grow with the project.
//
// A count reads every server of the project (its index entries and three
// records each), 6-7 ms for 100 servers, on every create and every
// limited upsize. The fence key now carries a usage record U
// (etcdschema.QuotaFence.Usage) that a check reads instead, in O(1).
//
// The invariant: while the fence is at mod revision M and holds U, a
// count at any revision r >= M finds at most U (each resource). It holds
// because every write of the fence keeps it:
//   - a check that counted at R writes U = count(R) + its own charge,
//     under If(ModRevision(fence) <= R): no fence write since R, so
//     nothing grew the usage since R but this write's own create or move
//     (doc.go: usage grows only through a guarded write);
//   - a check that read U at mod revision M writes U + its charge, under
//     If(ModRevision(fence) == M): everything since M only lowered the
//     usage, and the charge is at least what its write adds to a count;
//   - a write that keeps no record (nothing limited, an older Berth)
//     writes the fence without one, so the next check counts.
//
// A charge is what the write adds to what a count finds: a create's
// servers (instances, their flavor's cores and ram), a server group, a
// move's hold (the count adds the new flavor of a resize or cold
// migration while it is in flight, and the flavor of an evacuation or a
// live migration once the destination is claimed: Nova's
// migration-based allocations), so every move start writes the fence.
// What lowers the usage (deletes, a failed build freeing its claim, a
// confirm or revert freeing a side, a deleted group) does not touch the
// record: U is an upper bound that drifts up, never down.
//
// So a check that fits U fits the count, and is answered as the count
// would answer it (Max servers, the resize allowed); a check that does
// not fit U counts at one revision as before, answers from the count
// (Nova's words, the same figures), and its write resets U to the count
// plus its charge. Every refusal therefore comes from a count, and the
// drift costs at most a count where a check comes near a limit. The
// limits API and os-quota-sets' in_use still count: they show exact
// figures, U only bounds them.
//
// Per-user limits (os-quota-sets with user_id) are checked from a count,
// as before: U is the project's only.

// fenceState is a project's quota set and fence read at one revision,
// with the members of a group when one was asked for.
type fenceState struct {
	set      *etcdschema.QuotaSet
	setMod   int64 // the set's mod revision (0: none, the defaults)
	rev      int64 // the revision read at
	fenceMod int64 // the fence's mod revision (0: no fence yet)
	usage    *etcdschema.QuotaUsage
	members  []string // the group's member server uuids, at rev
}

// readState reads project's quota set and fence (and group's member
// keys, when group is not "") in one transaction.
func (s *Store) readState(ctx context.Context, project, group string) (fenceState, error) {
	k := s.keys
	ops := []clientv3.Op{clientv3.OpGet(k.QuotaSet(project)), clientv3.OpGet(k.QuotaFence(project))}
	if group != "" {
		ops = append(ops, clientv3.OpGet(k.ServerGroupMembers(group), clientv3.WithPrefix(), clientv3.WithKeysOnly()))
	}
	resp, err := s.cli.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return fenceState{}, fmt.Errorf("read the quotas of %s: %w", project, err)
	}
	st := fenceState{rev: resp.Header.Revision}
	if err := st.decode(resp.Responses[0].GetResponseRange().Kvs, resp.Responses[1].GetResponseRange().Kvs); err != nil {
		return fenceState{}, err
	}
	if group != "" {
		for _, kv := range resp.Responses[2].GetResponseRange().Kvs {
			if uuid := memberOf(k, string(kv.Key), group); uuid != "" {
				st.members = append(st.members, uuid)
			}
		}
	}
	return st, nil
}

// decode fills st's set and fence from their reads (no kv: none).
func (st *fenceState) decode(set, fence []*mvccpb.KeyValue) error {
	st.set, st.setMod, st.fenceMod, st.usage = &etcdschema.QuotaSet{}, 0, 0, nil
	if len(set) == 1 {
		if err := etcdschema.Decode(string(set[0].Key), set[0].Value, st.set); err != nil {
			return err
		}
		st.setMod = set[0].ModRevision
	}
	if len(fence) == 1 {
		var f etcdschema.QuotaFence
		if err := etcdschema.Decode(string(fence[0].Key), fence[0].Value, &f); err != nil {
			return err
		}
		st.fenceMod, st.usage = fence[0].ModRevision, f.Usage
	}
	return nil
}

// recorded is the usage st's record says (ok false: none).
func (st fenceState) recorded() (Usage, bool) {
	if st.usage == nil {
		return Usage{}, false
	}
	return Usage{Instances: st.usage.Instances, Cores: st.usage.Cores, RAM: st.usage.RAM,
		ServerGroups: st.usage.ServerGroups}, true
}

// charge is what a guarded write adds to what a count finds.
type charge struct{ instances, cores, ram, groups int64 }

// plus is u with c added, as a record set from a count at basis.
func (u Usage) plus(c charge, basis int64) *etcdschema.QuotaUsage {
	return &etcdschema.QuotaUsage{Instances: u.Instances + c.instances, Cores: u.Cores + c.cores,
		RAM: u.RAM + c.ram, ServerGroups: u.ServerGroups + c.groups, Basis: basis}
}

// fencePut is the write of project's fence holding usage (nil: none).
func (s *Store) fencePut(project, requestID string, usage *etcdschema.QuotaUsage) clientv3.Op {
	return clientv3.OpPut(s.keys.QuotaFence(project), fenceValue(requestID, usage))
}

// fenceValue is the fence a write made for requestID leaves, holding
// usage (nil: none).
func fenceValue(requestID string, usage *etcdschema.QuotaUsage) string {
	return etcdschema.MustEncode(&etcdschema.QuotaFence{RequestID: requestID, At: time.Now().UTC(), Indexed: true, Usage: usage})
}

// fenceWrite is what a checked write does to project's fence: compare
// its mod revision with fenceMod (when checked) and put value. The
// Guards of single writes (guard) and the plans' shares (messages, as
// etcd's messages: PlanServers) are built from it, so both compare and
// write the fence alike.
type fenceWrite struct {
	key      string
	checked  bool
	fenceMod int64
	value    string
}

// recordedFence is the fence write of a write checked against st's
// record: the fence must be as read, and then holds the record plus c
// (returned too).
func (s *Store) recordedFence(project, requestID string, st fenceState, c charge) (fenceWrite, *etcdschema.QuotaUsage) {
	u, _ := st.recorded()
	next := u.plus(c, st.usage.Basis)
	return fenceWrite{key: s.keys.QuotaFence(project), checked: true, fenceMod: st.fenceMod, value: fenceValue(requestID, next)}, next
}

// uncheckedFence is the fence write of a write nothing limits: the fence
// moves, so a check that counted before it counts again, and holds no
// record (keeping one would need a comparison every such write waits
// on); the next limited check counts.
func (s *Store) uncheckedFence(project, requestID string) fenceWrite {
	return fenceWrite{key: s.keys.QuotaFence(project), value: fenceValue(requestID, nil)}
}

// guard is f with clientv3's builders.
func (f fenceWrite) guard() Guard {
	g := Guard{Ops: []clientv3.Op{clientv3.OpPut(f.key, f.value)}}
	if f.checked {
		g.Cmps = []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(f.key), "=", f.fenceMod)}
	}
	return g
}

// messages is f as etcd's messages: its comparison (nil when not
// checked) and its write.
func (f fenceWrite) messages() (*pb.Compare, *pb.RequestOp) {
	var cmp *pb.Compare
	if f.checked {
		cmp = rawtxn.ModRevisionIs(f.key, f.fenceMod)
	}
	return cmp, rawtxn.Put(f.key, f.value)
}

// guardRecorded is the Guard of a write checked against st's record
// (recordedFence).
func (s *Store) guardRecorded(project, requestID string, st fenceState, c charge) Guard {
	f, _ := s.recordedFence(project, requestID, st, c)
	return f.guard()
}

// guardCounted is the Guard of a write checked against u, counted at
// rev: no fence write since rev, and then the fence holds u plus c.
func (s *Store) guardCounted(project, requestID string, u Usage, rev int64, c charge) Guard {
	return Guard{
		Cmps: []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(s.keys.QuotaFence(project)), "<", rev+1)},
		Ops:  []clientv3.Op{s.fencePut(project, requestID, u.plus(c, rev))},
	}
}

// guardUnchecked is the Guard of a write nothing limits (uncheckedFence).
func (s *Store) guardUnchecked(project, requestID string) Guard {
	return s.uncheckedFence(project, requestID).guard()
}
