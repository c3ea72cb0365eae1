package leader

import (
	"context"
	"errors"
	"time"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/quotas"
)

// QuotaIndexDuty keeps the per-project quota index complete (package
// quotas, index.go): every interval it asks whether the index is stale
// (no QuotaIndex yet, after an upgrade from a Berth without it; a
// create by an older Berth; fewer or more entries than instance
// mappings), which costs two counts and a read of the projects' fences,
// and only then builds it: every mapping read once, the missing entries
// put, the stale ones removed, QuotaIndex moved to the revision read.
// Until the first build a count reads every mapping, as before, so the
// index is never trusted before it is whole. Its writes carry the
// term's fence.
func QuotaIndexDuty(cli *clientv3.Client, keys etcdschema.Keys, interval time.Duration, id string, log hclog.Logger) Duty {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	return Duty{Name: "quota_index", Interval: interval, Run: func(ctx context.Context, f Fence) error {
		stale, why, err := quotas.IndexStale(ctx, cli, keys)
		if err != nil || !stale {
			return err
		}
		start := time.Now()
		b, err := quotas.BuildIndex(ctx, cli, keys, f.Cmp(), id)
		if errors.Is(err, quotas.ErrFenceLost) {
			return ErrNotLeader
		}
		if err != nil {
			return err
		}
		log.Info("quota index built", "reason", why, "revision", b.Revision, "added", b.Added, "removed", b.Removed,
			"took", time.Since(start).Round(time.Millisecond))
		return nil
	}}
}
