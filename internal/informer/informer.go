// Package informer keeps a consumer in step with an etcd prefix: a paginated
// list, then a watch from the list's revision so no change falls in between,
// and a fresh list whenever the watch is compacted away or breaks. It is the
// one way Berth's caches (host manager, queues, agents, the placement index)
// follow etcd, and List the one way to read a prefix at one revision (the
// debug dump too). List, and a handler's list, read etcd's RangeStream
// chunks in place (ListKVs: no protobuf message per key), which a reader
// of millions of keys can use directly (the placement index's consumers).
//
// Most handlers get Events (New, Handler). The placement index, which
// every scheduler feeds with every claim's writes, gets etcd's own events
// and lists itself (NewRaw, RawHandler); both share the watch loop, the
// re-list after a compaction, WaitForRevision and its progress requests.
package informer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/metadata"

	"github.com/berth-project/berth/internal/backoff"
)

// PageSize is how many keys one list request reads. etcd counts every key
// from a page's start to the prefix's end to answer a limited range (its
// total count), so a list costs about n²/(2·PageSize) key visits: at 5,000
// a 1.3M-key prefix took a minute to list, at 50,000 it is ten times less.
// A page of 50,000 values of a few hundred bytes is ~15 MB, well inside
// gRPC's message limit.
const PageSize = 50000

// Event is one change under the prefix.
type Event struct {
	Key string
	// Value is nil for deletes, and in a Reset's events once decoded
	// (Decoder); a watch's events and a paged list's carry etcd's bytes
	// even when decoded (not copied: read, never modify).
	Value    []byte
	Deleted  bool
	Revision int64 // mod revision of the change
	// CreateRevision is the revision that created the key (0 for
	// deletes): its creation order among the prefix's keys.
	CreateRevision int64
	// Decoded and DecodeErr are the handler's Decoder's result for Value
	// (never set for deletes or without a Decoder).
	Decoded   any
	DecodeErr error
}

// Handler receives the state of the prefix. A Handler that is also a
// Decoder gets its values decoded before Reset and Apply see them.
type Handler interface {
	// Reset replaces everything known with the listed keys (at startup and
	// after a re-list). Events follow from rev+1.
	Reset(kvs []Event, rev int64)
	// Apply receives the events of one watch response, in order.
	Apply(events []Event)
}

// PagedResetter is an optional interface of a Handler whose state is
// large: its list is handed over chunk by chunk instead of in one Reset,
// so the listed events are garbage once applied rather than all held
// until the end (at 100,000 hosts the host manager's 1.4M events were
// ~200 MB of the cold start's peak heap).
//
// The events are borrowed: their Key and Value are the bytes etcd sent,
// in a buffer the list reuses for the next chunk once page returns, so a
// list of millions of keys makes no string per key (the host manager's
// 1.4M keys were the largest allocation of a scheduler's cold start
// before it is ready). Value is set whether the handler's Decoder
// decoded the key or not (nil from Decode: the handler reads the value
// itself, in page).
type PagedResetter interface {
	// ResetPaged replaces everything known with the keys listed at rev.
	// It calls list once; list hands every chunk to page, in key order,
	// and returns the list's error. The chunk's slice and the bytes its
	// events' Key and Value alias are reused for the next one once page
	// returns: page copies what it keeps of a key or a value (strings.Clone),
	// never the events or the slice. On an error ResetPaged must keep
	// what it knew before and return the error (the informer lists again).
	ResetPaged(rev int64, list func(page func([]Event)) error) error
}

// RawHandler is what NewRaw feeds: a consumer that follows a prefix on
// its own terms, because the informer's Events would cost it what it
// exists to save. The placement index matches keys and looks up uuids in
// the bytes etcd delivered, decodes only the records it does not hold
// already, and lists two sub-prefixes of the one it watches (providers
// and consumers, not the names and traits beside them) into maps sized
// from a count. So it takes the watch's events as etcd delivers them,
// and lists itself (with List, at one revision) when the informer needs
// a list.
type RawHandler interface {
	// Load replaces everything known with a list at one revision, and
	// returns that revision; events follow from it + 1. On an error it
	// must keep what it knew (the informer loads again, with back-off).
	Load(ctx context.Context) (rev int64, err error)
	// ApplyRaw receives the events of one watch response, in order, and
	// the revision the prefix is now known up to: the last event's, or
	// an event-less progress notification's (events then empty). The
	// events are etcd's, not copied: ApplyRaw must not modify them.
	ApplyRaw(events []*clientv3.Event, rev int64)
}

