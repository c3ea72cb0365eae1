package placement

import (
	"context"
	"sync"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/internal/rawtxn"
)

// Group commit of claims.
//
// A claim is one etcd transaction: compare the mod revision of every
// record it planned from, put the new records. Under load many such
// transactions are in flight at once, and each pays etcd's fixed price
// per request (a gRPC call, a raft proposal, an apply, a response) on top
// of its few keys. The batcher sends claims that are ready at the same
// moment as ONE transaction whose operations are the claims' own
// transactions, nested: etcd evaluates each nested transaction's compares
// on its own, so every claim still commits or loses on its own exactly
// as it would alone, and they all commit at one revision. This is the
// group commit of databases (and of Nomad's plan applier): it costs a
// claim no waiting when etcd is idle — a claim goes out at once while
// fewer than maxInFlight batches are outstanding — and under load the
// claims that queued behind the in-flight batches go out together.
//
// Correctness of a batch: etcd evaluates every compare of the whole
// request on the state before any of its writes. Claims whose keys are
// disjoint commute, so the batch equals running them one after another.
// A claim therefore joins a batch only if it writes no key another member
// reads or writes, and reads no key another member writes; a claim that
// conflicts waits for the next batch (it would have raced the other
// anyway). Claims with range compares or range operations, which the
// batcher cannot check, are sent alone.
//
// The same rule holds across batches in flight: a claim that conflicts
// with a claim already sent waits until that batch is answered, rather
// than go out beside it and be ordered after it by etcd anyway. A claim
// the answer makes certain to lose (it compares the mod revision of a key
// a committed claim has just written) is not sent at all: it is answered
// stale, and its caller plans again from what the committed claim wrote
// (its committed hook has run by then: the placement index has it). So
// a scheduler's concurrent claims on its best host follow one another
// instead of racing.
//
// Claims and batches are etcd's messages as built (package rawtxn): a
// claim is one per server, and clientv3's If, OpTxn and toTxnRequest
// cloned each of its compares by reflection once more at every level.
type claimBatcher struct {
	// kv sends the transactions (rawtxn.Commit: as built when kv is a
	// rawtxn.Sender, through its clientv3.Txn otherwise).
	kv clientv3.KV

	// maxInFlight is how many batches may be outstanding at once; more
	// overlap etcd's round trips, fewer make batches larger.
	maxInFlight int
	// maxClaims bounds a batch; its nested transactions also stay within
	// etcd's per-request operation limit (maxTxnOps) and maxBytes.
	maxClaims int
	maxBytes  int

	mu       sync.Mutex
	pending  []*batchedClaim
	inFlight int
	// sentReads and sentWrites count the keys the claims in flight
	// compare and write.
	sentReads, sentWrites map[string]int
	// takeReads and takeWrites are takeLocked's scratch sets.
	takeReads, takeWrites map[string]bool

	// batches and batched count the transactions sent and the claims in
	// them (tests, and berth bench's report); stale the claims answered
	// stale without being sent.
	batches, batched, stale int64
}

// batchedClaim is one claim waiting for, or sent in, a batch.
type batchedClaim struct {
	ctx    context.Context
	cmps   []*pb.Compare
	ops    []*pb.RequestOp
	guards []*pb.Compare
	// committed, if set, runs once the claim has committed, before its
	// caller and any claim it makes stale are answered.
	committed committedHook

	// cmpKeys and opKeys, when the caller has them, are the keys of cmps
	// and of the first ops as strings: describe then makes no copies of
	// them.
	cmpKeys, opKeys []string

	reads, writes []string
	// modRevs are the claim's own "mod revision equals" compares (not
	// the guards'), and deletes the keys it deletes.
	modRevs []keyRev
	deletes map[string]bool
	// The arrays of reads, writes and modRevs for the usual claim (a
	// consumer and a provider, maybe a guard or two).
	readsBuf   [4]string
	writesBuf  [2]string
	modRevsBuf [2]keyRev
	width      int // the most compares or operations on one level
	bytes      int

	sent bool          // under the batcher's mu
	done chan struct{} // closed when the result below is set
	res  claimResult
}

// committedHook is what runs once a claim has committed: an interface
// rather than a func, so a claim's plan is its own hook and a claim makes
// no closure.
type committedHook interface {
	committed(rev int64)
}

// keyRev is a key and a mod revision a claim compares it with.
type keyRev struct {
	key string
	rev int64
}

// claimResult is a committed claim's answer: rev is the transaction's
// revision; ok false means the claim's compares failed (a lost race);
// guardFailed that the caller's guards did not hold; stale that the claim
// was not sent, as a claim committed at rev made its compares fail.
type claimResult struct {
	rev         int64
	ok          bool
	guardFailed bool
	stale       bool
	err         error
}

