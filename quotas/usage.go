package quotas

import (
	"context"
	"fmt"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
)

// Usage is what a project uses of the counted resources.
type Usage struct {
	Instances, Cores, RAM, ServerGroups int64
	// GroupMembers are the members of the group Count was asked about.
	GroupMembers int64
	// User is the part of the above that the user CountUser was asked
	// about owns (nil from Count).
	User *Usage
}

// Of is the usage of resource name (0 for one Berth does not count).
func (u Usage) Of(name string) int64 {
	switch name {
	case Instances:
		return u.Instances
	case Cores:
		return u.Cores
	case RAM:
		return u.RAM
	case ServerGroups:
		return u.ServerGroups
	}
	return 0
}

// maxOps is etcd's operations per transaction.
const maxOps = 128

// Count counts project's usage at one etcd revision, which it returns,
// and the members of group (when not "") at the same revision:
//   - instances: the project's instance mappings (Nova counts instance
//     mappings too), less those whose delete was accepted (Nova's
//     queued_for_delete);
//   - cores and ram: a build request's flavor (it has no allocation yet;
//     Nova does not count these, which is one way its check races), else
//     the VCPU and MEMORY_MB the instance's consumer holds in Placement
//     (Nova's count_usage_from_placement), or its flavor while it is
//     still in BUILD (between a failed host and the next claim), so an
//     ERROR instance without an allocation counts no cores, as in Nova;
//   - a server with a move in flight (resize or cold migration) also
//     counts what its migration's consumer holds (the source, Nova's
//     migration-based allocations), so source and destination both
//     count as in Nova's placement counting; until the move is scheduled
//     (the source still under the instance, no destination claimed yet)
//     it counts its old and new flavors, so a check between the move's
//     acceptance and its claim already sees the room the move will take;
//   - server groups: the project's groups; a group's members: its member
//     keys whose server still has a mapping.
//
// Reading every record at one revision is what lets Reserve fence the
// count: nothing counted can change between the reads.
func (s *Store) Count(ctx context.Context, project, group string) (Usage, int64, error) {
	return s.CountUser(ctx, project, "", group)
}

// CountUser is Count with, when user is not "", the part user owns in
// Usage.User (its servers' instances, cores and RAM, and its groups), as
// Nova counts a user's usage against per-user quotas.
func (s *Store) CountUser(ctx context.Context, project, user, group string) (Usage, int64, error) {
	var u Usage
	var mineU Usage
	if user != "" {
		u.User = &mineU
	}
	k := s.keys
	// The project's mappings, from its index (index.go), at revision rev.
	mine, rev, err := s.projectMappings(ctx, project)
	if err != nil {
		return u, 0, err
	}
	at := clientv3.WithRev(rev)
	var moves []movingServer
	// Three reads a server: its build request, its instance record and
	// its placement consumer.
	const perServer = 3
	for start := 0; start < len(mine); start += maxOps / perServer {
		part := mine[start:min(start+maxOps/perServer, len(mine))]
		ops := make([]clientv3.Op, 0, perServer*len(part))
		for _, m := range part {
			inst := k.CellInstance(m.Cell, m.InstanceUUID)
			if m.Cell == "" {
				inst = k.BuildRequest(m.InstanceUUID) // read twice: no cell yet
			}
			ops = append(ops, clientv3.OpGet(k.BuildRequest(m.InstanceUUID), at), clientv3.OpGet(inst, at),
				clientv3.OpGet(k.Consumer(m.InstanceUUID), at))
		}
		tr, err := s.cli.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			return u, 0, fmt.Errorf("read servers for quota usage: %w", err)
		}
		for i, m := range part {
			r := tr.Responses[perServer*i : perServer*(i+1)]
			owner, moving, err := u.addServer(k, m, r[0].GetResponseRange().Kvs, r[1].GetResponseRange().Kvs,
				r[2].GetResponseRange().Kvs)
			if err != nil {
				return u, 0, err
			}
			mineToo := user != "" && owner == user
			if mineToo {
				if _, _, err := mineU.addServer(k, m, r[0].GetResponseRange().Kvs, r[1].GetResponseRange().Kvs,
					r[2].GetResponseRange().Kvs); err != nil {
					return u, 0, err
				}
			}
			if moving != nil {
				moving.mine = mineToo
				moves = append(moves, *moving)
			}
		}
	}
	if err := s.countMoves(ctx, moves, at, &u, &mineU); err != nil {
		return u, 0, err
	}
	groups, err := s.cli.Get(ctx, k.ServerGroups(), clientv3.WithPrefix(), at)
	if err != nil {
		return u, 0, fmt.Errorf("read server groups for quota usage: %w", err)
	}
	var members []string
	for _, kv := range groups.Kvs {
		key := string(kv.Key)
		if !strings.Contains(strings.TrimPrefix(key, k.ServerGroups()), "/") {
			var g etcdschema.ServerGroup
			if err := etcdschema.Decode(key, kv.Value, &g); err != nil {
				return u, 0, err
			}
			if g.ProjectID == project && project != "" {
				u.ServerGroups++
				if user != "" && g.UserID == user {
					mineU.ServerGroups++
				}
			}
			continue
		}
		if group != "" {
			if uuid := memberOf(k, key, group); uuid != "" {
				members = append(members, uuid)
			}
		}
	}
	// A group's members are its member keys whose server still has a
	// mapping (any project's servers may join a group).
	if u.GroupMembers, err = s.groupMembers(ctx, members, rev); err != nil {
		return u, 0, err
	}
	return u, rev, nil
}

// kvs is one read's answer: no key, or one.
type kvs = []*mvccpb.KeyValue

