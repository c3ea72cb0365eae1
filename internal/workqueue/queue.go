package workqueue

import (
	"context"
	"fmt"
	"iter"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/backoff"
	"github.com/berth-project/berth/internal/informer"
	"github.com/berth-project/berth/internal/metrics"
	"github.com/berth-project/berth/internal/rawtxn"
	"github.com/berth-project/berth/internal/txnbatch"
)

// etcdResponseOp is one operation's answer inside a transaction.
type etcdResponseOp = pb.ResponseOp

// Item is one work item read from etcd.
type Item struct {
	ID       string
	Key      string
	Value    []byte
	ModRev   int64
	LeaseKey string
	// Extra holds the keys Config.AlsoRead named for this item, read
	// in the acquiring transaction (absent keys are missing from the map).
	Extra map[string][]byte
}

// ProcessFunc does one item's work. It must finish the item by deleting its
// key and lease key in its final transaction (see FinishOps); returning an
// error hands the item back for another try.
type ProcessFunc func(ctx context.Context, it Item) error

// Queue is a leased work queue over an etcd prefix: any number of processes
// run one over the same prefix, each item is worked by one holder at a time
// (a lease key created only when absent and bound to the holder's session),
// and when a holder dies its session lease expires, the lease key vanishes
// and the item is picked up by another.
//
// Every holder sees every item. So that N holders do not all race for
// each one (one winning and N-1 losing lease transactions per item, the
// losers moving on to the next item to race again), holders register
// under a prefix of their own (HolderPrefix, a key bound to the session
// lease) and rank each item's holders by rendezvous hashing of the item
// id with each holder's id: the first tries the item at once, the k-th
// only after k graces (at most maxGraceSteps) and only while the better
// ranked have leased nothing for the idle window (Config.IdleAfter):
// a dead or stalled holder's items are taken over within about a second,
// never a lease TTL, and a live one's backlog is left to it.
type Queue struct {
	cli         *clientv3.Client
	itemPrefix  string
	leasePrefix string
	leaseKey    func(id string) string
	holder      string
	ttl         int
	workers     int
	process     ProcessFunc
	deferFn     func(it Item, all iter.Seq[Item]) bool
	alsoRead    func(id string) []string
	writtenOnce bool              // Config.WrittenOnce
	leases      *txnbatch.Batcher // nil: each lease its own transaction
	log         hclog.Logger
	holderKey   func(id string) string // "" prefix: no registration, no affinity
	holderPfx   string
	grace       time.Duration
	idleAfter   time.Duration
	stealAfter  time.Duration // 0: never take a live holder's items
	name        string        // metrics' queue label
	metrics     *metrics.Metrics

	mu sync.Mutex
	// recs holds one record per item id: what the watches show of its
	// key and lease key, and its phase here (state.go, doc.go).
	recs map[string]*record
	// parked indexes the deferred records: every item deletion wakes
	// them (wakeParkedLocked) without a walk over every record.
	parked map[string]*record
	// misstep reports a transition refused (state.go); logMisstep
	// unless a test replaces it.
	misstep func(id, transition string, from phase)
	// holders are the registered holders' ids (session leases in hex),
	// sorted; self is ours ("" before the first session).
	holders []string
	self    string
	// active is when our watch last saw each holder (by id) lease an
	// item: a holder that leased within the grace is alive and working
	// through its backlog, and its items are left to it.
	active map[string]time.Time
	// delayed orders the waiting records by due time (entries whose
	// record is no longer waiting, or waits for another time, are stale
	// and skipped).
	delayed delayHeap
	// busy counts the workers inside process: with work queued for none
	// of the others, the rest are idle and may help a slow holder.
	busy atomic.Int32
	wake chan struct{}
	// work carries the ids of queued records to the workers. An entry
	// whose record has left queued meanwhile is stale (dequeue skips it).
	work chan string
	// overflow holds ids offered while work was full, oldest first; a
	// worker that takes an id moves the next ones in. Without it a burst
	// larger than work's buffer waited for the periodic sweep (the lease
	// TTL, 10 s) to be offered again.
	overflow []string

	sessMu     sync.Mutex
	session    *concurrency.Session
	registered bool // our holder key is written for session

	itemsInf, leasesInf, holdersInf *informer.Informer
}

