// Package servergroups keeps Nova's server groups (instance groups) in
// etcd: create, list, show with members, delete, without HTTP, shared by
// Nova's /os-server-groups (package compute) and Berth's /v1 (package
// api), each of which validates bodies and words errors its own way.
//
// A group is one etcdschema.ServerGroup record under Keys.ServerGroup;
// its members and the scheduler's placement guards are keys below it
// (Keys.ServerGroupPrefix), written by the server create and the claim,
// never by this package, which only reads them and deletes them with
// the group.
//
// A group belongs to the project and user that created it (ProjectID,
// UserID, set by the caller). The store does not filter by project: who
// may list, see or delete which group is the API's policy (package
// compute answers a non-admin only its own project's groups).
package servergroups

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/etcdretry"
	"github.com/berth-project/berth/quotas"
)

// ErrNotFound is a group that does not exist.
var ErrNotFound = errors.New("server group not found")

// Policies are the policies a group may have, as Nova 2.64 lists them.
var Policies = []string{etcdschema.PolicyAntiAffinity, etcdschema.PolicyAffinity,
	etcdschema.PolicySoftAntiAffinity, etcdschema.PolicySoftAffinity}

// Store is the server groups of one deployment.
type Store struct {
	cli  *clientv3.Client
	keys etcdschema.Keys
	log  hclog.Logger
	// patience is how long a write is retried while etcd cannot commit
	// (etcdretry.Do).
	patience time.Duration
	// quotas, when set, check a create against its project's
	// server_groups quota in the transaction that stores it.
	quotas *quotas.Store
}

// SetQuotas makes every create check its project's quotas (nil: none).
func (s *Store) SetQuotas(q *quotas.Store) { s.quotas = q }

// New returns the store of the groups under keys; writes are retried for
// patience while etcd cannot commit.
func New(cli *clientv3.Client, keys etcdschema.Keys, patience time.Duration, log hclog.Logger) *Store {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	return &Store{cli: cli, keys: keys, log: log, patience: patience}
}

// Group is a group with its members: the instances that joined it and
// still exist (a deleted server leaves its group, as Nova's instance
// destroy removes it), sorted.
type Group struct {
	*etcdschema.ServerGroup
	Members []string
}

// retry runs op again while etcd cannot commit, logging each retry.
func (s *Store) retry(ctx context.Context, what, group string, op func(context.Context) error) error {
	return etcdretry.Do(ctx, s.patience, op, func(attempt int, err error) {
		s.log.Warn(what+": etcd cannot commit for now, retrying", "group", group, "attempt", attempt, "error", err)
	})
}

// Create stores g, whose UUID must be fresh. The put is conditional on
// the key's absence: the uuid is new, so the compare fails only on a
// retry whose earlier attempt landed (etcd lost its answer): created.
func (s *Store) Create(ctx context.Context, g *etcdschema.ServerGroup) error {
	key := s.keys.ServerGroup(g.UUID)
	sent := false
	var guard quotas.Guard
	if s.quotas != nil {
		var err error
		if guard, err = s.quotas.ReserveServerGroup(ctx, g.ProjectID, ""); err != nil {
			return err
		}
	}
	for try := 0; ; try++ {
		counted := false // the quota guard failed: count again
		err := s.retry(ctx, "store server group", g.UUID, func(ctx context.Context) error {
			resp, err := s.cli.Txn(ctx).
				If(append([]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(key), "=", 0)}, guard.Cmps...)...).
				Then(append([]clientv3.Op{clientv3.OpPut(key, etcdschema.MustEncode(g))}, guard.Ops...)...).
				Else(clientv3.OpGet(key, clientv3.WithCountOnly())).Commit()
			switch {
			case err != nil:
				sent = true
				return err
			case resp.Succeeded:
				return nil
			case resp.Responses[0].GetResponseRange().Count == 0:
				counted = true // only the quota guard failed
				return nil
			case !sent:
				return fmt.Errorf("server group %s exists before it was created", g.UUID)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("store server group %s: %w", g.UUID, err)
		}
		if !counted {
			break
		}
		if try >= 1000 {
			return fmt.Errorf("store server group %s: the project's usage kept changing", g.UUID)
		}
		if guard, err = s.quotas.ReserveServerGroup(ctx, g.ProjectID, ""); err != nil {
			return err
		}
	}
	s.log.Info("server group created", "group", g.UUID, "policy", g.Policy, "project", g.ProjectID)
	return nil
}

