package placement

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/berth-project/berth/internal/backoff"
	"github.com/berth-project/berth/internal/loadgc"
)

// Consumers after providers: a scheduler's cold start.
//
// A candidate search reads providers only (a provider's usages are in its
// own record), and so does a claim of a new consumer, which is what a
// scheduler's claims mostly are. At 100,000 hosts the million consumers
// were about half of a scheduler's cold start on both sides of the wire
// (BenchmarkColdStart100k/process on the shared machine: 7.7 CPU s of the
// scheduler and 7.5 of its etcd with them, 3.8 and 4.3 without).
// StartDeferred installs an index with the providers alone, follows etcd
// from that revision at once, and lists the consumers afterwards into the
// live index.
//
// Correctness is the index's own per-key rule (assume.go): a change is
// applied only when it is newer than what the index knows of the key.
// The watch applies consumer events from the providers' revision on, to
// an index that does not have the listed consumers yet; a listed record
// is indexed only when the index knows no newer state of its key: no entry
// at or above its mod revision (a watch event or an assumed claim since),
// and no delete at or above it. Deletes are remembered while the list
// runs (pendingConsumers.gone), since a delete leaves no entry to compare
// with. So a key ends as the newest of what was listed and what was
// followed, whatever their order; the list may even be read at a later
// revision than the providers' (a retry after a compaction) under the
// same rule.
//
// Until the list is in, what reads consumers from the index waits for it
// (waitConsumers: the allocations of a provider, usages, a provider's
// delete), except the claim, for which the index is only a hint: a claim
// planned from the index compares the mod revision of every consumer it
// planned from, so an existing consumer the index does not have yet costs
// a lost compare and the claim's read from etcd, as a stale index always
// did.
//
// Consumers on demand: in a scheduler without the Placement API that
// hint reader is all there is, and nothing routine needs every
// consumer (the leader's orphaned-allocation sweep reads them from etcd a
// page per run, ConsumerPage). StartOnDemand lists them when first
// wanted (WaitConsumers: a provider's allocations, say), so a
// scheduler, leader or not, does not list nor hold a million consumers
// (at 100,000 hosts about 300 MB of its heap); its
// watch still indexes the consumers written since it started, which keeps
// the claim's hint good for every server it placed. Deletes are
// remembered (gone) only from the moment the list is about to be read,
// and that list is read at the current revision, which is at or above
// every delete applied before: gone holds what one list's run deletes,
// not every delete of a process that never lists.

// pendingConsumers is what an installed index state still lacks: its
// consumers are being listed into it.
type pendingConsumers struct {
	// done is closed when the list ends: complete (the state's pending is
	// then nil), replaced by a whole re-list (the index has another
	// state), or given up (err is set first).
	done chan struct{}
	err  error
	// wanted is closed by the first reader that needs the consumers
	// (want): a list on demand waits for it.
	wanted   chan struct{}
	wantOnce sync.Once
	// listing is set, under the index's lock, once the list is about to
	// be read: deletes applied before are at or below its revision.
	listing bool
	// gone is, by consumer uuid, the revision of the last delete applied
	// while the list runs (nil until listing).
	gone map[string]int64
}

func newPendingConsumers() *pendingConsumers {
	return &pendingConsumers{done: make(chan struct{}), wanted: make(chan struct{})}
}

// want says a reader needs every consumer: a list on demand starts.
func (p *pendingConsumers) want() { p.wantOnce.Do(func() { close(p.wanted) }) }

// startListing makes p remember deletes from now on; under the index's
// lock.
func (p *pendingConsumers) startListing() {
	p.listing = true
	if p.gone == nil {
		p.gone = map[string]int64{}
	}
}

// deleted records that consumer uuid was deleted at revision rev, once
// the list is being read (before, the list's revision covers it).
func (p *pendingConsumers) deleted(uuid string, rev int64) {
	if p.listing && rev > p.gone[uuid] {
		p.gone[uuid] = rev
	}
}

