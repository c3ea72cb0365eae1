package placement

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/informer"
)

// load reads every placement record at one revision into a fresh index
// state and installs it: at Start, and when the informer re-lists after a
// compaction. It returns that revision; the watch starts after it so no
// event is missed or applied twice. Pages are read with informer.List
// (the next fetched while this one is decoded, on a few goroutines);
// they are applied in key order, one at a time.
func (s *Service) load(ctx context.Context) (int64, error) {
	return s.loadAt(ctx, 0)
}

// loadAt is load at revision at (0: the current one). Tests use it to
// install a list older than this service's last claim, as a re-list
// racing a claim does.
func (s *Service) loadAt(ctx context.Context, at int64) (int64, error) {
	st, rev, err := s.listIndex(ctx, at, true, false)
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

// listIndex reads the providers at revision at (0: the current one)
// into a fresh index state with its consumer maps sized (unless
// unsized: a list on demand sizes them when it starts), and with
// consumers the consumers too, starting over (up to 5 times) when that
// revision is compacted mid-list.
func (s *Service) listIndex(ctx context.Context, at int64, consumers, unsized bool) (*indexState, int64, error) {
	for attempt := 0; ; attempt++ {
		st, rev, err := s.listProviders(ctx, at)
		if err == nil && !unsized {
			err = s.sizeConsumers(ctx, st, rev)
		}
		if err == nil && consumers {
			err = s.listConsumers(ctx, st, rev)
		}
		if isCompacted(err) && attempt < 5 {
			// The pinned revision was compacted mid-load: start over.
			s.log.Warn("index load hit a compaction, reloading", "revision", rev)
			continue
		}
		return st, rev, err
	}
}

// isCompacted says whether err is etcd's answer that a list's revision
// was compacted.
func isCompacted(err error) bool { return errors.Is(err, rpctypes.ErrCompacted) }

// listProviders reads every provider at revision at (0: the current
// one) into a fresh index state, and returns it with the revision read.
func (s *Service) listProviders(ctx context.Context, at int64) (*indexState, int64, error) {
	// A count at the list's revision sizes the state (reserve), and pins
	// that revision (List would otherwise read it with a Get of its own).
	opts := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithCountOnly()}
	if at > 0 {
		opts = append(opts, clientv3.WithRev(at))
	}
	resp, err := s.cli.Get(ctx, s.keys.Providers(), opts...)
	if err != nil {
		return nil, 0, fmt.Errorf("count %s: %w", s.keys.Providers(), err)
	}
	if at == 0 {
		at = resp.Header.Revision
	}
	st := newIndexState()
	st.reserve(int(resp.Count))
	rev, err := informer.List(ctx, s.cli, s.keys.Providers(), at, decodeProvider, func(page []informer.Event) error {
		for _, ev := range page {
			if s.loaded(ev) {
				p := ev.Decoded.(*etcdschema.Provider)
				st.putProvider(p, ev.Revision)
				st.noteCreated(p.UUID, ev.CreateRevision)
			}
		}
		return nil
	})
	st.slotsHint = 0 // later classes are made for the slots there are
	return st, rev, err
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
	n, err := s.countConsumers(ctx, rev)
	if err != nil {
		return err
	}
	st.consumers = make(map[string]consumerEntry, n)
	st.rpConsumers = make(map[string]*consumerSet, len(st.providers))
	return nil
}

// countConsumers counts the consumers at rev (0: the current revision).
func (s *Service) countConsumers(ctx context.Context, rev int64) (int, error) {
	opts := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithCountOnly()}
	if rev > 0 {
		opts = append(opts, clientv3.WithRev(rev))
	}
	resp, err := s.cli.Get(ctx, s.keys.Consumers(), opts...)
	if err != nil {
		return 0, fmt.Errorf("count %s: %w", s.keys.Consumers(), err)
	}
	return int(resp.Count), nil
}

// indexFeed is the index as its informer's RawHandler (NewRaw): the
// informer runs the watch, the re-list after a compaction and
// WaitForRevision; the index loads itself (load: two sub-prefixes of the
// watched one, maps sized from a count, its own writes assumed again) and
// applies etcd's events on its byte-key path (applyEvents), with the
// revision a progress notification brings for writes outside the prefix.
type indexFeed struct{ s *Service }

func (f indexFeed) Load(ctx context.Context) (int64, error) { return f.s.load(ctx) }

func (f indexFeed) ApplyRaw(evs []*clientv3.Event, rev int64) {
	f.s.idx.applyEvents(evs, rev, f.s.keys, f.s.log)
}

// follow keeps the index in step with etcd from rev, the revision it was
// loaded at, until ctx is done.
func (s *Service) follow(ctx context.Context, rev int64) { s.inf.RunFrom(ctx, rev) }

// eventIsDelete hides the mvccpb import from the index code.
func eventIsDelete(t mvccpb.Event_EventType) bool { return t == mvccpb.DELETE }
