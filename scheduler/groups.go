package scheduler

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/hashicorp/go-hclog"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/rawtxn"
)

// ErrGroupNotFound is returned for a group hint naming no server group.
var ErrGroupNotFound = errors.New("server group not found")

// GroupInfo is a server group as one request sees it, read from etcd when
// the request carries the group hint: Nova's setup_instance_group, which
// fills the group's members and hosts before the filters run. It includes
// members that are claimed but not built yet, so a scheduler sees another
// scheduler's picks as soon as their claims commit.
type GroupInfo struct {
	Group *etcdschema.ServerGroup
	// Members is every live member of the group (its instance mapping
	// exists), placed or not.
	Members map[string]bool
	// HostMembers maps a host to the members placed on it.
	HostMembers map[string]map[string]bool
	// AffinityHost is the host an affinity group is bound to ("" = none
	// yet), and affinityRev the mod revision the claim compares.
	AffinityHost string
	affinityRev  int64
	// slots maps host -> slot -> instance for anti-affinity groups.
	slots map[string]map[int]string
	// moveSource maps a member whose cold move is in flight to the host
	// it leaves (ServerGroupMember.MoveSource): an anti-affinity member
	// is on both hosts until the move is confirmed or reverted.
	moveSource map[string]string
}

// Policy is the group's policy.
func (g *GroupInfo) Policy() string { return g.Group.Policy }

// Hosts is the set of hosts that hold a member (Nova's group.hosts).
func (g *GroupInfo) Hosts() map[string]bool {
	out := map[string]bool{}
	for h, m := range g.HostMembers {
		if len(m) > 0 {
			out[h] = true
		}
	}
	if g.AffinityHost != "" {
		out[g.AffinityHost] = true
	}
	return out
}

// membersOn counts the members on host h: those the group's records place
// there plus any the host's agent reports that the records miss.
func (g *GroupInfo) membersOn(h *HostState) int {
	n := len(g.HostMembers[h.Host])
	for u := range h.Instances {
		if g.Members[u] && !g.HostMembers[h.Host][u] {
			n++
		}
	}
	return n
}

// place records a pick made earlier in this request, as Nova adds the host
// to group.hosts in _consume_selected_host.
func (g *GroupInfo) place(host, instance string) {
	if g.HostMembers[host] == nil {
		g.HostMembers[host] = map[string]bool{}
	}
	g.HostMembers[host][instance] = true
	g.Members[instance] = true
	if g.Group.Policy == etcdschema.PolicyAffinity && g.AffinityHost == "" {
		g.AffinityHost = host
	}
}

// loadGroup reads a group and its members and guards at one revision, and
// deletes what belongs to instances that no longer exist (their instance
// mapping is gone: Nova drops group members when an instance is destroyed)
// or that were placed elsewhere since (a slot whose member moved).
func (s *Scheduler) loadGroup(ctx context.Context, uuid string) (*GroupInfo, error) {
	return readGroup(ctx, s.hosts.cli, s.hosts.keys, s.log, uuid)
}