// errReplaced ends a deferred list whose index state was replaced by a
// state loaded whole (a re-list after a compaction): nothing to add.
var errReplaced = errors.New("placement index re-listed")

// StartDeferred is Start for a process that needs the providers first: it
// returns once the providers are indexed and followed, and lists the
// consumers into the index once after returns (nil: at once), so a
// scheduler's host manager and this index's providers load first, without
// the consumers' list on the same cores. WaitConsumers says when they are
// in. An error of after (ctx ending) leaves the consumers unlisted, and
// WaitConsumers answers it.
func (s *Service) StartDeferred(ctx context.Context, after func(context.Context) error) error {
	return s.startDeferred(ctx, after, false)
}

// StartOnDemand is StartDeferred for a process whose readers of every
// consumer may never come (a scheduler without the Placement API): the
// consumers are listed once after
// returns and a reader wants them (WaitConsumers), not before.
func (s *Service) StartOnDemand(ctx context.Context, after func(context.Context) error) error {
	return s.startDeferred(ctx, after, true)
}

func (s *Service) startDeferred(ctx context.Context, after func(context.Context) error, onDemand bool) error {
	st, rev, err := s.loadProvidersOnly(ctx, onDemand)
	if err != nil {
		return fmt.Errorf("placement start: %w", err)
	}
	st.pending = newPendingConsumers()
	var uuids map[string]string
	if !onDemand {
		// Listed at rev, the providers' revision: every delete the
		// watch applies from rev on counts.
		st.pending.startListing()
		st.pending.want()
		uuids = providerUUIDs(st)
	}
	st.rev = rev
	s.idx.install(st)
	s.log.Debug("index loaded without consumers", "revision", rev, "providers", len(st.providers), "on_demand", onDemand)
	go s.follow(ctx, rev)
	go s.loadPending(ctx, st, rev, uuids, after)
	return nil
}

// providerUUIDs is, by uuid, the uuid strings the listed consumers share
// with st's providers: a copy, since the live state's providers change
// under the index's lock while the consumers are decoded (a provider made
// since is not shared, only copied). Before st is installed, or under the
// index's lock.
func providerUUIDs(st *indexState) map[string]string {
	uuids := make(map[string]string, len(st.providers))
	for k, e := range st.providers {
		uuids[k] = e.p.UUID
	}
	return uuids
}

// loadProvidersOnly is loadAt's providers and the consumer maps (sized
// unless unsized), at the current revision.
func (s *Service) loadProvidersOnly(ctx context.Context, unsized bool) (*indexState, int64, error) {
	st, rev, err := s.listIndex(ctx, 0, false, unsized)
	if err != nil {
		return nil, 0, fmt.Errorf("load placement providers: %w", err)
	}
	return st, rev, nil
}

