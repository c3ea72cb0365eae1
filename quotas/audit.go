package quotas

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
)

// Auditing the usage record (record.go): at any revision, a record is at
// least the project's count. A record below it is a write that grew the
// usage without charging it (a bug, or an older Berth's move during an
// upgrade): a check could then let a create past a limit a count would
// refuse. A record above it is drift, harmless but for the count it
// costs the next check that comes near a limit.

// UsageAudit is a project's usage record beside its count, both at
// Revision.
type UsageAudit struct {
	Project  string
	Revision int64
	Counted  Usage
	// Recorded is the record (nil: the fence holds none, nothing to
	// check).
	Recorded *Usage
}

// Below lists the resources whose record is below the count (none: the
// invariant holds).
func (a UsageAudit) Below() []string {
	if a.Recorded == nil {
		return nil
	}
	var below []string
	for _, k := range []string{Instances, Cores, RAM, ServerGroups} {
		if a.Recorded.Of(k) < a.Counted.Of(k) {
			below = append(below, fmt.Sprintf("%s recorded %d, counted %d", k, a.Recorded.Of(k), a.Counted.Of(k)))
		}
	}
	return below
}

// AuditUsage counts project at one revision and reads its usage record
// at the same revision.
func (s *Store) AuditUsage(ctx context.Context, project string) (UsageAudit, error) {
	u, rev, err := s.Count(ctx, project, "")
	if err != nil {
		return UsageAudit{}, err
	}
	a := UsageAudit{Project: project, Revision: rev, Counted: u}
	key := s.keys.QuotaFence(project)
	resp, err := s.cli.Get(ctx, key, clientv3.WithRev(rev))
	if err != nil {
		return a, fmt.Errorf("read the quota fence of %s: %w", project, err)
	}
	if len(resp.Kvs) == 1 {
		var f etcdschema.QuotaFence
		if err := etcdschema.Decode(key, resp.Kvs[0].Value, &f); err != nil {
			return a, err
		}
		if f.Usage != nil {
			a.Recorded = &Usage{Instances: f.Usage.Instances, Cores: f.Usage.Cores, RAM: f.Usage.RAM,
				ServerGroups: f.Usage.ServerGroups}
		}
	}
	return a, nil
}

// RepairUsage sets project's usage record to its count (a record found
// below it, or one that drifted far above), under the fence as a check
// that counted writes it. It reports false when the fence moved after
// the count (a create or move went in meanwhile, with its own record):
// audit again.
func (s *Store) RepairUsage(ctx context.Context, project, by string) (bool, error) {
	u, rev, err := s.Count(ctx, project, "")
	if err != nil {
		return false, err
	}
	g := s.guardCounted(project, by, u, rev, charge{})
	resp, err := s.cli.Txn(ctx).If(g.Cmps...).Then(g.Ops...).Commit()
	if err != nil {
		return false, fmt.Errorf("repair the quota usage record of %s: %w", project, err)
	}
	if resp.Succeeded {
		s.log.Info("quota usage record set from a count", "project", project, "revision", rev,
			"instances", u.Instances, "cores", u.Cores, "ram", u.RAM, "server_groups", u.ServerGroups)
	}
	return resp.Succeeded, nil
}
