// Package txnbatch is group commit for independent etcd transactions:
// transactions that are ready at the same moment in one process go to
// etcd as one request whose operations are the transactions themselves,
// nested (If(cmps).Then(ops) each), and each is answered with its own
// outcome.
//
// Why: every transaction pays etcd's fixed price per request (a gRPC
// call or an in-process call, a raft proposal and its WAL entry, an
// apply, a revision, a response, the client's context and retry
// machinery) on top of its few keys. A superconductor under load hands
// off hundreds of instances a second, each one transaction of a few
// keys; batched, the fixed price is paid once per batch.
//
// Correctness: etcd evaluates the compares of a nested transaction on
// their own, and applies its operations or not on its own, so each
// member commits or fails exactly as it would alone. The members of one
// batch commit at one revision, which is the same as running them one
// after another only if they commute: the caller promises that
// transactions sent through one Batcher never write a key another may
// read or write (one work item each: its own instance, mapping, cast,
// lease key). The batcher checks the part etcd itself would refuse (two
// members writing the same key in one request: "duplicate key given in
// txn request") and sends such a member in a later batch. A batch is
// sent at once while fewer than maxInFlight batches are outstanding, so
// an idle etcd adds no wait; under load the members that queued behind
// the batches in flight leave together, within etcd's 128 operations per
// transaction level and a byte budget under its request size limit.
//
// Members are etcd's messages as built (package rawtxn): wrapping each in
// clientv3's OpTxn cloned every compare by reflection twice more.
//
// A member whose caller gives up before its batch is sent is dropped; a
// sent batch is cancelled only once every member's caller has given up
// (its outcome is then unknown to all of them, as a cancelled single
// transaction's would be).
//
// placement's claim batcher (placement/claim_batch.go) is the same group
// commit for claims, which do conflict with one another and need the
// conflict rules this package leaves out.
package txnbatch

import (
	"context"
	"errors"
	"sync"
	"unsafe"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/internal/rawtxn"
	"github.com/berth-project/berth/internal/rolelabel"
)

// Defaults.
const (
	// DefaultMaxInFlight batches may be outstanding at once: enough to
	// overlap etcd's round trips, few enough that batches form under
	// load (the claim batcher's choice, measured there).
	DefaultMaxInFlight = 4
	// DefaultMaxMembers keeps a batch within etcd's default of 128
	// operations per transaction level, with room to spare.
	DefaultMaxMembers = 64
	// DefaultMaxBytes keeps a batch well under etcd's default request
	// size limit (1.5 MiB).
	DefaultMaxBytes = 512 << 10
)

// Outcome is one member's answer: whether its compares held, and the
// responses of its operations (in order) when they did.
type Outcome struct {
	Succeeded bool
	Responses []*pb.ResponseOp
	// Revision is the request's header revision.
	Revision int64
}

// Batcher sends the transactions given to Commit, alone or in batches.
type Batcher struct {
	kv          clientv3.KV
	maxInFlight int
	maxMembers  int
	maxBytes    int

	mu       sync.Mutex
	queue    []*member
	inFlight int
	// batches and members count the requests sent and the transactions
	// in them (tests, reports).
	batches, members int64
}

type member struct {
	ctx  context.Context
	cmps []*pb.Compare
	ops  []*pb.RequestOp
	// writes are the keys ops write, as strings over the ops' own key
	// bytes (keyString): read only by takeLocked, while the member is
	// queued and its caller still waits in Commit, which is as long as
	// the caller promises not to change ops.
	writes []string
	bytes  int
	taken  bool // sent, or being sent (under Batcher.mu)
	done   chan struct{}
	out    Outcome
	err    error
}

// New is a batcher over kv with the defaults.
func New(kv clientv3.KV) *Batcher {
	return &Batcher{kv: kv, maxInFlight: DefaultMaxInFlight, maxMembers: DefaultMaxMembers, maxBytes: DefaultMaxBytes}
}

// Stats are the requests sent and the transactions they carried.
func (b *Batcher) Stats() (requests, transactions int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.batches, b.members
}

// Commit runs If(cmps).Then(ops) as part of the next request the batcher
// sends, and returns its outcome. ops must be puts, deletes of single
// keys and gets (no range writes, no nested transactions), and must
// write no key another transaction sent through b may read or write.
// cmps and ops must not be changed until Commit returns. An error means
// the outcome is unknown (as for a single transaction).
func (b *Batcher) Commit(ctx context.Context, cmps []*pb.Compare, ops []*pb.RequestOp) (Outcome, error) {
	m := &member{ctx: ctx, cmps: cmps, ops: ops, done: make(chan struct{})}
	for _, op := range ops {
		switch v := op.GetRequest().(type) {
		case *pb.RequestOp_RequestPut:
			m.writes = append(m.writes, keyString(v.RequestPut.Key))
			m.bytes += len(v.RequestPut.Key) + len(v.RequestPut.Value) + 16
		case *pb.RequestOp_RequestDeleteRange:
			if len(v.RequestDeleteRange.RangeEnd) > 0 {
				return Outcome{}, errors.New("txnbatch: a range write cannot be batched")
			}
			m.writes = append(m.writes, keyString(v.RequestDeleteRange.Key))
			m.bytes += len(v.RequestDeleteRange.Key) + 16
		case *pb.RequestOp_RequestRange:
			m.bytes += len(v.RequestRange.Key) + len(v.RequestRange.RangeEnd) + 16
		default:
			return Outcome{}, errors.New("txnbatch: a nested transaction cannot be batched")
		}
	}
	for _, c := range cmps {
		m.bytes += len(c.Key) + len(c.GetValue()) + 32
	}
	b.mu.Lock()
	b.queue = append(b.queue, m)
	if b.inFlight < b.maxInFlight {
		// Nothing to wait for: send now, on the caller's goroutine
		// (alone when etcd is idle, else with whatever queued).
		if batch := b.takeLocked(); batch != nil {
			b.inFlight++
			b.mu.Unlock()
			b.send(batch)
			b.mu.Lock()
		}
	}
	b.mu.Unlock()
	select {
	case <-m.done:
	case <-ctx.Done():
		b.mu.Lock()
		if !m.taken {
			for i, q := range b.queue {
				if q == m {
					b.queue = append(b.queue[:i], b.queue[i+1:]...)
					break
				}
			}
			b.mu.Unlock()
			return Outcome{}, ctx.Err()
		}
		b.mu.Unlock()
		<-m.done
	}
	return m.out, m.err
}