// Informer follows one prefix.
type Informer struct {
	cli    *clientv3.Client
	prefix string
	h      Handler    // nil for a raw informer
	raw    RawHandler // set by NewRaw, instead of h
	log    hclog.Logger
	synced chan struct{}
	// ownStream: watch on a gRPC stream of its own (OwnStream).
	ownStream bool
	// resume: watch again from the revision reached after a watch breaks
	// (Resume).
	resume bool
	// putsOnly: the watch leaves deletes out (PutsOnly).
	putsOnly bool
	// end, when set, is where the followed keys end (Until): they are
	// [prefix, end) instead of those under prefix.
	end string
	// oneKey: prefix is the one key followed (Key), watched exactly.
	oneKey bool

	// revMu guards the applied revision, the channel closed when it moves,
	// and the current watch's context (for progress requests). revCh is
	// made only when a waiter asks for it (nil otherwise): every
	// scheduler's informers follow every write, mostly with no one
	// waiting, and a channel made and closed per watch response was
	// garbage for nothing.
	revMu       sync.Mutex
	rev         int64
	revCh       chan struct{}
	progressCtx context.Context
	// watchCancel ends the current watch (a stalled one, see
	// WaitForRevision); requestProgress, when set, stands in for
	// cli.RequestProgress (a test drops some).
	watchCancel     context.CancelFunc
	requestProgress func(context.Context) error
	// watchSince is when the current watch was made: a waiter ends it as
	// stalled only once it is stallAfter old, so that many waiters, each
	// on its own clock, do not end a new watch before it syncs.
	watchSince time.Time
	// stallStream is the gRPC stream key the informer watches on after
	// its first stall (empty before), one no other watch shares.
	stallStream string
}

// stallStreams numbers the streams stalled informers move to, so that no
// two informers share one (two informers of one prefix on one client
// would, keyed by the prefix).
var stallStreams atomic.Int64

// stallAfter is how long a waiter lets an informer's revision stand
// still, progress asked for every 100 ms, before it has the watch made
// again on a gRPC stream of its own, from the revision reached.
//
// Why a stream of its own: etcd answers a progress request only when
// every watcher on the request's stream has caught up and none starts
// after the store's revision (watchableStore.progressIfSync). Informers
// without OwnStream share one stream per client, so one watch made "from
// now" (a list's revision + 1) with nothing written after it holds back
// every progress notification on the stream until the next write, which
// on an idle system may not come: seen in e2e as a dev's placement index
// 4 revisions behind for a minute, every Placement read failing its
// sync, and watching again on the same stream did not help
// (TestWaitForRevisionPastAWatcherFromTheFuture). Alone on its stream,
// the informer's watcher starts at most at the revision a waiter wants,
// which etcd has, so its progress requests are answered once it syncs.
// Its stream costs etcd two goroutines and a buffer, only for informers
// that stalled.
const stallAfter = 3 * time.Second

// Option changes how an informer follows its prefix.
type Option func(*Informer)

// OwnStream gives the informer's watch a gRPC stream of its own (see
// watchContext). For the few prefixes that carry most of a process's
// events: every stream costs etcd two goroutines and a buffer, so an
// agent's light informers stay on the shared one.
func OwnStream() Option { return func(in *Informer) { in.ownStream = true } }

// Resume makes the informer watch again from the revision its handler
// has reached when a watch breaks for any reason but a compaction (after
// a back-off), instead of listing again. For a handler whose list is the
// heaviest read its process makes (the placement index: every provider
// and consumer), so an etcd leader election does not cost a cold start.
// A compaction still lists again: the events in between are gone.
func Resume() Option { return func(in *Informer) { in.resume = true } }

// PutsOnly has etcd leave deletes out of the informer's watch
// (clientv3.WithFilterDelete): for a Handler whose Apply does nothing
// with a deleted key, so that etcd neither encodes nor sends, nor the
// informer decodes, an event it would drop. An agent's casts are the
// case: every build's outcome deletes its cast, one event per server
// booted that the agent skipped. A re-list still hands Reset what exists
// (the deletes are in it), and WaitForRevision still reaches a revision
// that only deleted, through a progress notification. A handler that
// forgets a key on its delete (a queue, a cache) must not use it.
func PutsOnly() Option { return func(in *Informer) { in.putsOnly = true } }

// Until has the informer follow the keys from its prefix up to end
// (exclusive) instead of the keys under the prefix: for a consumer of a
// few neighbouring keys and prefixes (an agent's service record and its
// instance info, which sort next to each other under the host's prefix)
// that would otherwise watch each on a watcher of its own. Every
// watcher is memory in etcd for as long as the consumer runs, and a
// fleet of 100,000 agents holds 100,000 per key it follows. The range is
// listed with plain paged reads (not List's stream): it is meant to be
// small. Not for a PagedResetter or a raw handler.
func Until(end string) Option { return func(in *Informer) { in.end = end } }