// loadPending lists the consumers into st, installed at rev, once after
// returns and a reader wants them (at once unless on demand: then read
// at the current revision); an attempt that fails is retried at the
// current revision (the merge rule makes any revision from rev on
// right).
func (s *Service) loadPending(ctx context.Context, st *indexState, rev int64, uuids map[string]string,
	after func(context.Context) error) {
	p := st.pending
	if after != nil {
		if err := after(ctx); err != nil {
			s.endPending(st, fmt.Errorf("placement consumers not listed: %w", err))
			return
		}
	}
	select {
	case <-p.wanted:
	case <-ctx.Done():
		s.endPending(st, fmt.Errorf("placement consumers not listed: %w", ctx.Err()))
		return
	}
	onDemand := !p.listing
	var sized map[string]consumerEntry
	if onDemand {
		// Its map was left unsized (a scheduler that never lists has no
		// use for a million-entry table): sized now from a count, made
		// outside the index's lock (0.35 s at a million).
		n, err := s.countConsumers(ctx, 0)
		if err != nil {
			s.log.Warn("counting placement consumers failed; listing them into an unsized map", "error", err)
		}
		if n > 0 {
			sized = make(map[string]consumerEntry, n)
		}
	}
	s.idx.mu.Lock()
	replaced := s.idx.st != st
	if onDemand && !replaced {
		// Read at the current revision, at or above every delete the
		// watch applied before now.
		p.startListing()
		rev = 0
		if sized != nil {
			maps.Copy(sized, st.consumers) // those followed since the start
			st.consumers = sized
		}
	}
	s.idx.mu.Unlock()
	if replaced {
		s.endPending(st, nil)
		return
	}
	if uuids == nil {
		// On demand: the providers as they are now, maybe long after
		// the start (one copy under the read lock).
		s.idx.mu.RLock()
		uuids = providerUUIDs(st)
		s.idx.mu.RUnlock()
	}
	start := time.Now()
	// As the stack does for the loads it starts (the list allocates what
	// the index keeps, and the GC would otherwise let the heap double).
	defer loadgc.Tighten()()
	provider := func(uuid []byte) (string, bool) {
		u, ok := uuids[string(uuid)]
		return u, ok
	}
	wait := backoff.Default()
	for {
		err := s.listConsumerPages(ctx, rev, provider, func(page []listedConsumer) error {
			s.idx.mu.Lock()
			defer s.idx.mu.Unlock()
			if s.idx.st != st {
				return errReplaced
			}
			for _, lc := range page {
				s.idx.putListedConsumerLocked(st, lc)
			}
			return nil
		})
		if errors.Is(err, errReplaced) {
			s.endPending(st, nil)
			return
		}
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			s.endPending(st, fmt.Errorf("placement consumers not listed: %w", ctx.Err()))
			return
		}
		s.log.Warn("listing placement consumers failed; listing them again", "error", err)
		rev = 0 // a compacted revision included: the merge rule holds at any later one
		if !wait.Wait(ctx) {
			s.endPending(st, fmt.Errorf("placement consumers not listed: %w", ctx.Err()))
			return
		}
	}
	s.idx.mu.Lock()
	consumers := len(st.consumers)
	if s.idx.st == st {
		st.pending = nil
	}
	s.idx.mu.Unlock()
	close(p.done)
	s.log.Debug("index consumers loaded", "consumers", consumers, "took", time.Since(start))
}

// putListedConsumerLocked indexes a consumer the pending list read into
// st unless st knows a newer state of its key (knownRevLocked, or a
// delete the list's pending remembers), with one lookup of the key in
// st.consumers where knownRevLocked and putConsumer made two: that map
// holds a million consumers at 100,000 hosts, each lookup a cache miss.
func (ix *index) putListedConsumerLocked(st *indexState, lc listedConsumer) {
	uuid := lc.c.UUID
	if st.pending.gone[uuid] >= lc.modRev {
		return
	}
	old, indexed := st.consumers[uuid]
	switch {
	case indexed && old.modRev >= lc.modRev:
		return
	case indexed:
		st.unlinkConsumer(old.c)
	default:
		if ix.assumedGoneRevLocked(recordKey{uuid: uuid}) >= lc.modRev {
			return
		}
	}
	st.consumers[uuid] = consumerEntry(lc)
	st.linkConsumer(lc.c)
}

// endPending ends st's pending list without completing it: err is what
// WaitConsumers answers while st is the index's state (nil: it was
// replaced by a state loaded whole).
func (s *Service) endPending(st *indexState, err error) {
	s.idx.mu.Lock()
	p := st.pending
	p.err = err
	s.idx.mu.Unlock()
	close(p.done)
}

// WaitConsumers returns once the index holds every consumer (at once for
// a service started with Start), or the error that left them unlisted.
func (s *Service) WaitConsumers(ctx context.Context) error {
	for {
		s.idx.mu.RLock()
		p := s.idx.st.pending
		s.idx.mu.RUnlock()
		if p == nil {
			return nil
		}
		p.want()
		select {
		case <-p.done:
		case <-ctx.Done():
			return fmt.Errorf("wait for placement consumers: %w", ctx.Err())
		}
		s.idx.mu.RLock()
		current := s.idx.st.pending == p
		s.idx.mu.RUnlock()
		if current && p.err != nil {
			return p.err
		}
	}
}