// send sends batch (one request), answers its members, and then sends
// the next batch from the queue if any is waiting.
func (b *Batcher) send(batch []*member) {
	if len(batch) == 1 {
		m := batch[0]
		resp, err := rawtxn.Commit(m.ctx, b.kv, &pb.TxnRequest{Compare: m.cmps, Success: m.ops})
		if err != nil {
			m.err = err
		} else {
			m.out = Outcome{Succeeded: resp.Succeeded, Responses: resp.Responses, Revision: resp.Header.GetRevision()}
		}
		close(m.done)
	} else {
		ctx, cancel := allGone(batch)
		subs := make([]*pb.RequestOp, len(batch))
		for i, m := range batch {
			subs[i] = rawtxn.Nested(&pb.TxnRequest{Compare: m.cmps, Success: m.ops})
		}
		resp, err := rawtxn.Commit(ctx, b.kv, &pb.TxnRequest{Success: subs})
		cancel()
		for i, m := range batch {
			switch {
			case err != nil:
				m.err = err
			case i >= len(resp.Responses) || resp.Responses[i].GetResponseTxn() == nil:
				m.err = errors.New("txnbatch: etcd answered a batch without a nested response for every member")
			default:
				sub := resp.Responses[i].GetResponseTxn()
				m.out = Outcome{Succeeded: sub.Succeeded, Responses: sub.Responses, Revision: resp.Header.GetRevision()}
			}
			close(m.done)
		}
	}
	b.mu.Lock()
	b.inFlight--
	next := b.takeLocked()
	if next != nil {
		b.inFlight++
	}
	b.mu.Unlock()
	if next != nil {
		go b.send(next)
	}
}

// takeLocked takes the next batch off the queue: members in order, up to
// maxMembers and maxBytes, skipping (for a later batch) a member that
// writes a key an earlier one in the batch writes.
func (b *Batcher) takeLocked() []*member {
	if len(b.queue) == 0 {
		return nil
	}
	var batch []*member
	var rest []*member
	written := map[string]bool{}
	bytes := 0
	for _, m := range b.queue {
		if len(batch) >= b.maxMembers || (len(batch) > 0 && bytes+m.bytes > b.maxBytes) || m.ctx.Err() != nil || writesAny(m, written) {
			rest = append(rest, m)
			continue
		}
		for _, k := range m.writes {
			written[k] = true
		}
		bytes += m.bytes
		m.taken = true
		batch = append(batch, m)
	}
	if len(batch) == 0 {
		// Every waiting caller has given up: they remove themselves.
		b.queue = rest
		return nil
	}
	b.queue = rest
	b.batches++
	b.members += int64(len(batch))
	return batch
}

// keyString is key as a string without a copy. A copy per written key
// was most of what batching a member allocated of its own (five keys of a
// hand-off, about 0.4 kB per server booted); the bytes cannot change
// while the string is used (see member.writes).
func keyString(key []byte) string {
	if len(key) == 0 {
		return ""
	}
	return unsafe.String(&key[0], len(key))
}

func writesAny(m *member, written map[string]bool) bool {
	for _, k := range m.writes {
		if written[k] {
			return true
		}
	}
	return false
}

// allGone is a context for a batch's request that ends once every
// member's context has ended, with the values of none but the first's
// role label (etcd's client reads none it needs).
func allGone(batch []*member) (context.Context, context.CancelFunc) {
	return AllGone(len(batch), func(i int) context.Context { return batch[i].ctx })
}

// AllGone is a context for one request made for n callers (a batch): it
// ends once every caller's context (ctxOf(i)) has ended, so a request
// some caller still waits for is not cancelled by the others giving up.
// It carries none of their values but the first caller's role label
// (package rolelabel), so that an etcd request tally (package etcdtally)
// counts the batch for the role that made it rather than for none. Its
// cancel releases what it watches.
func AllGone(n int, ctxOf func(i int) context.Context) (context.Context, context.CancelFunc) {
	base := context.Background()
	if n > 0 {
		base = rolelabel.With(base, rolelabel.Of(ctxOf(0)))
	}
	ctx, cancel := context.WithCancel(base)
	var mu sync.Mutex
	left := n
	stops := make([]func() bool, n)
	for i := range n {
		stops[i] = context.AfterFunc(ctxOf(i), func() {
			mu.Lock()
			left--
			gone := left == 0
			mu.Unlock()
			if gone {
				cancel()
			}
		})
	}
	return ctx, func() {
		for _, stop := range stops {
			stop()
		}
		cancel()
	}
}