// addServer counts one server of the project from its build request,
// instance record and consumer (each absent or one key) and says whose
// it is ("" when it counts nothing) and, when it has a move in flight,
// the move for countMoves.
func (u *Usage) addServer(k etcdschema.Keys, m etcdschema.InstanceMapping, br, inst, consumer kvs) (string, *movingServer, error) {
	if len(br) == 1 {
		var b etcdschema.BuildRequest
		if err := etcdschema.Decode(string(br[0].Key), br[0].Value, &b); err != nil {
			return "", nil, err
		}
		u.Instances++
		u.Cores += int64(b.Flavor.VCPUs)
		u.RAM += int64(b.Flavor.RAMMB)
		return b.UserID, nil, nil
	}
	if m.Cell == "" || len(inst) == 0 {
		return "", nil, nil // deleted between the mapping and the record
	}
	var in etcdschema.Instance
	if err := etcdschema.Decode(string(inst[0].Key), inst[0].Value, &in); err != nil {
		return "", nil, err
	}
	if in.Status == etcdschema.StatusDeleted {
		return "", nil, nil
	}
	if in.TaskState != etcdschema.TaskDeleting {
		u.Instances++
	}
	cores, ram, err := held(consumer)
	if err != nil {
		return "", nil, err
	}
	moving := &movingServer{inst: &in, cores: cores, ram: ram}
	// An offloaded server holds no allocation but still counts its
	// flavor, as Nova's default counting from the database does (an
	// unshelve then needs no quota check, and an offload never frees
	// room a create could take before the unshelve).
	if (in.Status == etcdschema.StatusBuild || in.Status == etcdschema.StatusShelvedOffloaded) &&
		in.TaskState != etcdschema.TaskDeleting {
		cores = max(cores, int64(in.Flavor.VCPUs))
		ram = max(ram, int64(in.Flavor.RAMMB))
	}
	u.Cores += cores
	u.RAM += ram
	if in.MigrationUUID != "" {
		return in.UserID, moving, nil
	}
	return in.UserID, nil, nil
}

// movingServer is a counted server with a move in flight: its record,
// what its own consumer holds, and whether it is also the asked user's.
type movingServer struct {
	inst       *etcdschema.Instance
	cores, ram int64
	mine       bool
}

// countMoves adds what the moves of servers hold beyond their
// instances' consumers, read at revision at: their migrations' consumers
// and, for a move not scheduled yet, the new flavor it is about to claim.
func (s *Store) countMoves(ctx context.Context, moves []movingServer, at clientv3.OpOption, u, mine *Usage) error {
	const perMove = 2 // the migration record and its consumer
	k := s.keys
	for start := 0; start < len(moves); start += maxOps / perMove {
		part := moves[start:min(start+maxOps/perMove, len(moves))]
		ops := make([]clientv3.Op, 0, perMove*len(part))
		for _, mv := range part {
			ops = append(ops, clientv3.OpGet(k.Migration(mv.inst.Cell, mv.inst.MigrationUUID), at),
				clientv3.OpGet(k.Consumer(mv.inst.MigrationUUID), at))
		}
		tr, err := s.cli.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			return fmt.Errorf("read moves for quota usage: %w", err)
		}
		for i, mv := range part {
			cores, ram, err := moveHolds(mv, tr.Responses[perMove*i].GetResponseRange().Kvs,
				tr.Responses[perMove*i+1].GetResponseRange().Kvs)
			if err != nil {
				return err
			}
			u.Cores += cores
			u.RAM += ram
			if mv.mine {
				mine.Cores += cores
				mine.RAM += ram
			}
		}
	}
	return nil
}

// moveHolds is what move mv counts beyond its instance's consumer: its
// migration consumer's VCPU and MEMORY_MB and, while the migration is
// pre-migrating (the superconductor hands the source to the migration's
// consumer, then claims the destination), at least the old and new
// flavors together, whichever step it has reached.
func moveHolds(mv movingServer, migration, consumer kvs) (cores, ram int64, err error) {
	cores, ram, err = held(consumer)
	if err != nil || len(migration) == 0 {
		return cores, ram, err
	}
	var m etcdschema.Migration
	if err := etcdschema.Decode(string(migration[0].Key), migration[0].Value, &m); err != nil {
		return 0, 0, err
	}
	if m.Status != etcdschema.MigrationPreMigrating {
		return cores, ram, nil
	}
	cores = max(cores, int64(m.OldFlavor.VCPUs+m.NewFlavor.VCPUs)-mv.cores)
	ram = max(ram, int64(m.OldFlavor.RAMMB+m.NewFlavor.RAMMB)-mv.ram)
	return cores, ram, nil
}

// held is the VCPU and MEMORY_MB a consumer record (absent or one key)
// holds.
func held(consumer kvs) (cores, ram int64, err error) {
	if len(consumer) == 0 {
		return 0, 0, nil
	}
	var c etcdschema.Consumer
	if err := etcdschema.Decode(string(consumer[0].Key), consumer[0].Value, &c); err != nil {
		return 0, 0, err
	}
	for _, a := range c.Allocations {
		cores += a.Resources["VCPU"]
		ram += a.Resources["MEMORY_MB"]
	}
	return cores, ram, nil
}

// plainJSON reports whether every encoder writes s as itself in quotes:
// letters, digits and a few punctuation marks no JSON encoder escapes.
func plainJSON(s string) bool {
	for _, r := range s {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' ||
			r == '-' || r == '_' || r == '.' || r == ':' || r == '@'
		if !ok {
			return false
		}
	}
	return true
}