// Config configures a Queue.
type Config struct {
	Client      *clientv3.Client
	ItemPrefix  string
	LeasePrefix string
	LeaseKey    func(id string) string
	Holder      string // who we are, written into lease keys
	LeaseTTL    time.Duration
	Workers     int
	Process     ProcessFunc
	// Defer, when set, may leave an item for another item's holder to
	// gather (a multi-instance request's siblings); deferred items are
	// offered again whenever an item finishes.
	Defer func(it Item, all iter.Seq[Item]) bool
	// AlsoRead, when set, names keys to read in the same transaction that
	// leases an item (Item.Extra): state the work needs to see as of the
	// moment it was leased, without another round trip to etcd.
	AlsoRead func(id string) []string
	// WrittenOnce says the items are put once and then only deleted (a
	// BuildRequest): the item a watch delivered is the item as it is for
	// as long as it exists. The lease transaction then compares the
	// item's mod revision with the watch's instead of reading the item
	// back (one range fewer in every lease; etcd reads and decodes the
	// whole record for a compare and again for a get), and the Item's
	// Value is the watch's. Unset, the lease reads the item, which may
	// have been rewritten since the watch showed it.
	WrittenOnce bool
	// BatchLeases, when set, sends the leases of items that workers take
	// at the same moment as one etcd request (package txnbatch), each a
	// nested transaction that wins or loses on its own: one revision for
	// several items under load instead of one each.
	BatchLeases bool
	// HolderPrefix and HolderKey, when set, register this queue (a key
	// named by its session lease in hex, bound to it) and spread the items
	// over the holders registered there. Unset, every holder tries every
	// item at once.
	HolderPrefix string
	HolderKey    func(id string) string
	// Grace is how long an item waits for a better-ranked holder before
	// this one tries it (default DefaultHolderGrace).
	Grace time.Duration
	// IdleAfter is how long a better-ranked holder may go without a lease
	// our watch sees before its items are tried after their grace; until
	// then it counts as alive and working through its backlog. Unset: 4
	// graces (DefaultHolderIdleAfter with the default grace). It should
	// not be shorter than Grace (configs checks): a live holder leases
	// less often than it is told of an item, so a window shorter than the
	// time it is given to lease one takes live holders for stalled.
	IdleAfter time.Duration
	// StealAfter, when positive, lets this holder take an item another
	// live holder ranks first for once the item has waited this long and
	// some of our workers are idle (0: never; see offerWhenDue). It
	// should be at least IdleAfter (configs checks): an item is not taken
	// from a live holder sooner than from a silent one. Only the
	// second-ranked holder does, the newer half of the owner's waiting
	// items, so thieves never race each other and meet the owner,
	// working its backlog oldest first, only at its end.
	StealAfter time.Duration
	// Name labels the queue's metrics (metrics.QueueBuildRequests, ...).
	Name    string
	Metrics *metrics.Metrics
	Log     hclog.Logger
}

// New builds a queue; Run starts it.
func New(c Config) *Queue {
	ttl := int(c.LeaseTTL / time.Second)
	if ttl < 2 {
		ttl = 2
	}
	if c.Workers < 1 {
		c.Workers = 1
	}
	if c.Grace <= 0 {
		c.Grace = DefaultHolderGrace
	}
	if c.IdleAfter <= 0 {
		c.IdleAfter = DefaultHolderIdleAfter / DefaultHolderGrace * c.Grace
	}
	if c.HolderKey == nil {
		c.HolderPrefix = ""
	}
	q := &Queue{
		cli: c.Client, itemPrefix: c.ItemPrefix, leasePrefix: c.LeasePrefix, leaseKey: c.LeaseKey,
		holder: c.Holder, ttl: ttl, workers: c.Workers, process: c.Process, deferFn: c.Defer, alsoRead: c.AlsoRead, writtenOnce: c.WrittenOnce, log: c.Log,
		holderKey: c.HolderKey, holderPfx: c.HolderPrefix, grace: c.Grace, idleAfter: c.IdleAfter, stealAfter: c.StealAfter, name: c.Name, metrics: c.Metrics,
		recs: map[string]*record{}, parked: map[string]*record{},
		active: map[string]time.Time{}, wake: make(chan struct{}, 1), work: make(chan string, 1024),
	}
	q.misstep = q.logMisstep
	if c.BatchLeases {
		q.leases = txnbatch.New(c.Client)
	}
	// Each request's put and delete, and its lease's: on watch streams of
	// their own (informer.OwnStream), so a burst of them does not set the
	// process's other watches aside.
	q.itemsInf = informer.New(c.Client, c.ItemPrefix, itemHandler{q}, c.Log, informer.OwnStream())
	q.leasesInf = informer.New(c.Client, c.LeasePrefix, leaseHandler{q}, c.Log, informer.OwnStream())
	if q.holderPfx != "" {
		q.holdersInf = informer.New(c.Client, c.HolderPrefix, holderHandler{q}, c.Log)
	}
	return q
}