// Key has the informer follow the one key its prefix names, on an
// exact-key watcher: for a consumer of a single record outside its other
// keys' range (an agent's host mapping). etcd keeps an exact key's
// watchers in a map by key; a range's, even one of a single key, in an
// interval tree that every write of any key is looked up in. Not for a
// PagedResetter or a raw handler.
func Key() Option {
	return func(in *Informer) { in.oneKey, in.end = true, in.prefix+"\x00" }
}

// rangeOpt is the clientv3 option that makes a read or watch of
// in.prefix cover what the informer follows.
func (in *Informer) rangeOpt() clientv3.OpOption {
	if in.oneKey {
		return func(*clientv3.Op) {} // the key alone
	}
	if in.end != "" {
		return clientv3.WithRange(in.end)
	}
	return clientv3.WithPrefix()
}

// New returns an informer for prefix that feeds h.
func New(cli *clientv3.Client, prefix string, h Handler, log hclog.Logger, opts ...Option) *Informer {
	in := &Informer{cli: cli, prefix: prefix, h: h, log: log, synced: make(chan struct{})}
	for _, o := range opts {
		o(in)
	}
	return in
}

// NewRaw returns an informer for prefix that feeds h etcd's events, and
// has h load the prefix itself.
func NewRaw(cli *clientv3.Client, prefix string, h RawHandler, log hclog.Logger, opts ...Option) *Informer {
	in := &Informer{cli: cli, prefix: prefix, raw: h, log: log, synced: make(chan struct{})}
	for _, o := range opts {
		o(in)
	}
	return in
}

// setRev records that everything up to rev has been handed to the handler.
func (in *Informer) setRev(rev int64) {
	in.revMu.Lock()
	defer in.revMu.Unlock()
	if rev > in.rev {
		in.rev = rev
		if in.revCh != nil {
			close(in.revCh)
			in.revCh = nil
		}
	}
}

// WaitForRevision returns once the handler has seen every change under the
// prefix up to etcd revision rev: read-your-writes for a caller that knows
// the revision of something it wrote or read. Revisions written outside
// the prefix produce no events, so while waiting it asks etcd for progress
// notifications, which carry the store revision once the watch has caught
// up.
func (in *Informer) WaitForRevision(ctx context.Context, rev int64) error {
	var tick *time.Timer // made on the first wait: mostly the revision is there
	defer func() {
		if tick != nil {
			tick.Stop()
		}
	}()
	var seen int64 // the revision when it last moved, at moved
	var moved time.Time
	for {
		in.revMu.Lock()
		cur, pctx, cancelWatch, since := in.rev, in.progressCtx, in.watchCancel, in.watchSince
		if cur >= rev {
			in.revMu.Unlock()
			return nil
		}
		if in.revCh == nil {
			in.revCh = make(chan struct{})
		}
		ch := in.revCh
		in.revMu.Unlock()
		if now := time.Now(); cur != seen || moved.IsZero() {
			seen, moved = cur, now
		} else if pctx != nil && pctx.Err() == nil && now.Sub(moved) >= stallAfter && now.Sub(since) >= stallAfter {
			// pctx is the watch's own context: ended already, another
			// waiter has had the watch made again.
			in.log.Warn("watch answered no progress request while a reader waited, watching again",
				"prefix", in.prefix, "revision", cur, "want", rev, "waited", now.Sub(moved).Round(time.Millisecond))
			in.revMu.Lock()
			if in.stallStream == "" {
				in.stallStream = fmt.Sprintf("%s#stalled-%d", in.prefix, stallStreams.Add(1))
			}
			in.revMu.Unlock()
			cancelWatch()
			moved = now
		}
		if pctx != nil && pctx.Err() == nil {
			request := in.cli.RequestProgress
			if in.requestProgress != nil {
				request = in.requestProgress
			}
			if err := request(pctx); err != nil && pctx.Err() == nil {
				in.log.Debug("watch progress request failed", "prefix", in.prefix, "error", err)
			}
		}
		if tick == nil {
			tick = time.NewTimer(100 * time.Millisecond)
		} else {
			tick.Reset(100 * time.Millisecond)
		}
		select {
		case <-ch:
		case <-tick.C:
		case <-ctx.Done():
			return fmt.Errorf("wait for %s to reach revision %d (at %d): %w", in.prefix, rev, cur, ctx.Err())
		}
	}
}

