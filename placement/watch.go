package placement

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/informer"
)

// load reads every placement record at one revision into a fresh index
// state and installs it. It returns that revision; the watch starts after it
// so no event is missed or applied twice. Pages are read as informer.List
// does (the next fetched while this one is decoded, on a few goroutines);
// they are applied in key order, one at a time.
func (s *Service) load(ctx context.Context) (int64, error) {
	return s.loadAt(ctx, 0)
}

// loadAt is load at revision at (0: the current one). Tests use it to
// install a list older than this service's last claim, as a re-list
// racing a claim does.
func (s *Service) loadAt(ctx context.Context, at int64) (int64, error) {
	for attempt := 0; ; attempt++ {
		st := newIndexState()
		rev, err := informer.List(ctx, s.cli, s.keys.Providers(), at, decodeProvider, func(page []informer.Event) error {
			for _, ev := range page {
				if s.loaded(ev) {
					st.putProvider(ev.Decoded.(*etcdschema.Provider), ev.Revision)
				}
			}
			return nil
		})
		if err == nil {
			err = s.sizeConsumers(ctx, st, rev)
		}
		if err == nil {
			_, err = informer.List(ctx, s.cli, s.keys.Consumers(), rev, decodeConsumer, func(page []informer.Event) error {
				for _, ev := range page {
					if s.loaded(ev) {
						st.putConsumer(ev.Decoded.(*etcdschema.Consumer), ev.Revision)
					}
				}
				return nil
			})
		}
		if errors.Is(err, rpctypes.ErrCompacted) && attempt < 5 {
			// The pinned revision was compacted mid-load: start over.
			s.log.Warn("index load hit a compaction, reloading", "revision", rev)
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("load placement index: %w", err)
		}
		st.rev = rev
		// Counted before install: once installed, the state is the
		// index's, and claims change it under the index's lock.
		providers, consumers := len(st.providers), len(st.consumers)
		s.idx.install(st)
		s.log.Debug("index loaded", "revision", rev, "providers", providers, "consumers", consumers)
		return rev, nil
	}
}

// loaded says whether a listed record was decoded; one this build cannot
// read is logged and skipped: refusing to start would take all of
// placement down.
func (s *Service) loaded(ev informer.Event) bool {
	if ev.DecodeErr != nil {
		s.log.Error("skipping unreadable placement record", "key", ev.Key, "error", ev.DecodeErr)
		return false
	}
	return true
}

// sizeConsumers sizes the consumer maps from a count at rev (etcd counts
// without reading values): a million-entry map grown by doubling rehashes
// every entry several times over and leaves the old tables to the GC.
func (s *Service) sizeConsumers(ctx context.Context, st *indexState, rev int64) error {
	resp, err := s.cli.Get(ctx, s.keys.Consumers(), clientv3.WithPrefix(), clientv3.WithCountOnly(), clientv3.WithRev(rev))
	if err != nil {
		return fmt.Errorf("count %s: %w", s.keys.Consumers(), err)
	}
	st.consumers = make(map[string]consumerEntry, resp.Count)
	st.rpConsumers = make(map[string]map[string]struct{}, len(st.providers))
	return nil
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