func readGroup(ctx context.Context, cli *clientv3.Client, k etcdschema.Keys, log hclog.Logger, uuid string) (*GroupInfo, error) {
	resp, err := cli.Txn(ctx).Then(
		clientv3.OpGet(k.ServerGroup(uuid)),
		clientv3.OpGet(k.ServerGroupPrefix(uuid), clientv3.WithPrefix()),
	).Commit()
	if err != nil {
		return nil, fmt.Errorf("read server group %s: %w", uuid, err)
	}
	gkv := resp.Responses[0].GetResponseRange().Kvs
	if len(gkv) == 0 {
		return nil, fmt.Errorf("group %s: %w", uuid, ErrGroupNotFound)
	}
	g := &GroupInfo{Group: &etcdschema.ServerGroup{}, Members: map[string]bool{},
		HostMembers: map[string]map[string]bool{}, slots: map[string]map[int]string{}}
	if err := etcdschema.Decode(k.ServerGroup(uuid), gkv[0].Value, g.Group); err != nil {
		return nil, err
	}
	type rec struct {
		key string
		rev int64
	}
	memberHost := map[string]string{}
	memberRec := map[string]rec{}
	g.moveSource = map[string]string{}
	type slotRec struct {
		rec
		host     string
		slot     int
		instance string
	}
	var slots []slotRec
	var affinity *slotRec
	for _, kv := range resp.Responses[1].GetResponseRange().Kvs {
		key := string(kv.Key)
		switch {
		case strings.HasPrefix(key, k.ServerGroupMembers(uuid)):
			var m etcdschema.ServerGroupMember
			if err := etcdschema.Decode(key, kv.Value, &m); err != nil {
				log.Warn("ignoring unreadable group member", "group", uuid, "error", err)
				continue
			}
			memberHost[m.InstanceUUID] = m.Host
			memberRec[m.InstanceUUID] = rec{key, kv.ModRevision}
			if m.MoveSource != "" && g.Group.Policy == etcdschema.PolicyAntiAffinity {
				g.moveSource[m.InstanceUUID] = m.MoveSource
			}
		case strings.HasPrefix(key, k.ServerGroupSlots(uuid)):
			var sl etcdschema.ServerGroupSlot
			host, n, ok := parseSlot(strings.TrimPrefix(key, k.ServerGroupSlots(uuid)))
			if !ok || etcdschema.Decode(key, kv.Value, &sl) != nil {
				log.Warn("ignoring unreadable group slot", "key", key)
				continue
			}
			slots = append(slots, slotRec{rec{key, kv.ModRevision}, host, n, sl.InstanceUUID})
		case key == k.ServerGroupAffinityHost(uuid):
			var sl etcdschema.ServerGroupSlot
			if err := etcdschema.Decode(key, kv.Value, &sl); err != nil {
				log.Warn("ignoring unreadable affinity host", "group", uuid, "error", err)
				continue
			}
			affinity = &slotRec{rec: rec{key, kv.ModRevision}, host: sl.Host, instance: sl.InstanceUUID}
		}
	}
	live, err := liveInstances(ctx, cli, k, sortedKeys(memberHost))
	if err != nil {
		return nil, err
	}
	var stale []rec
	for u, host := range memberHost {
		if !live[u] {
			stale = append(stale, memberRec[u])
			continue
		}
		g.Members[u] = true
		// A moving anti-affinity member holds its source too, and its
		// slot there stays valid.
		for _, h := range []string{host, g.moveSource[u]} {
			if h != "" {
				if g.HostMembers[h] == nil {
					g.HostMembers[h] = map[string]bool{}
				}
				g.HostMembers[h][u] = true
			}
		}
	}
	for _, sl := range slots {
		if !g.HostMembers[sl.host][sl.instance] {
			stale = append(stale, sl.rec)
			continue
		}
		if g.slots[sl.host] == nil {
			g.slots[sl.host] = map[int]string{}
		}
		g.slots[sl.host][sl.slot] = sl.instance
	}
	if affinity != nil {
		if len(g.HostMembers[affinity.host]) == 0 {
			stale = append(stale, affinity.rec)
		} else {
			g.AffinityHost, g.affinityRev = affinity.host, affinity.rev
		}
	}
	// Clean up as part of this read, each delete conditional on the record
	// being the one read; a lost race just leaves it for the next reader.
	for _, r := range stale {
		_, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(r.key), "=", r.rev)).
			Then(clientv3.OpDelete(r.key)).Commit()
		if err != nil {
			log.Warn("could not remove stale server group record", "key", r.key, "error", err)
		}
	}
	return g, nil
}

// liveInstances reports which instances still have an instance mapping.
func liveInstances(ctx context.Context, cli *clientv3.Client, k etcdschema.Keys, uuids []string) (map[string]bool, error) {
	out := map[string]bool{}
	const batch = 128 // etcd's operations per transaction
	for start := 0; start < len(uuids); start += batch {
		part := uuids[start:min(start+batch, len(uuids))]
		ops := make([]clientv3.Op, len(part))
		for i, u := range part {
			ops[i] = clientv3.OpGet(k.InstanceMapping(u), clientv3.WithCountOnly())
		}
		resp, err := cli.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			return nil, fmt.Errorf("read instance mappings of group members: %w", err)
		}
		for i, r := range resp.Responses {
			if r.GetResponseRange().Count > 0 {
				out[part[i]] = true
			}
		}
	}
	return out, nil
}