// Run works the queue until ctx ends, then revokes its session so its
// leases are handed back at once rather than after the TTL.
func (q *Queue) Run(ctx context.Context) error {
	if _, err := q.currentSession(ctx); err != nil {
		return err
	}
	if q.holdersInf != nil {
		go q.holdersInf.Run(ctx)
	}
	go q.leasesInf.Run(ctx)
	go q.itemsInf.Run(ctx)
	go q.offerWhenDue(ctx)
	var wg sync.WaitGroup
	for i := 0; i < q.workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			q.worker(ctx)
		}()
	}
	// Periodic sweep: an item whose try failed, or whose lease holder died
	// while we were re-listing, is offered again.
	go func() {
		t := time.NewTicker(time.Duration(q.ttl) * time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				q.mu.Lock()
				q.sweepLocked()
				q.mu.Unlock()
			}
		}
	}()
	wg.Wait()
	q.sessMu.Lock()
	if q.session != nil {
		rctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, _ = q.cli.Revoke(rctx, q.session.Lease())
		cancel()
		// Orphan, not Close: Close revokes again with the session's own
		// context, which is done by now, and only logs a cancelled call.
		q.session.Orphan()
	}
	q.sessMu.Unlock()
	return nil
}

// WaitSynced blocks until the queue has read its holders, items and
// leases once.
func (q *Queue) WaitSynced(ctx context.Context) error {
	if q.holdersInf != nil {
		if err := q.holdersInf.WaitSynced(ctx); err != nil {
			return err
		}
	}
	if err := q.leasesInf.WaitSynced(ctx); err != nil {
		return err
	}
	return q.itemsInf.WaitSynced(ctx)
}

// currentSession returns a live session, making a new one after the old
// lease was lost (etcd unreachable for longer than the TTL).
func (q *Queue) currentSession(ctx context.Context) (*concurrency.Session, error) {
	q.sessMu.Lock()
	defer q.sessMu.Unlock()
	if q.session != nil {
		select {
		case <-q.session.Done():
			if ctx.Err() != nil {
				// Shutting down: the session ended with our context, but
				// its lease still holds our lease keys. Keep it for Run to
				// revoke; dropping it here left them for the whole TTL.
				return nil, fmt.Errorf("queue %s: %w", q.itemPrefix, ctx.Err())
			}
			q.log.Warn("queue session lost, starting a new one", "prefix", q.itemPrefix)
			q.session = nil
		default:
			q.registerLocked(ctx)
			return q.session, nil
		}
	}
	s, err := concurrency.NewSession(q.cli, concurrency.WithTTL(q.ttl), concurrency.WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("queue %s: new session: %w", q.itemPrefix, err)
	}
	q.session, q.registered = s, false
	q.mu.Lock()
	q.self = strconv.FormatInt(int64(s.Lease()), 16)
	q.mu.Unlock()
	q.registerLocked(ctx)
	return s, nil
}

// registerLocked writes our holder key, bound to the session's lease, if
// it is not written yet. A failure only costs affinity (the others do
// not rank us until it is written), so it is logged and tried again with
// the next lease attempt. sessMu is held.
func (q *Queue) registerLocked(ctx context.Context) {
	if q.holderPfx == "" || q.registered {
		return
	}
	lease := q.session.Lease()
	val := etcdschema.MustEncode(&etcdschema.Lease{Holder: q.holder, LeaseID: int64(lease), Since: time.Now().UTC()})
	key := q.holderKey(strconv.FormatInt(int64(lease), 16))
	if _, err := q.cli.Put(ctx, key, val, clientv3.WithLease(lease)); err != nil {
		if ctx.Err() == nil {
			q.log.Warn("queue holder registration failed; trying again with the next lease", "key", key, "error", err)
		}
		return
	}
	q.registered = true
}