// validID reports whether id can name a group's key: one key segment.
func validID(id string) bool { return id != "" && !strings.Contains(id, "/") }

// Get is the group id with its members (ErrNotFound if none).
func (s *Store) Get(ctx context.Context, id string) (*Group, error) {
	if !validID(id) {
		return nil, ErrNotFound
	}
	groups, err := s.read(ctx, id)
	if err != nil {
		return nil, err
	}
	if len(groups) == 0 {
		return nil, ErrNotFound
	}
	return &groups[0], nil
}

// List is every group with its members, in creation order (Nova's).
func (s *Store) List(ctx context.Context) ([]Group, error) { return s.read(ctx, "") }

// read reads the group records (every one, or only one) and their member
// keys in one snapshot, keeping only members whose server still exists.
func (s *Store) read(ctx context.Context, only string) ([]Group, error) {
	k := s.keys
	prefix := k.ServerGroups()
	if only != "" {
		prefix = k.ServerGroup(only) // the record and, by prefix, its sub-keys
	}
	resp, err := s.cli.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("read server groups: %w", err)
	}
	groups := map[string]*etcdschema.ServerGroup{}
	members := map[string][]string{}
	for _, kv := range resp.Kvs {
		key := string(kv.Key)
		id, rest, sub := strings.Cut(strings.TrimPrefix(key, k.ServerGroups()), "/")
		if only != "" && id != only {
			continue // a longer id sharing the prefix
		}
		switch {
		case !sub:
			var g etcdschema.ServerGroup
			if err := etcdschema.Decode(key, kv.Value, &g); err != nil {
				s.log.Warn("skipping unreadable server group", "key", key, "error", err)
				continue
			}
			groups[id] = &g
		case strings.HasPrefix(rest, "members/"):
			members[id] = append(members[id], strings.TrimPrefix(rest, "members/"))
		}
	}
	var all []string
	for _, ms := range members {
		all = append(all, ms...)
	}
	live, err := s.existing(ctx, all)
	if err != nil {
		return nil, err
	}
	out := make([]Group, 0, len(groups))
	for id, g := range groups {
		ms := slices.DeleteFunc(members[id], func(m string) bool { return !live[m] })
		slices.Sort(ms)
		if ms == nil {
			ms = []string{}
		}
		out = append(out, Group{ServerGroup: g, Members: ms})
	}
	slices.SortFunc(out, func(x, y Group) int {
		if c := x.CreatedAt.Compare(y.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(x.UUID, y.UUID)
	})
	return out, nil
}

// existing reports which instances still have an instance mapping.
func (s *Store) existing(ctx context.Context, uuids []string) (map[string]bool, error) {
	out := map[string]bool{}
	const batch = 128 // etcd's operations per transaction
	for start := 0; start < len(uuids); start += batch {
		part := uuids[start:min(start+batch, len(uuids))]
		ops := make([]clientv3.Op, len(part))
		for i, u := range part {
			ops[i] = clientv3.OpGet(s.keys.InstanceMapping(u), clientv3.WithCountOnly())
		}
		resp, err := s.cli.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			return nil, fmt.Errorf("read instance mappings: %w", err)
		}
		for i, r := range resp.Responses {
			if r.GetResponseRange().Count > 0 {
				out[part[i]] = true
			}
		}
	}
	return out, nil
}

// Delete deletes the group with its members and guards (ErrNotFound if
// none). Nova lets a group with members be deleted; the servers keep
// running. Retried while etcd cannot commit; after an attempt whose
// answer etcd lost, a group found gone is the one this call deleted.
func (s *Store) Delete(ctx context.Context, id string) error {
	if !validID(id) {
		return ErrNotFound
	}
	k := s.keys
	sent, gone := false, false
	err := s.retry(ctx, "delete server group", id, func(ctx context.Context) error {
		resp, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(k.ServerGroup(id)), ">", 0)).
			Then(clientv3.OpDelete(k.ServerGroup(id)), clientv3.OpDelete(k.ServerGroupPrefix(id), clientv3.WithPrefix())).Commit()
		if err != nil {
			sent = true
			return err
		}
		gone = !resp.Succeeded && !sent
		return nil
	})
	if err != nil {
		return fmt.Errorf("delete server group %s: %w", id, err)
	}
	if gone {
		return ErrNotFound
	}
	s.log.Info("server group deleted", "group", id)
	return nil
}
