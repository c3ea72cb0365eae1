package placement

import (
	"github.com/berth-project/berth/etcdschema"
)

// Read your own writes.
//
// A claim is planned from the index and compares the mod revision of
// every record it planned from. Without help, a service's own committed
// claim reaches its index only through the watch, a few milliseconds
// later, and a claim planned meanwhile on the same provider (the same
// scheduler's next instance on the best host) uses the old mod revision
// and usages and loses its compare to its own predecessor: one more read
// round trip and a second claim. kube-scheduler assumes a pod on its node
// until the informer confirms it, and Nova's HostState.consume_from_request
// adds a claim's resources to its cached host; here the assumption is
// exact, because a committed transaction's revision and every record it
// wrote are known: each record is indexed at once with that revision as
// its mod revision, as the watch will deliver it.
//
// Ordering. The index is kept per key: an entry carries the mod revision
// of its record, and a change (a watch event or an assumed write) is
// applied only when it is newer than what the index knows of that key.
// So the watch event of an assumed write is recognised as applied (not
// decoded, not counted twice), and an older event still in flight never
// replaces a newer assumed record. A consumer this service deleted leaves
// no entry to compare with; its delete is remembered (in assumed) until
// the watch has passed its revision. The index's own revision (st.rev,
// what IndexRevision and the "loaded" checks read, and what
// WaitForRevision waits for through the informer) is moved only by the
// watch and by loads: an assumed write says nothing of the other keys at
// its revision, and other services' writes at revisions up to it may not
// have been applied yet.
//
// Assumed writes are kept until the watch has passed their revision;
// a re-list (after a compaction) installs a state at its own revision, and
// the writes newer than that are applied to it again. A write whose
// outcome is unknown (an error, a cancelled caller) or that lost is never
// assumed.

// recordKey names one placement record: a provider or a consumer.
type recordKey struct {
	provider bool
	uuid     string
}

// ownWrite is one record a claim writes: a provider put, a consumer put,
// or a consumer delete (goneConsumer).
type ownWrite struct {
	provider     *etcdschema.Provider // never mutated once planned
	consumer     *etcdschema.Consumer // never mutated once planned
	goneConsumer string
}

func (w ownWrite) key() recordKey {
	switch {
	case w.provider != nil:
		return recordKey{provider: true, uuid: w.provider.UUID}
	case w.consumer != nil:
		return recordKey{uuid: w.consumer.UUID}
	}
	return recordKey{uuid: w.goneConsumer}
}

// assumedWrite is an ownWrite committed at rev, applied to the index
// before the watch delivered it.
type assumedWrite struct {
	ownWrite
	rev int64
}

// maxAssumed bounds the writes waiting for the watch: a watch that stopped
// (the service's context ended, etcd unreachable) must not make them pile
// up. Past it, claims are no longer assumed; the index then lags as it did
// before, which costs lost races, never a wrong write.
const maxAssumed = 1 << 16

// assume applies the records of a claim committed at rev to the index,
// ahead of the watch. It does nothing for an index that is not loaded (a
// store-only service: no watch would ever confirm them) or that the watch
// has already brought to rev.
func (ix *index) assume(rev int64, writes []ownWrite) {
	if len(writes) == 0 {
		return
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.st.rev == 0 || rev <= ix.st.rev || len(ix.assumed)+len(writes) > maxAssumed {
		return
	}
	if ix.assumed == nil {
		ix.assumed = map[recordKey]assumedWrite{}
	}
	for _, w := range writes {
		k := w.key()
		if ix.knownRevLocked(ix.st, k) >= rev {
			continue // a later write of this service got there first
		}
		ix.st.applyOwn(w, rev)
		ix.assumed[k] = assumedWrite{ownWrite: w, rev: rev}
	}
}

// knownRevLocked is the revision of the newest state st knows of k: its
// entry's mod revision, or the revision of a delete this service assumed;
// 0 when it knows nothing. A change at or below it is already applied or
// superseded.
func (ix *index) knownRevLocked(st *indexState, k recordKey) int64 {
	if rev, ok := st.entryRev(k); ok {
		return rev
	}
	return ix.assumedGoneRevLocked(k)
}

// assumedGoneRevLocked is the revision of this service's own delete of
// consumer k that etcd has not shown the index yet; 0 for none.
func (ix *index) assumedGoneRevLocked(k recordKey) int64 {
	if a, ok := ix.assumed[k]; ok && a.goneConsumer != "" {
		return a.rev
	}
	return 0
}

// entryRev is the mod revision of k's entry in st, if it has one.
func (st *indexState) entryRev(k recordKey) (int64, bool) {
	if k.provider {
		if e, ok := st.providers[k.uuid]; ok {
			return e.modRev, true
		}
	} else if e, ok := st.consumers[k.uuid]; ok {
		return e.modRev, true
	}
	return 0, false
}

// applyOwn indexes one of this service's writes at rev.
func (st *indexState) applyOwn(w ownWrite, rev int64) {
	switch {
	case w.provider != nil:
		st.putProvider(w.provider, rev)
	case w.consumer != nil:
		st.putConsumer(w.consumer, rev)
	default:
		st.removeConsumer(w.goneConsumer, rev)
	}
}

// confirmLocked drops the assumed writes the watch has passed: their
// events were applied or skipped as older, and no event older than them
// can come any more.
func (ix *index) confirmLocked(rev int64) {
	for k, a := range ix.assumed {
		if a.rev <= rev {
			delete(ix.assumed, k)
		}
	}
}

// reassumeLocked applies to a freshly listed state the assumed writes
// newer than its revision (committed while the list was read, or after
// it), so a re-list does not take the index back behind its own writes.
func (ix *index) reassumeLocked(st *indexState) {
	for k, a := range ix.assumed {
		if a.rev <= st.rev {
			delete(ix.assumed, k)
			continue
		}
		// The list knows no tombstones: only its entries are compared.
		if rev, _ := st.entryRev(k); rev < a.rev {
			st.applyOwn(a.ownWrite, a.rev)
		}
	}
}
