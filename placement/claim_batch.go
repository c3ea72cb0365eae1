package placement

import (
	"context"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"
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
type claimBatcher struct {
	txn func(ctx context.Context) clientv3.Txn

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

	// batches and batched count the transactions sent and the claims in
	// them (tests, and berth bench's report).
	batches, batched int64
}

// batchedClaim is one claim waiting for, or sent in, a batch.
type batchedClaim struct {
	ctx    context.Context
	cmps   []clientv3.Cmp
	ops    []clientv3.Op
	guards []clientv3.Cmp

	reads, writes []string
	width         int // the most compares or operations on one level
	bytes         int

	sent bool          // under the batcher's mu
	done chan struct{} // closed when the result below is set
	res  claimResult
}

// claimResult is a committed claim's answer: rev is the transaction's
// revision; ok false means the claim's compares failed (a lost race);
// guardFailed that the caller's guards did not hold.
type claimResult struct {
	rev         int64
	ok          bool
	guardFailed bool
	err         error
}

const (
	defaultClaimsInFlight = 4
	defaultClaimsPerBatch = 64
	// etcd refuses requests over 1.5 MiB by default; a batch stays well
	// under it whatever the server's setting.
	defaultBatchBytes = 512 << 10
)

func newClaimBatcher(txn func(ctx context.Context) clientv3.Txn) *claimBatcher {
	return &claimBatcher{txn: txn, maxInFlight: defaultClaimsInFlight,
		maxClaims: defaultClaimsPerBatch, maxBytes: defaultBatchBytes}
}

// commit runs one claim, batched with others when they are ready at the
// same time. Its answer is what the claim's own transaction would have
// answered.
func (b *claimBatcher) commit(ctx context.Context, cmps []clientv3.Cmp, ops []clientv3.Op, guards []clientv3.Cmp) claimResult {
	c := &batchedClaim{ctx: ctx, cmps: cmps, ops: ops, guards: guards, done: make(chan struct{})}
	if !c.describe() {
		b.send([]*batchedClaim{c})
		return c.res
	}
	b.mu.Lock()
	b.pending = append(b.pending, c)
	if b.inFlight < b.maxInFlight {
		b.inFlight++
		batch := b.takeLocked()
		b.mu.Unlock()
		go b.drain(batch)
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
	var batch []*batchedClaim
	reads := map[string]bool{}
	writes := map[string]bool{}
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
		// a batch are nested one level down, within etcd's limits.
		fits := len(batch) == 0 || (len(batch) < b.maxClaims && bytes+c.bytes <= b.maxBytes &&
			len(batch)+1+max(width, c.width) <= maxTxnOps && !c.conflicts(reads, writes))
		if !fits {
			rest = append(rest, c)
			continue
		}
		batch = append(batch, c)
		c.sent = true
		bytes += c.bytes
		width = max(width, c.width)
		for _, k := range c.reads {
			reads[k] = true
		}
		for _, k := range c.writes {
			writes[k] = true
		}
	}
	clear(b.pending[len(rest):])
	b.pending = rest
	return batch
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

// describe lists the keys c reads (compares) and writes, its width and
// size; false when it has a range the batcher cannot check.
func (c *batchedClaim) describe() bool {
	for _, set := range [][]clientv3.Cmp{c.guards, c.cmps} {
		for i := range set {
			cmp := &set[i]
			if len(cmp.GetCompare().RangeEnd) > 0 {
				return false
			}
			c.reads = append(c.reads, string(cmp.KeyBytes()))
			c.bytes += len(cmp.KeyBytes()) + 16
		}
	}
	for _, op := range c.ops {
		if !(op.IsPut() || op.IsDelete()) || len(op.RangeBytes()) > 0 {
			return false
		}
		c.writes = append(c.writes, string(op.KeyBytes()))
		c.bytes += len(op.KeyBytes()) + len(op.ValueBytes()) + 16
	}
	// A guarded claim nests one level deeper (guards, then the claim).
	c.width = max(len(c.cmps), len(c.ops))
	if len(c.guards) > 0 {
		c.width += max(len(c.guards), 1)
	}
	return true
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
		c.res = commitOne(ctx, b.txn, c)
		close(c.done)
		return
	}
	subs := make([]clientv3.Op, len(batch))
	for i, c := range batch {
		if len(c.guards) == 0 {
			subs[i] = clientv3.OpTxn(c.cmps, c.ops, nil)
		} else {
			subs[i] = clientv3.OpTxn(c.guards, []clientv3.Op{clientv3.OpTxn(c.cmps, c.ops, nil)}, nil)
		}
	}
	resp, err := b.txn(ctx).Then(subs...).Commit()
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
		close(c.done)
	}
}

// commitOne is a claim's own transaction: the claim's compares, or the
// caller's guards as the outer condition and the claim as the inner one
// (so a failed guard is told apart from a lost race).
func commitOne(ctx context.Context, txn func(ctx context.Context) clientv3.Txn, c *batchedClaim) claimResult {
	if len(c.guards) == 0 {
		resp, err := txn(ctx).If(c.cmps...).Then(c.ops...).Commit()
		if err != nil {
			return claimResult{err: err}
		}
		return claimResult{rev: resp.Header.Revision, ok: resp.Succeeded}
	}
	resp, err := txn(ctx).If(c.guards...).Then(clientv3.OpTxn(c.cmps, c.ops, nil)).Commit()
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
	left := len(batch)
	var mu sync.Mutex
	stops := make([]func() bool, 0, len(batch))
	for _, c := range batch {
		stops = append(stops, context.AfterFunc(c.ctx, func() {
			mu.Lock()
			left--
			last := left == 0
			mu.Unlock()
			if last {
				cancel()
			}
		}))
	}
	return ctx, func() {
		for _, stop := range stops {
			stop()
		}
		cancel()
	}
}