const (
	defaultClaimsInFlight = 4
	defaultClaimsPerBatch = 64
	// etcd refuses requests over 1.5 MiB by default; a batch stays well
	// under it whatever the server's setting.
	defaultBatchBytes = 512 << 10
)

func newClaimBatcher(kv clientv3.KV) *claimBatcher {
	return &claimBatcher{kv: kv, maxInFlight: defaultClaimsInFlight,
		maxClaims: defaultClaimsPerBatch, maxBytes: defaultBatchBytes,
		sentReads: map[string]int{}, sentWrites: map[string]int{}}
}

// commit runs one claim, batched with others when they are ready at the
// same time. Its answer is what the claim's own transaction would have
// answered, or stale when it certainly would have lost.
func (b *claimBatcher) commit(ctx context.Context, cmps []*pb.Compare, ops []*pb.RequestOp, guards []*pb.Compare) claimResult {
	return b.commitThen(ctx, cmps, nil, ops, nil, guards, nil)
}

// commitThen is commit with a hook run once the claim has committed,
// before anyone is answered (the placement index applies the claim's
// records there). cmpKeys and opKeys (either may be nil or shorter) are
// the keys of cmps and ops as strings, when the caller has them. The
// messages must not be changed until it returns.
func (b *claimBatcher) commitThen(ctx context.Context, cmps []*pb.Compare, cmpKeys []string, ops []*pb.RequestOp, opKeys []string,
	guards []*pb.Compare, committed committedHook) claimResult {
	c := &batchedClaim{ctx: ctx, cmps: cmps, cmpKeys: cmpKeys, ops: ops, opKeys: opKeys, guards: guards, committed: committed, done: make(chan struct{})}
	if !c.describe() {
		b.send([]*batchedClaim{c})
		return c.res
	}
	b.mu.Lock()
	b.pending = append(b.pending, c)
	if b.inFlight < b.maxInFlight {
		// Nothing to take when every pending claim waits for a batch in
		// flight; that batch's drain takes them when it is answered.
		if batch := b.takeLocked(); len(batch) > 0 {
			b.inFlight++
			b.mu.Unlock()
			go b.drain(batch)
		} else {
			b.mu.Unlock()
		}
	} else {
		b.mu.Unlock()
	}
	select {
	case <-c.done:
		return c.res
	case <-ctx.Done():
	}
	// Not sent yet, it is dropped. Already on its way, its outcome is
	// unknown until etcd answers, as for a transaction whose caller gave
	// up; the batch's context ends when every member's has.
	b.mu.Lock()
	if !c.sent {
		b.remove(c)
	}
	b.mu.Unlock()
	return claimResult{err: ctx.Err()}
}

// drain sends batch, then keeps sending what queued meanwhile, and frees
// its in-flight slot when nothing is left.
func (b *claimBatcher) drain(batch []*batchedClaim) {
	for len(batch) > 0 {
		b.send(batch)
		b.mu.Lock()
		b.answeredLocked(batch)
		batch = b.takeLocked()
		if len(batch) == 0 {
			b.inFlight--
		}
		b.mu.Unlock()
	}
}

// takeLocked picks the next batch from pending, oldest first, skipping
// (for the next batch) claims that conflict with one already taken.
func (b *claimBatcher) takeLocked() []*batchedClaim {
	if len(b.pending) == 0 {
		return nil
	}
	batch := make([]*batchedClaim, 0, min(len(b.pending), b.maxClaims))
	// The keys of the batch taken so far, in maps kept from one batch to
	// the next (takeLocked runs under mu).
	if b.takeReads == nil {
		b.takeReads, b.takeWrites = map[string]bool{}, map[string]bool{}
	}
	reads, writes := b.takeReads, b.takeWrites
	clear(reads)
	clear(writes)
	bytes := 0
	width := 0
	rest := b.pending[:0]
	for _, c := range b.pending {
		if c.ctx.Err() != nil {
			// Its caller gave up: it is removed by commit, or here if
			// commit has not looked yet; never sent.
			continue
		}
		// A lone claim is sent as its own plain transaction; members of
		// a batch are nested one level down, within etcd's limits. A
		// claim that conflicts with one in flight waits for its answer.
		fits := len(batch) == 0 || (len(batch) < b.maxClaims && bytes+c.bytes <= b.maxBytes &&
			len(batch)+1+max(width, c.width) <= maxTxnOps && !c.conflicts(reads, writes))
		if !fits || c.conflictsCounted(b.sentReads, b.sentWrites) {
			rest = append(rest, c)
			continue
		}
		batch = append(batch, c)
		c.sent = true
		bytes += c.bytes
		width = max(width, c.width)
		for _, k := range c.reads {
			reads[k] = true
			b.sentReads[k]++
		}
		for _, k := range c.writes {
			writes[k] = true
			b.sentWrites[k]++
		}
	}
	clear(b.pending[len(rest):])
	b.pending = rest
	return batch
}

