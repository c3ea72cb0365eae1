package placement

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// loadPageSize bounds each range read of the initial load, so a 100,000
// provider deployment is read in pages instead of one huge response. It is
// large because etcd answers a limited range by also counting every key to
// the prefix's end: a load costs about n²/(2·loadPageSize) key visits,
// which at 5,000 made a million consumers take about a minute to load.
const loadPageSize = 50000

// load reads every placement record at one revision into a fresh index
// state and installs it. It returns that revision; the watch starts after it
// so no event is missed or applied twice.
func (s *Service) load(ctx context.Context) (int64, error) {
	for attempt := 0; ; attempt++ {
		st := newIndexState()
		rev, err := s.loadPrefix(ctx, s.keys.Providers(), 0, func(key string, val []byte, modRev int64) error {
			return st.applyProvider(key, val, modRev)
		})
		if err == nil {
			_, err = s.loadPrefix(ctx, s.keys.Consumers(), rev, func(key string, val []byte, modRev int64) error {
				return st.applyConsumer(key, val, modRev)
			})
		}
		if errors.Is(err, rpctypes.ErrCompacted) && attempt < 5 {
			// The pinned revision was compacted mid-load: start over.
			s.log.Warn("index load hit a compaction, reloading", "revision", rev)
			continue
		}
		if err != nil {
			return 0, err
		}
		st.rev = rev
		s.idx.install(st)
		s.log.Debug("index loaded", "revision", rev, "providers", len(st.providers), "consumers", len(st.consumers))
		return rev, nil
	}
}

// loadPrefix pages through prefix at revision rev (0: the current one,
// which it returns) and calls fn for every key.
func (s *Service) loadPrefix(ctx context.Context, prefix string, rev int64, fn func(string, []byte, int64) error) (int64, error) {
	end := clientv3.GetPrefixRangeEnd(prefix)
	from := prefix
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(loadPageSize)}
		if rev > 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		resp, err := s.cli.Get(ctx, from, opts...)
		if err != nil {
			return rev, fmt.Errorf("load %s: %w", prefix, err)
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		for _, kv := range resp.Kvs {
			if err := fn(string(kv.Key), kv.Value, kv.ModRevision); err != nil {
				// A record this build cannot read is logged and skipped:
				// refusing to start would take all of placement down.
				s.log.Error("skipping unreadable placement record", "key", string(kv.Key), "error", err)
			}
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return rev, nil
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

// follow applies watch events from rev+1 on, re-listing everything when the
// watch falls behind a compaction, until ctx is done.
func (s *Service) follow(ctx context.Context, rev int64) {
	backoff := 50 * time.Millisecond
	for ctx.Err() == nil {
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		s.setProgressCtx(wctx)
		wch := s.cli.Watch(wctx, s.keys.PlacementPrefix(), clientv3.WithPrefix(), clientv3.WithRev(rev+1))
		relist := false
		for resp := range wch {
			if resp.CompactRevision != 0 || errors.Is(resp.Err(), rpctypes.ErrCompacted) {
				relist = true
				break
			}
			if err := resp.Err(); err != nil {
				s.log.Warn("placement watch error, re-watching", "revision", rev, "error", err)
				break
			}
			// Events carry their own revisions; only an event-less progress
			// notification promises everything up to the header revision
			// was delivered (an unsynced watcher may send a partial batch
			// under a newer header).
			applied := rev
			if n := len(resp.Events); n > 0 {
				applied = resp.Events[n-1].Kv.ModRevision
			} else if resp.IsProgressNotify() {
				applied = resp.Header.Revision
			}
			s.idx.applyEvents(resp.Events, max(applied, rev), s.keys, s.log)
			rev = max(applied, rev)
			backoff = 50 * time.Millisecond
		}
		cancel()
		if ctx.Err() != nil {
			return
		}
		if relist {
			s.log.Warn("placement watch compacted, re-listing", "revision", rev)
			for ctx.Err() == nil {
				r, err := s.load(ctx)
				if err == nil {
					rev = r
					break
				}
				s.log.Error("placement re-list failed", "error", err)
				sleepCtx(ctx, backoff)
				backoff = min(backoff*2, 5*time.Second)
			}
			continue
		}
		sleepCtx(ctx, backoff)
		backoff = min(backoff*2, 5*time.Second)
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// eventIsDelete hides the mvccpb import from the index code.
func eventIsDelete(t mvccpb.Event_EventType) bool { return t == mvccpb.DELETE }