// LeaseID is the lease the queue's lease keys are bound to.
func (q *Queue) LeaseID(ctx context.Context) (clientv3.LeaseID, error) {
	s, err := q.currentSession(ctx)
	if err != nil {
		return 0, err
	}
	return s.Lease(), nil
}

// Pending returns the items not leased by anyone, for callers that gather
// related items (a multi-instance request) into one piece of work.
func (q *Queue) Pending() []Item {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make([]Item, 0, len(q.recs))
	for _, r := range q.recs {
		if r.known && !r.leased && r.phase != inFlight {
			out = append(out, r.item)
		}
	}
	return out
}

// TryAcquire leases item id for this holder. ok is false when the item is
// gone or someone else holds it.
func (q *Queue) TryAcquire(ctx context.Context, id string) (Item, bool, error) {
	q.mu.Lock()
	r, ok := q.recs[id]
	if !ok || !r.known || r.phase == inFlight || r.phase == finished {
		q.mu.Unlock()
		return Item{}, false, nil // gone, or ours already
	}
	turn := metrics.TurnPreferred
	if r.stolen {
		turn = metrics.TurnStolen
	} else if q.rankLocked(id) > 0 {
		turn = metrics.TurnFallback
	}
	r.stolen = false
	it, leased := r.item, r.leased
	if !leased {
		q.fly(r)
	}
	q.mu.Unlock()
	if leased {
		// Our watch already shows someone's lease: the transaction could
		// only lose. If that holder dies, the lease's deletion offers the
		// item again.
		q.metrics.QueueLease(q.name, turn, metrics.LeaseSkipped)
		return Item{}, false, nil
	}
	ok, cur, err := q.acquire(ctx, it)
	q.countLease(turn, ok, err)
	if err != nil || !ok {
		q.released(id)
		return Item{}, false, err
	}
	return cur, true, nil
}

func (q *Queue) countLease(turn string, won bool, err error) {
	switch {
	case err != nil:
		q.metrics.QueueLease(q.name, turn, metrics.LeaseError)
	case won:
		q.metrics.QueueLease(q.name, turn, metrics.LeaseWon)
	default:
		q.metrics.QueueLease(q.name, turn, metrics.LeaseLost)
	}
}

// TryAcquireMany leases several items in one etcd transaction, each in
// its own sub-transaction with the same compares as TryAcquire, so each
// is leased or not on its own: a multi-instance request's siblings cost
// one write instead of one each. It returns the items leased.
func (q *Queue) TryAcquireMany(ctx context.Context, ids []string) ([]Item, error) {
	var its []Item
	q.mu.Lock()
	for _, id := range ids {
		if r, ok := q.recs[id]; ok && r.known && r.phase != inFlight && r.phase != finished {
			if r.leased {
				q.metrics.QueueLease(q.name, metrics.TurnSibling, metrics.LeaseSkipped)
				continue
			}
			q.fly(r)
			its = append(its, r.item)
		}
	}
	q.mu.Unlock()
	var got []Item
	for start := 0; start < len(its); start += maxAcquirePerTxn {
		chunk := its[start:min(start+maxAcquirePerTxn, len(its))]
		ok, err := q.acquireMany(ctx, chunk)
		got = append(got, ok...)
		for range ok {
			q.metrics.QueueLease(q.name, metrics.TurnSibling, metrics.LeaseWon)
		}
		if err != nil {
			q.metrics.QueueLease(q.name, metrics.TurnSibling, metrics.LeaseError)
		} else {
			for range len(chunk) - len(ok) {
				q.metrics.QueueLease(q.name, metrics.TurnSibling, metrics.LeaseLost)
			}
		}
		if err != nil {
			q.releaseFlights(its, got)
			return got, err
		}
	}
	q.releaseFlights(its, got)
	return got, nil
}

// maxAcquirePerTxn keeps a batched lease within etcd's default of 128
// operations per transaction level.
const maxAcquirePerTxn = 64