// parseSlot splits "<host>/<n>".
func parseSlot(rest string) (string, int, bool) {
	host, num, ok := strings.Cut(rest, "/")
	if !ok || host == "" {
		return "", 0, false
	}
	n, err := strconv.Atoi(num)
	if err != nil || n < 0 {
		return "", 0, false
	}
	return host, n, true
}

// groupGuard is what the claim of instance on host adds to its etcd
// transaction so that it cannot break the group's hard policy whatever
// other schedulers do meanwhile:
//   - anti-affinity: create one of the max_server_per_host slot keys of
//     (group, host), only if absent. Only that many exist, so two racing
//     claims cannot both take the last place on a host.
//   - affinity: create the group's affinity-host key only if absent, or
//     compare it unchanged when it already names this host. Two racing
//     first members cannot land on two hosts.
//
// Every policy records the member's host in the same transaction, which is
// how the next request (here or in another scheduler) sees the pick.
// committed must be called with the transaction's revision when the claim
// succeeds: it records the guard taken, so the next pick of the same
// request compares against it rather than losing to itself.
func groupGuard(k etcdschema.Keys, g *GroupInfo, host, instance string) (cmps []clientv3.Cmp, ops []*pb.RequestOp, committed func(rev int64)) {
	uuid := g.Group.UUID
	// A moving member's claim adds the destination and keeps its source.
	source := g.moveSource[instance]
	ops = []*pb.RequestOp{rawtxn.PutBytes(k.ServerGroupMember(uuid, instance), etcdschema.MustEncodeBytes(
		&etcdschema.ServerGroupMember{InstanceUUID: instance, Host: host, MoveSource: source}))}
	committed = func(int64) {}
	slot := &etcdschema.ServerGroupSlot{InstanceUUID: instance, Host: host}
	switch g.Group.Policy {
	case etcdschema.PolicyAntiAffinity:
		held := false
		for _, inst := range g.slots[host] {
			held = held || inst == instance
		}
		if held {
			break
		}
		for n := 0; n < g.Group.MaxPerHost(); n++ {
			if _, taken := g.slots[host][n]; !taken {
				key := k.ServerGroupSlot(uuid, host, n)
				cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(key), "=", 0))
				ops = append(ops, rawtxn.PutBytes(key, etcdschema.MustEncodeBytes(slot)))
				taken := n
				committed = func(int64) {
					if g.slots[host] == nil {
						g.slots[host] = map[int]string{}
					}
					g.slots[host][taken] = instance
				}
				break
			}
		}
		if len(cmps) == 0 {
			// Every slot is taken in our view: the filter should have
			// said no; make the claim fail rather than break the rule.
			key := k.ServerGroupSlot(uuid, host, g.Group.MaxPerHost()-1)
			cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(key), "=", 0))
		}
		// Places this instance held on other hosts (an earlier try whose
		// hand-off never happened, a move's failed destination) are
		// released in the same step; a moving member's source is kept.
		for h, byN := range g.slots {
			for n, inst := range byN {
				if inst == instance && h != host && h != source {
					ops = append(ops, rawtxn.Delete(k.ServerGroupSlot(uuid, h, n)))
				}
			}
		}
	case etcdschema.PolicyAffinity:
		key := k.ServerGroupAffinityHost(uuid)
		if g.AffinityHost == "" {
			cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(key), "=", 0))
			ops = append(ops, rawtxn.PutBytes(key, etcdschema.MustEncodeBytes(slot)))
			committed = func(rev int64) { g.AffinityHost, g.affinityRev = host, rev }
		} else if host == g.AffinityHost {
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(key), "=", g.affinityRev))
		} else {
			// The filter should have said no; fail rather than split.
			cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(key), "=", 0))
		}
	}
	return cmps, ops, committed
}