// answeredLocked releases the keys of an answered batch and answers
// stale, unsent, every pending claim whose compares a committed member
// has made fail: it compares the mod revision of a key that member wrote
// against another revision than the one it now has (the commit's, or 0
// after a delete).
func (b *claimBatcher) answeredLocked(batch []*batchedClaim) {
	var now map[string]int64 // key -> its mod revision after the batch
	rev := int64(0)
	for _, c := range batch {
		for _, k := range c.reads {
			release(b.sentReads, k)
		}
		for _, k := range c.writes {
			release(b.sentWrites, k)
		}
		if !c.res.ok {
			continue
		}
		rev = c.res.rev
		if now == nil {
			now = map[string]int64{}
		}
		for _, k := range c.writes {
			now[k] = rev
			if c.deletes[k] {
				now[k] = 0
			}
		}
	}
	if now == nil {
		return
	}
	rest := b.pending[:0]
	for _, c := range b.pending {
		if c.staleAfter(now) {
			c.sent = true // answered: commit must not remove it again
			c.res = claimResult{rev: rev, stale: true}
			b.stale++
			close(c.done)
			continue
		}
		rest = append(rest, c)
	}
	clear(b.pending[len(rest):])
	b.pending = rest
}

func release(m map[string]int, k string) {
	if m[k] <= 1 {
		delete(m, k)
	} else {
		m[k]--
	}
}

// staleAfter says whether one of c's mod revision compares fails once
// the keys in now have those mod revisions.
func (c *batchedClaim) staleAfter(now map[string]int64) bool {
	for _, m := range c.modRevs {
		if got, ok := now[m.key]; ok && got != m.rev {
			return true
		}
	}
	return false
}

// counts returns how many transactions were sent and how many claims
// they carried.
func (b *claimBatcher) counts() (txns, claims int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.batches, b.batched
}

func (b *claimBatcher) remove(c *batchedClaim) {
	for i, p := range b.pending {
		if p == c {
			last := len(b.pending) - 1
			copy(b.pending[i:], b.pending[i+1:])
			b.pending[last] = nil
			b.pending = b.pending[:last]
			return
		}
	}
}

// conflicts says whether c cannot share a batch whose members read and
// write the given keys.
func (c *batchedClaim) conflicts(reads, writes map[string]bool) bool {
	for _, k := range c.writes {
		if reads[k] || writes[k] {
			return true
		}
	}
	for _, k := range c.reads {
		if writes[k] {
			return true
		}
	}
	return false
}

// conflictsCounted is conflicts against the keys of the claims in flight.
func (c *batchedClaim) conflictsCounted(reads, writes map[string]int) bool {
	if len(reads) == 0 && len(writes) == 0 {
		return false
	}
	for _, k := range c.writes {
		if reads[k] > 0 || writes[k] > 0 {
			return true
		}
	}
	for _, k := range c.reads {
		if writes[k] > 0 {
			return true
		}
	}
	return false
}

// describe lists the keys c reads (compares) and writes, its width and
// size; false when it has a range the batcher cannot check.
func (c *batchedClaim) describe() bool {
	c.reads = c.readsBuf[:0]
	if n := len(c.guards) + len(c.cmps); n > len(c.readsBuf) {
		c.reads = make([]string, 0, n)
	}
	for _, cmp := range c.guards {
		if len(cmp.RangeEnd) > 0 {
			return false
		}
		c.reads = append(c.reads, string(cmp.Key))
		c.bytes += len(cmp.Key) + 16
	}
	c.modRevs = c.modRevsBuf[:0]
	if len(c.cmps) > len(c.modRevsBuf) {
		c.modRevs = make([]keyRev, 0, len(c.cmps))
	}
	for i, cmp := range c.cmps {
		if len(cmp.RangeEnd) > 0 {
			return false
		}
		k := keyString(cmp.Key, c.cmpKeys, i)
		c.reads = append(c.reads, k)
		c.bytes += len(cmp.Key) + 16
		mr, ok := cmp.TargetUnion.(*pb.Compare_ModRevision)
		if ok && cmp.Target == pb.Compare_MOD && cmp.Result == pb.Compare_EQUAL {
			c.modRevs = append(c.modRevs, keyRev{key: k, rev: mr.ModRevision})
		}
	}
	c.writes = c.writesBuf[:0]
	if len(c.ops) > len(c.writesBuf) {
		c.writes = make([]string, 0, len(c.ops))
	}
	for i, op := range c.ops {
		var key, value []byte
		del := false
		switch v := op.GetRequest().(type) {
		case *pb.RequestOp_RequestPut:
			key, value = v.RequestPut.Key, v.RequestPut.Value
		case *pb.RequestOp_RequestDeleteRange:
			if len(v.RequestDeleteRange.RangeEnd) > 0 {
				return false
			}
			key, del = v.RequestDeleteRange.Key, true
		default:
			return false
		}
		k := keyString(key, c.opKeys, i)
		c.writes = append(c.writes, k)
		c.bytes += len(k) + len(value) + 16
		if del {
			if c.deletes == nil {
				c.deletes = map[string]bool{}
			}
			c.deletes[k] = true
		}
	}
	// A guarded claim nests one level deeper (guards, then the claim).
	c.width = max(len(c.cmps), len(c.ops))
	if len(c.guards) > 0 {
		c.width += max(len(c.guards), 1)
	}
	return true
}

