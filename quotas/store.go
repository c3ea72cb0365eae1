package quotas

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
)

// Store keeps the projects' quota limits (etcdschema.QuotaSet), counts
// their usage and checks creates against both (see doc.go).
type Store struct {
	cli      *clientv3.Client
	keys     etcdschema.Keys
	defaults Limits
	log      hclog.Logger
	// fences are the projects' quota states as the batched creates'
	// plans last left them (batch.go).
	fences fenceMemory
}

// New returns the quotas over the records under keys; defaults are the
// limits of every project that sets none (nil: NovaDefaults), each
// resource missing from it taking Nova's default.
func New(cli *clientv3.Client, keys etcdschema.Keys, defaults Limits, log hclog.Logger) *Store {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	d := NovaDefaults()
	for k, v := range defaults {
		d[k] = v
	}
	return &Store{cli: cli, keys: keys, defaults: d, log: log}
}

// Defaults are the limits of a project that sets none.
func (s *Store) Defaults() Limits { return s.defaults.Clone() }

// Limits are project's limits (user's, when user is not ""): the
// defaults, then what the project set, then what the user set.
func (s *Store) Limits(ctx context.Context, project, user string) (Limits, error) {
	set, _, err := s.readSet(ctx, project, 0)
	if err != nil {
		return nil, err
	}
	return s.merge(set, user), nil
}

// merge is the defaults overlaid with set's project limits and user's.
func (s *Store) merge(set *etcdschema.QuotaSet, user string) Limits {
	l := s.Defaults()
	for k, v := range set.Limits {
		l[k] = v
	}
	if user != "" {
		for k, v := range set.Users[user] {
			l[k] = v
		}
	}
	return l
}

// readSet reads project's QuotaSet (an empty one if none) at rev (0:
// the newest) and the revision it was modified at (0: none).
func (s *Store) readSet(ctx context.Context, project string, rev int64) (*etcdschema.QuotaSet, int64, error) {
	key := s.keys.QuotaSet(project)
	var opts []clientv3.OpOption
	if rev > 0 {
		opts = append(opts, clientv3.WithRev(rev))
	}
	resp, err := s.cli.Get(ctx, key, opts...)
	if err != nil {
		return nil, 0, fmt.Errorf("read quota set of %s: %w", project, err)
	}
	set := &etcdschema.QuotaSet{}
	if len(resp.Kvs) == 0 {
		return set, 0, nil
	}
	if err := etcdschema.Decode(key, resp.Kvs[0].Value, set); err != nil {
		return nil, 0, err
	}
	return set, resp.Kvs[0].ModRevision, nil
}

// Update sets limits of project (of user in it, when user is not "")
// and returns the limits after. check, when not nil, sees the limits
// before and the usage (the user's, for a user's limits), and refuses the update with an error (Nova's
// "must be greater than or equal to already used"); it runs again if the
// set changed meanwhile.
func (s *Store) Update(ctx context.Context, project, user string, limits Limits,
	check func(before Limits, used Usage) error) (Limits, error) {
	key := s.keys.QuotaSet(project)
	for try := 0; ; try++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		set, rev, err := s.readSet(ctx, project, 0)
		if err != nil {
			return nil, err
		}
		if check != nil {
			used, _, err := s.CountUser(ctx, project, user, "")
			if err != nil {
				return nil, err
			}
			if used.User != nil {
				used = *used.User // a user's limit is checked against what the user uses
			}
			if err := check(s.merge(set, user), used); err != nil {
				return nil, err
			}
		}
		if set.Limits == nil {
			set.Limits = map[string]int64{}
		}
		into := set.Limits
		if user != "" {
			if set.Users == nil {
				set.Users = map[string]map[string]int64{}
			}
			if set.Users[user] == nil {
				set.Users[user] = map[string]int64{}
			}
			into = set.Users[user]
		}
		for k, v := range limits {
			into[k] = v
		}
		set.UpdatedAt = time.Now().UTC()
		resp, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).
			Then(clientv3.OpPut(key, etcdschema.MustEncode(set))).Commit()
		if err != nil {
			return nil, fmt.Errorf("store quota set of %s: %w", project, err)
		}
		if resp.Succeeded {
			s.log.Info("quotas updated", "project", project, "user", user, "limits", limits)
			return s.merge(set, user), nil
		}
		if try > 100 {
			return nil, fmt.Errorf("store quota set of %s: it kept changing", project)
		}
	}
}

// Delete reverts project's limits (only user's, when user is not "") to
// the defaults.
func (s *Store) Delete(ctx context.Context, project, user string) error {
	key := s.keys.QuotaSet(project)
	if user == "" {
		if _, err := s.cli.Delete(ctx, key); err != nil {
			return fmt.Errorf("delete quota set of %s: %w", project, err)
		}
		s.log.Info("quotas reverted to defaults", "project", project)
		return nil
	}
	for try := 0; ; try++ {
		set, rev, err := s.readSet(ctx, project, 0)
		if err != nil {
			return err
		}
		if _, ok := set.Users[user]; !ok {
			return nil
		}
		delete(set.Users, user)
		set.UpdatedAt = time.Now().UTC()
		resp, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).
			Then(clientv3.OpPut(key, etcdschema.MustEncode(set))).Commit()
		if err != nil {
			return fmt.Errorf("store quota set of %s: %w", project, err)
		}
		if resp.Succeeded {
			s.log.Info("user quotas reverted to the project's", "project", project, "user", user)
			return nil
		}
		if try > 100 {
			return fmt.Errorf("store quota set of %s: it kept changing", project)
		}
	}
}