// releaseGroupPlaces undoes the group records of claims rolled back when a
// multi-instance request cannot be placed whole.
func (s *Scheduler) releaseGroupPlaces(ctx context.Context, g *GroupInfo, placed map[string]string) {
	if g == nil {
		return
	}
	k := s.hosts.keys
	uuid := g.Group.UUID
	for inst := range placed {
		ops := []clientv3.Op{clientv3.OpPut(k.ServerGroupMember(uuid, inst),
			etcdschema.MustEncode(&etcdschema.ServerGroupMember{InstanceUUID: inst}))}
		// The member is host-less now, so loadGroup's clean-up also treats
		// its slots and a lone affinity-host key as stale.
		if _, err := s.hosts.cli.Txn(context.WithoutCancel(ctx)).Then(ops...).Commit(); err != nil {
			s.log.Error("could not release server group place of unplaceable request",
				"group", uuid, "instance", inst, "error", err)
		}
	}
}

// checkGroupPolicy refuses a hard-policy group when its filter is not
// enabled, as Nova's setup_instance_group raises UnsupportedPolicyException:
// the guard alone would turn every host down without saying why.
func (s *Scheduler) checkGroupPolicy(g *GroupInfo) error {
	need := map[string]string{
		etcdschema.PolicyAffinity:     "ServerGroupAffinityFilter",
		etcdschema.PolicyAntiAffinity: "ServerGroupAntiAffinityFilter",
	}[g.Policy()]
	if need == "" {
		return nil
	}
	for _, f := range s.filters {
		if f.Name() == need {
			return nil
		}
	}
	return fmt.Errorf("server group %s has policy %s but %s is not in enabled_filters", g.Group.UUID, g.Policy(), need)
}

// ErrGroupPolicy says a host would break the hard policy of the
// instance's server group.
var ErrGroupPolicy = errors.New("server group policy")

// GroupRetryGuard is what a cell conductor adds to the claim of an
// alternate host for a member of a server group: the alternate passed the
// group's filter when the request was scheduled, but other members may
// have been placed since. It reads the group as the scheduler does and
// answers ErrGroupPolicy if host would now break a hard policy; otherwise
// the guard and writes (etcd's messages, as placement.ClaimOptions.GuardOps
// takes them) that move the member's place to host in the
// claim's own transaction (Nova's late check in the compute, made atomic
// with the claim). A group that no longer exists needs no guard.
func GroupRetryGuard(ctx context.Context, cli *clientv3.Client, k etcdschema.Keys, log hclog.Logger, group, host, instance string) ([]clientv3.Cmp, []*pb.RequestOp, error) {
	g, err := readGroup(ctx, cli, k, log, group)
	if errors.Is(err, ErrGroupNotFound) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	switch g.Policy() {
	case etcdschema.PolicyAntiAffinity:
		others := 0
		for m := range g.HostMembers[host] {
			if m != instance {
				others++
			}
		}
		if others >= g.Group.MaxPerHost() {
			return nil, nil, fmt.Errorf("%s already holds %d member(s) of anti-affinity group %s: %w", host, others, group, ErrGroupPolicy)
		}
	case etcdschema.PolicyAffinity:
		if g.AffinityHost != "" && g.AffinityHost != host {
			for m := range g.HostMembers[g.AffinityHost] {
				if m != instance {
					return nil, nil, fmt.Errorf("affinity group %s lives on %s: %w", group, g.AffinityHost, ErrGroupPolicy)
				}
			}
			// The instance was the group's only member: the group moves
			// with it, unless someone joined meanwhile.
			key := k.ServerGroupAffinityHost(group)
			cmps := []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(key), "=", g.affinityRev)}
			ops := []*pb.RequestOp{
				rawtxn.PutBytes(key, etcdschema.MustEncodeBytes(&etcdschema.ServerGroupSlot{InstanceUUID: instance, Host: host})),
				rawtxn.PutBytes(k.ServerGroupMember(group, instance), etcdschema.MustEncodeBytes(
					&etcdschema.ServerGroupMember{InstanceUUID: instance, Host: host})),
			}
			return cmps, ops, nil
		}
	}
	cmps, ops, _ := groupGuard(k, g, host, instance)
	return cmps, ops, nil
}