// releaseFlights lands the items tried but not leased.
func (q *Queue) releaseFlights(tried, leased []Item) {
	won := make(map[string]bool, len(leased))
	for _, it := range leased {
		won[it.ID] = true
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, it := range tried {
		if r, ok := q.recs[it.ID]; ok && !won[it.ID] && r.phase == inFlight {
			q.land(r)
			q.tidy(r)
		}
	}
}

func (q *Queue) acquireMany(ctx context.Context, its []Item) ([]Item, error) {
	if len(its) == 0 {
		return nil, nil
	}
	sess, err := q.currentSession(ctx)
	if err != nil {
		return nil, err
	}
	val := etcdschema.MustEncode(&etcdschema.Lease{Holder: q.holder, LeaseID: int64(sess.Lease()), Since: time.Now().UTC()})
	subs := make([]*pb.RequestOp, len(its))
	extras := make([][]string, len(its))
	for i, it := range its {
		cmps, ops, extra := q.acquireOps(it, val, sess.Lease())
		subs[i], extras[i] = rawtxn.Nested(&pb.TxnRequest{Compare: cmps, Success: ops}), extra
	}
	resp, err := rawtxn.Commit(ctx, q.cli.KV, &pb.TxnRequest{Success: subs})
	if err != nil {
		return nil, fmt.Errorf("lease %d items under %s: %w", len(its), q.itemPrefix, err)
	}
	var got []Item
	for i, it := range its {
		sub := resp.Responses[i].GetResponseTxn()
		if sub == nil || !sub.Succeeded {
			continue
		}
		got = append(got, q.leased1(it, extras[i], sub.Responses))
	}
	return got, nil
}

// acquireOps is one item's lease: if its lease key is absent and the
// item exists, put the lease key and read the item and the extra keys. An
// item written once is not read: it exists as the watch showed it if its
// mod revision is the watch's. One per item leased (W2), so it is built
// as etcd's messages (package rawtxn), without clientv3's cloning.
func (q *Queue) acquireOps(it Item, val string, lease clientv3.LeaseID) ([]*pb.Compare, []*pb.RequestOp, []string) {
	var extra []string
	if q.alsoRead != nil {
		extra = q.alsoRead(it.ID)
	}
	ops := make([]*pb.RequestOp, 0, 2+len(extra))
	ops = append(ops, rawtxn.PutWithLease(it.LeaseKey, val, int64(lease)))
	exists := rawtxn.Present(it.Key)
	if q.writtenOnce {
		exists = rawtxn.ModRevisionIs(it.Key, it.ModRev)
	} else {
		ops = append(ops, rawtxn.Get(it.Key))
	}
	for _, k := range extra {
		ops = append(ops, rawtxn.Get(k))
	}
	return []*pb.Compare{rawtxn.Absent(it.LeaseKey), exists}, ops, extra
}

// leased1 fills an item from its lease's read responses (as acquireOps
// ordered them: the lease's put, the item unless written once, the extra
// keys).
func (q *Queue) leased1(it Item, extra []string, resps []*etcdResponseOp) Item {
	next := 1
	if !q.writtenOnce {
		if kvs := resps[next].GetResponseRange().Kvs; len(kvs) == 1 { // the freshest value
			it.Value = kvs[0].Value
			it.ModRev = kvs[0].ModRevision
		}
		next++
	}
	if len(extra) > 0 {
		it.Extra = make(map[string][]byte, len(extra))
		for i, k := range extra {
			if kvs := resps[next+i].GetResponseRange().Kvs; len(kvs) == 1 {
				it.Extra[k] = kvs[0].Value
			}
		}
	}
	return it
}

// Release gives up an acquired item without finishing it. Releasing it
// again is harmless (the superconductor does, after a lost hand-off): the
// record has left in flight, perhaps been offered again, and is left so.
func (q *Queue) Release(ctx context.Context, it Item) {
	q.released(it.ID)
	leaseID, err := q.LeaseID(ctx)
	if err != nil {
		return
	}
	// Only delete the lease key while it is still ours.
	_, _ = q.cli.Txn(ctx).If(clientv3.Compare(clientv3.LeaseValue(it.LeaseKey), "=", leaseID)).
		Then(clientv3.OpDelete(it.LeaseKey)).Commit()
}

// released lands id's record if it is in flight; one found in another
// phase was released before, or ended meanwhile by a client's Done (an
// item it released, taken up again by one of our workers), and is left
// as it is.
func (q *Queue) released(id string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if r, ok := q.recs[id]; ok && r.phase == inFlight {
		q.land(r)
		q.tidy(r)
	}
}

// Done marks an acquired item as finished by this process (its final
// transaction deleted it): until the item watch shows the deletion, the
// lease key's deletion (same transaction, another watch) must not offer
// it again. An item released before (a lost hand-off) may be reported
// done too, wherever it stands since; one done twice, or whose record is
// gone (deleted, lease key too), is left.
func (q *Queue) Done(it Item) {
	q.mu.Lock()
	if r, ok := q.recs[it.ID]; ok && r.phase != finished {
		q.finish(r)
		q.tidy(r)
	}
	q.mu.Unlock()
}

// FinishOps are the operations that end an item; callers append them to
// their final transaction.
func FinishOps(it Item) []clientv3.Op {
	return []clientv3.Op{clientv3.OpDelete(it.Key), clientv3.OpDelete(it.LeaseKey)}
}

// FinishRequests are FinishOps as etcd's messages, for a final
// transaction built with package rawtxn.
func FinishRequests(it Item) []*pb.RequestOp {
	return []*pb.RequestOp{rawtxn.Delete(it.Key), rawtxn.Delete(it.LeaseKey)}
}

// StillHeld is the comparison that keeps a final transaction from acting
// on an item we no longer hold (our lease expired and another took it).
func (q *Queue) StillHeld(ctx context.Context, it Item) (clientv3.Cmp, error) {
	leaseID, err := q.LeaseID(ctx)
	if err != nil {
		return clientv3.Cmp{}, err
	}
	return clientv3.Compare(clientv3.LeaseValue(it.LeaseKey), "=", leaseID), nil
}

// StillHeldCompare is StillHeld as etcd's message, for a final
// transaction built with package rawtxn.
func (q *Queue) StillHeldCompare(ctx context.Context, it Item) (*pb.Compare, error) {
	leaseID, err := q.LeaseID(ctx)
	if err != nil {
		return nil, err
	}
	return rawtxn.LeaseIs(it.LeaseKey, int64(leaseID)), nil
}

func (q *Queue) acquire(ctx context.Context, it Item) (bool, Item, error) {
	sess, err := q.currentSession(ctx)
	if err != nil {
		return false, it, err
	}
	val := etcdschema.MustEncode(&etcdschema.Lease{Holder: q.holder, LeaseID: int64(sess.Lease()), Since: time.Now().UTC()})
	cmps, ops, extra := q.acquireOps(it, val, sess.Lease())
	if q.leases != nil {
		// Each item's lease writes its own lease key only: leases taken
		// together commute, as txnbatch requires.
		out, err := q.leases.Commit(ctx, cmps, ops)
		if err != nil {
			return false, it, fmt.Errorf("lease %s: %w", it.Key, err)
		}
		if !out.Succeeded {
			return false, it, nil
		}
		return true, q.leased1(it, extra, out.Responses), nil
	}
	resp, err := rawtxn.Commit(ctx, q.cli.KV, &pb.TxnRequest{Compare: cmps, Success: ops})
	if err != nil {
		return false, it, fmt.Errorf("lease %s: %w", it.Key, err)
	}
	if !resp.Succeeded {
		return false, it, nil
	}
	return true, q.leased1(it, extra, resp.Responses), nil
}

func (q *Queue) worker(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case id := <-q.work:
			if !q.dequeue(id) {
				continue
			}
			it, ok, err := q.TryAcquire(ctx, id)
			if err != nil {
				if ctx.Err() == nil {
					q.log.Warn("acquire failed", "item", id, "error", err)
				}
				continue
			}
			if !ok {
				continue
			}
			q.busy.Add(1)
			err = q.process(ctx, it)
			q.busy.Add(-1)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				q.log.Warn("work item failed, handing it back", "item", id, "error", err)
				q.Release(context.WithoutCancel(ctx), it)
				// A short, jittered pause before the sweep offers it again.
				backoff.Sleep(ctx, time.Duration(100+rand.IntN(400))*time.Millisecond)
				q.mu.Lock()
				q.enqueueLocked(id)
				q.mu.Unlock()
				continue
			}
			q.Done(it)
		}
	}
}