// keyString is key as a string: known[i] when the caller gave it (and it
// is key), else a copy.
func keyString(key []byte, known []string, i int) string {
	if i < len(known) && known[i] == string(key) {
		return known[i]
	}
	return string(key)
}

// send commits batch in one transaction (a lone claim as its own plain
// transaction) and hands each member its answer.
func (b *claimBatcher) send(batch []*batchedClaim) {
	ctx, cancel := batchContext(batch)
	defer cancel()
	b.mu.Lock()
	b.batches++
	b.batched += int64(len(batch))
	b.mu.Unlock()
	if len(batch) == 1 {
		c := batch[0]
		c.res = commitOne(ctx, b.kv, c)
		c.answer()
		return
	}
	subs := make([]*pb.RequestOp, len(batch))
	for i, c := range batch {
		claim := &pb.TxnRequest{Compare: c.cmps, Success: c.ops}
		if len(c.guards) == 0 {
			subs[i] = rawtxn.Nested(claim)
		} else {
			subs[i] = rawtxn.Nested(&pb.TxnRequest{Compare: c.guards, Success: []*pb.RequestOp{rawtxn.Nested(claim)}})
		}
	}
	resp, err := rawtxn.Commit(ctx, b.kv, &pb.TxnRequest{Success: subs})
	for i, c := range batch {
		switch {
		case err != nil:
			c.res = claimResult{err: err}
		default:
			sub := resp.Responses[i].GetResponseTxn()
			c.res = claimResult{rev: resp.Header.Revision}
			if len(c.guards) == 0 {
				c.res.ok = sub.Succeeded
			} else if !sub.Succeeded {
				c.res.guardFailed = true
			} else {
				c.res.ok = sub.Responses[0].GetResponseTxn().Succeeded
			}
		}
		c.answer()
	}
}

// answer runs c's committed hook if it committed, then lets its caller
// have the result.
func (c *batchedClaim) answer() {
	if c.res.ok && c.committed != nil {
		c.committed.committed(c.res.rev)
	}
	close(c.done)
}

// commitOne is a claim's own transaction: the claim's compares, or the
// caller's guards as the outer condition and the claim as the inner one
// (so a failed guard is told apart from a lost race).
func commitOne(ctx context.Context, kv clientv3.KV, c *batchedClaim) claimResult {
	claim := &pb.TxnRequest{Compare: c.cmps, Success: c.ops}
	if len(c.guards) == 0 {
		resp, err := rawtxn.Commit(ctx, kv, claim)
		if err != nil {
			return claimResult{err: err}
		}
		return claimResult{rev: resp.Header.Revision, ok: resp.Succeeded}
	}
	resp, err := rawtxn.Commit(ctx, kv, &pb.TxnRequest{Compare: c.guards, Success: []*pb.RequestOp{rawtxn.Nested(claim)}})
	if err != nil {
		return claimResult{err: err}
	}
	if !resp.Succeeded {
		return claimResult{rev: resp.Header.Revision, guardFailed: true}
	}
	return claimResult{rev: resp.Header.Revision, ok: resp.Responses[0].GetResponseTxn().Succeeded}
}

// batchContext is the context a batch is sent with: it carries the
// first member's values and is cancelled once every member's own context
// is done, so nobody's give-up aborts the others' claims, and a batch
// nobody waits for any more is not left running.
func batchContext(batch []*batchedClaim) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(batch[0].ctx))
	// One counter and one callback shared by every member's AfterFunc
	// (a closure per member was an allocation per claim).
	bc := &batchCancel{left: len(batch), cancel: cancel}
	memberDone := bc.memberDone
	stops := make([]func() bool, 0, len(batch))
	for _, c := range batch {
		stops = append(stops, context.AfterFunc(c.ctx, memberDone))
	}
	return ctx, func() {
		for _, stop := range stops {
			stop()
		}
		cancel()
	}
}

// batchCancel cancels a batch's context when the last member's own
// context is done.
type batchCancel struct {
	mu     sync.Mutex
	left   int
	cancel context.CancelFunc
}

func (bc *batchCancel) memberDone() {
	bc.mu.Lock()
	bc.left--
	last := bc.left == 0
	bc.mu.Unlock()
	if last {
		bc.cancel()
	}
}