// Synced is closed once the first list has been handed to the handler.
func (in *Informer) Synced() <-chan struct{} { return in.synced }

// WaitSynced blocks until the first list is applied or ctx ends.
func (in *Informer) WaitSynced(ctx context.Context) error {
	select {
	case <-in.synced:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("wait for %s to load: %w", in.prefix, ctx.Err())
	}
}

// Run lists and watches until ctx ends. It never gives up on etcd: errors
// are logged and retried with back-off, since every long-running piece must
// survive its peers (etcd included) restarting.
func (in *Informer) Run(ctx context.Context) { in.run(ctx, 0) }

// RunFrom is Run for a handler that already holds the prefix as of rev:
// a RawHandler whose first Load its caller made, to see its error (the
// placement service's Start). Synced is closed at once, and the first
// watch starts from rev+1.
func (in *Informer) RunFrom(ctx context.Context, rev int64) {
	in.setRev(rev)
	in.run(ctx, rev)
}

// run lists (unless from, the revision the handler holds, is set) and
// watches until ctx ends.
func (in *Informer) run(ctx context.Context, from int64) {
	backoff := backoff.Default()
	rev, listed, first := from, from > 0, true
	for ctx.Err() == nil {
		if !listed {
			r, err := in.list(ctx)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				in.log.Warn("list failed, retrying", "prefix", in.prefix, "error", err, "backoff", backoff.Current())
				backoff.Wait(ctx)
				continue
			}
			backoff.Reset()
			rev, listed = r, true
		}
		if first {
			close(in.synced)
			first = false
		}
		delivered, err := in.watch(ctx, rev)
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, errStalled) {
			// The events up to the revision reached were applied, so the
			// watch is made again from there at once, on its own stream,
			// whatever Resume says.
			rev = in.revision()
			in.log.Debug("stalled watch ended, watching again on a stream of its own", "prefix", in.prefix,
				"revision", rev)
			continue
		}
		if in.resume && !errors.Is(err, rpctypes.ErrCompacted) {
			// The events up to the revision reached were applied; a new
			// watch from there misses none.
			if delivered {
				backoff.Reset()
			}
			rev = in.revision()
			in.log.Debug("watch ended, watching again", "prefix", in.prefix, "revision", rev, "error", err,
				"backoff", backoff.Current())
			backoff.Wait(ctx)
			continue
		}
		in.log.Debug("watch ended, re-listing", "prefix", in.prefix, "error", err)
		listed = false
	}
}

// revision is the revision everything up to which the handler has seen.
func (in *Informer) revision() int64 {
	in.revMu.Lock()
	defer in.revMu.Unlock()
	return in.rev
}

// list reads the prefix at one revision (pages fetched while the last is
// decoded, see List) and hands it to the handler's Reset (or page by page
// to its ResetPaged).
//
// The events are gathered into one slice sized from a count at the
// list's revision (etcd counts without reading values), each page copied
// in and dropped as it arrives. Keeping the pages until the end and then
// joining them held every event twice at the end of a cold start (1.4M
// host keys: ~270 MB of events), just when the heap peaks.
func (in *Informer) list(ctx context.Context) (int64, error) {
	if in.raw != nil {
		rev, err := in.raw.Load(ctx)
		if err != nil {
			return 0, err
		}
		in.setRev(rev)
		return rev, nil
	}
	var decode DecodeFunc
	if d, ok := in.h.(Decoder); ok {
		decode = d.Decode
	}
	pr, paged := in.h.(PagedResetter)
	opts := []clientv3.OpOption{in.rangeOpt(), clientv3.WithCountOnly()}
	if paged {
		opts = nil // only the revision: a read of the prefix's own key costs nothing
	}
	resp, err := in.cli.Get(ctx, in.prefix, opts...)
	if err != nil {
		return 0, fmt.Errorf("count %s: %w", in.prefix, err)
	}
	rev := resp.Header.Revision
	if paged {
		if err := pr.ResetPaged(rev, func(page func([]Event)) error {
			_, err := listEvents(ctx, in.cli, in.prefix, rev, decode, true, func(p []Event) error {
				page(p)
				return nil
			})
			return err
		}); err != nil {
			return 0, err
		}
		in.setRev(rev)
		return rev, nil
	}
	all := make([]Event, 0, resp.Count)
	add := func(page []Event) error {
		all = append(all, page...)
		return nil
	}
	if in.end != "" {
		err = listRange(ctx, in.cli, in.prefix, in.end, rev, decode, add)
	} else {
		_, err = List(ctx, in.cli, in.prefix, rev, decode, add)
	}
	if err != nil {
		return 0, err
	}
	in.h.Reset(all, rev)
	in.setRev(rev)
	return rev, nil
}

// streamKey is the gRPC metadata key that gives an informer's watch a
// stream of its own (OwnStream, watchContext).
const streamKey = "berth-watch-stream"

// watchContext is the context an informer watches with: the leader
// required, and with OwnStream a gRPC stream of its own. The etcd client
// puts every watch whose context carries the same metadata on one stream,
// and etcd queues a stream's responses in one buffer of 128 (mvcc
// chanBufLen). When that buffer is full on a notification, every watcher
// of the stream is set aside and later caught up by reading the whole
// revision range back from the backend, under the lock every write takes
// to notify watchers. A scheduler's seven informers and its placement
// index shared one stream: a stall of a few tens of milliseconds in a
// busy process sent them all to the backend together, about 5 % of their
// events (a tenth to a third of the superconductor queue's) at 3
// schedulers. On streams of their own the busy ones each have the buffer
// to themselves, and a burst on one prefix does not set the others aside.
//
// After a stall (stallAfter) the informer watches on a stream no other
// watch shares, whatever OwnStream says.
func (in *Informer) watchContext(ctx context.Context) context.Context {
	ctx = clientv3.WithRequireLeader(ctx)
	in.revMu.Lock()
	stream := in.stallStream
	in.revMu.Unlock()
	switch {
	case stream != "":
		ctx = metadata.AppendToOutgoingContext(ctx, streamKey, stream)
	case in.ownStream:
		ctx = metadata.AppendToOutgoingContext(ctx, streamKey, in.prefix)
	}
	return ctx
}

// errStalled ends a watch a waiter ended as stalled (WaitForRevision).
var errStalled = errors.New("watch ended as stalled by a waiter")

// watch applies the events after rev until the watch breaks or ctx ends.
// delivered says whether any response came (Resume's back-off starts
// over after one). Ended by a waiter (its context ended, ctx not), it
// returns errStalled.
func (in *Informer) watch(ctx context.Context, rev int64) (delivered bool, err error) {
	wctx, cancel := context.WithCancel(in.watchContext(ctx))
	defer cancel()
	in.revMu.Lock()
	in.progressCtx, in.watchCancel, in.watchSince = wctx, cancel, time.Now()
	in.revMu.Unlock()
	dec, _ := in.h.(Decoder)
	opts := []clientv3.OpOption{in.rangeOpt(), clientv3.WithRev(rev + 1)}
	if in.putsOnly {
		opts = append(opts, clientv3.WithFilterDelete())
	}
	wch := in.cli.Watch(wctx, in.prefix, opts...)
	for resp := range wch {
		if err := resp.Err(); err != nil {
			if errors.Is(err, rpctypes.ErrCompacted) {
				return delivered, fmt.Errorf("watch %s compacted at %d: %w", in.prefix, resp.CompactRevision, err)
			}
			if wctx.Err() != nil && ctx.Err() == nil {
				return delivered, errStalled
			}
			return delivered, fmt.Errorf("watch %s: %w", in.prefix, err)
		}
		delivered = true
		if len(resp.Events) == 0 {
			// Only an event-less progress notification promises that
			// everything up to its header revision was delivered (an
			// unsynced watcher may send a partial batch under a newer
			// header).
			if resp.IsProgressNotify() {
				if in.raw != nil {
					in.raw.ApplyRaw(nil, resp.Header.Revision)
				}
				in.setRev(resp.Header.Revision)
			}
			continue
		}
		if in.raw != nil {
			last := resp.Events[len(resp.Events)-1].Kv.ModRevision
			in.raw.ApplyRaw(resp.Events, last)
			in.setRev(last)
			continue
		}
		evs := make([]Event, 0, len(resp.Events))
		for _, e := range resp.Events {
			ev := Event{Key: string(e.Kv.Key), Revision: e.Kv.ModRevision, CreateRevision: e.Kv.CreateRevision}
			if e.Type == mvccpb.DELETE {
				ev.Deleted = true
			} else {
				ev.Value = e.Kv.Value
				if dec != nil {
					ev.Decoded, ev.DecodeErr = dec.Decode(ev.Key, e.Kv.Value)
				}
			}
			evs = append(evs, ev)
		}
		in.h.Apply(evs)
		in.setRev(evs[len(evs)-1].Revision)
	}
	if wctx.Err() != nil && ctx.Err() == nil {
		return delivered, errStalled
	}
	return delivered, ctx.Err()
}
