package servers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	"github.com/berth-project/berth/internal/rawtxn"
	"github.com/berth-project/berth/internal/txnbatch"
	"github.com/berth-project/berth/quotas"
)

// Group commit of creates (W1 in docs/flows.md).
//
// Creates that are ready at the same moment in one API process go to
// etcd as one request, one revision, as claims and hand-offs do. They
// cannot go through internal/txnbatch: creates of one project conflict
// on the project's quota fence, which each would compare and write.
// Instead each project with creates in the batch gets one share, a
// nested transaction planned by quotas.PlanServers: the fence (and quota
// set) compared as the plan read them, one fence write carrying the
// project's usage record plus the charges of all its creates in the
// share, and each create as a nested transaction of its own (its
// flavor, image and group compared; its build requests, mappings, index
// entries and group members written). So:
//   - each create is stored or not on its own: its own comparisons decide
//     it, as they would alone; the record keeps the charge of one that
//     lost, which only makes it a little high (quotas/batch.go argues why
//     an upper bound is all its readers need);
//   - the limits hold exactly: the share commits only while nothing else
//     moved the fence, and its creates were checked against the record
//     together, each after the ones before it;
//   - a share whose fence or set moved (another process, a create that
//     counted) fails whole; its Else reads the fresh state, from which
//     its creates are planned again in the next batch;
//   - creates checked against the same records (one flavor, image and
//     group for all: the usual batch) would fail those comparisons all
//     together, so the share makes them once, for all; when such a share
//     fails with the set and fence as planned (its Else says so), every
//     create is told a record it was checked against changed;
//   - a create the plan does not admit (it needs a count, or a per-user
//     or group-member check) is handed back and goes alone as before,
//     refusals and Nova's words unchanged.
//
// A project has at most one share in flight: two would compare the same
// fence, and all but one would fail. Batches are sent at once while
// fewer than maxCreateBatches are outstanding (an idle etcd adds no
// wait); under load the creates that queued behind them leave together.

const (
	// maxCreateBatches may be outstanding at once (txnbatch's choice).
	maxCreateBatches = 4
	// maxCreatesPerBatch keeps a share within etcd's 128 operations a
	// transaction level (a create is one nested transaction, its share
	// adds the fence write).
	maxCreatesPerBatch = 64
	// maxCreateBatchBytes keeps a request well under etcd's 1.5 MiB.
	maxCreateBatchBytes = 512 << 10
)

// createOutcome is what became of a create sent in a batch.
type createOutcome int

const (
	// createStored: its servers are stored.
	createStored createOutcome = iota
	// createCmpsFailed: its own comparisons (flavor, image, group)
	// failed; nothing of it is stored.
	createCmpsFailed
	// createAlone: the plan did not admit it (or its project's fence
	// kept moving); nothing is stored: check and store it alone.
	createAlone
)

// errBatchLost wraps an etcd error that left a batch's outcome unknown.
var errBatchLost = errors.New("the answer to a batch of creates was lost")

// createBatcher sends the creates given to commit, alone or together.
type createBatcher struct {
	mu       sync.Mutex
	queue    []*queuedCreate
	inFlight int
	busy     map[string]bool // projects with a share in flight
	// batches and creates count the requests sent and the creates they
	// carried (tests).
	batches, creates int64
	// through, when set, is what batches are sent through instead of the
	// Store's client (tests lose answers with it).
	through clientv3.KV
}

// kv is what b sends batches through.
func (b *createBatcher) kv(s *Store) clientv3.KV {
	if b.through != nil {
		return b.through
	}
	return s.cli
}

type queuedCreate struct {
	ctx   context.Context
	quota quotas.ServerRequest
	cmps  []*etcdserverpb.Compare
	ops   []*etcdserverpb.RequestOp
	// checked and group are what cmps compare (hoistChecks): the group's
	// presence first when there is a group, then checked in order.
	checked []CheckedRecord
	group   string
	bytes   int
	tries   int
	taken   bool // sent, or being sent (under createBatcher.mu)
	done    chan struct{}
	out     createOutcome
	err     error
}

// createBatched tries to store req with the other creates ready now.
// done says the create is answered (res, err); otherwise it goes alone,
// with lost set when a batch's answer was lost (res are then the servers
// that batch carried).
func (s *Store) createBatched(ctx context.Context, req CreateRequest) (res *Reservation, done, lost bool, err error) {
	res, q := s.queuedCreate(ctx, req)
	out, err := s.creates.commit(s, q)
	switch {
	case errors.Is(err, errBatchLost):
		return res, false, true, nil
	case err != nil:
		return nil, true, false, err
	case out == createStored:
		s.logCreated(req, res)
		return res, true, false, nil
	case out == createCmpsFailed:
		changed, err := s.checkedChanged(ctx, req.Checked)
		switch {
		case err != nil:
			return nil, true, false, fmt.Errorf("store build requests: %w", err)
		case changed:
			return nil, true, false, ErrCheckedRecordChanged
		case s.groupGone(ctx, req.Hints.Group):
			return nil, true, false, ErrGroupDeleted
		}
	}
	return nil, false, false, nil
}

// queuedCreate is req's servers (all of them) and the create to send in
// a batch to store them.
func (s *Store) queuedCreate(ctx context.Context, req CreateRequest) (*Reservation, *queuedCreate) {
	res := newReservation(req, req.Count)
	cmps, ops := s.partRequests(req, res.BuildRequests)
	q := &queuedCreate{ctx: ctx, cmps: cmps, ops: ops, checked: req.Checked, group: req.Hints.Group, done: make(chan struct{}),
		quota: quotas.ServerRequest{Project: req.ProjectID, User: req.UserID, Group: req.Hints.Group,
			Min: req.Count, Max: req.Count, VCPUs: int64(req.Flavor.VCPUs), RAMMB: int64(req.Flavor.RAMMB),
			RequestID: req.RequestID}}
	for _, op := range ops {
		q.bytes += opBytes(op)
	}
	return res, q
}

// opBytes is about what op adds to a request (nested transactions
// included).
func opBytes(op *etcdserverpb.RequestOp) int {
	switch v := op.GetRequest().(type) {
	case *etcdserverpb.RequestOp_RequestPut:
		return len(v.RequestPut.Key) + len(v.RequestPut.Value) + 16
	case *etcdserverpb.RequestOp_RequestTxn:
		t := v.RequestTxn
		n := 16 + 32*len(t.Compare)
		for _, o := range t.Success {
			n += opBytes(o)
		}
		for _, o := range t.Failure {
			n += opBytes(o)
		}
		return n
	default:
		return proto.Size(op)
	}
}

// commit sends q in the next batch and waits for its outcome (or q's
// context, while q is not yet sent).
func (b *createBatcher) commit(s *Store, q *queuedCreate) (createOutcome, error) {
	b.mu.Lock()
	b.queue = append(b.queue, q)
	if b.inFlight < maxCreateBatches {
		// Nothing to wait for: send now, on the caller's goroutine.
		if batch := b.takeLocked(); batch != nil {
			b.inFlight++
			b.mu.Unlock()
			b.send(s, batch)
			b.mu.Lock()
		}
	}
	b.mu.Unlock()
	select {
	case <-q.done:
	case <-q.ctx.Done():
		b.mu.Lock()
		if !q.taken {
			for i, w := range b.queue {
				if w == q {
					b.queue = append(b.queue[:i], b.queue[i+1:]...)
					break
				}
			}
			b.mu.Unlock()
			return 0, q.ctx.Err()
		}
		b.mu.Unlock()
		<-q.done
	}
	return q.out, q.err
}

// takeLocked takes the next batch off the queue: creates in order, up
// to the batch's limits, skipping (for a later batch) those of a project
// whose share is in flight.
func (b *createBatcher) takeLocked() []*queuedCreate {
	var batch, rest []*queuedCreate
	bytes := 0
	for _, q := range b.queue {
		if len(batch) >= maxCreatesPerBatch || (len(batch) > 0 && bytes+q.bytes > maxCreateBatchBytes) ||
			q.ctx.Err() != nil || b.busy[q.quota.Project] {
			rest = append(rest, q)
			continue
		}
		bytes += q.bytes
		q.taken = true
		batch = append(batch, q)
	}
	b.queue = rest
	if len(batch) == 0 {
		return nil
	}
	if b.busy == nil {
		b.busy = map[string]bool{}
	}
	for _, q := range batch {
		b.busy[q.quota.Project] = true
	}
	b.batches++
	b.creates += int64(len(batch))
	return batch
}

// share is one project's part of a batch.
type share struct {
	plan    *quotas.BatchPlan
	members []*queuedCreate
	cmps    []*etcdserverpb.Compare // the plan's, and those every member makes (hoistChecks)
	// hoisted says some of the members' comparisons, made by every
	// member, are the share's: its compares failing with the plan's
	// holding means one of those records changed.
	hoisted bool
}

// hoistChecks splits the comparisons of a share's creates qs: those every
// create makes (the same record at the same revision, the same group)
// are common, compared once for the share; own[i] are the rest of qs[i]'s
// (nil when none). A create still fails exactly when a record it was
// checked against changed: a common one failing fails the share, every
// create of which was checked against it.
//
// The load tool's creates ask for four flavors and one image: hoisting
// only when every create was checked against the same records, each
// create of a mixed batch compared its flavor and the image itself, two
// full reads of a record per server in etcd's apply; now the image is
// compared once per share.
func hoistChecks(qs []*queuedCreate) (common []*etcdserverpb.Compare, own [][]*etcdserverpb.Compare) {
	first := qs[0]
	sameGroup := true
	everywhere := make([]bool, len(first.checked)) // first.checked[j] is checked by every create
	for j := range everywhere {
		everywhere[j] = true
	}
	for _, q := range qs[1:] {
		sameGroup = sameGroup && q.group == first.group
		for j, rec := range first.checked {
			everywhere[j] = everywhere[j] && slices.Contains(q.checked, rec)
		}
	}
	hoistGroup := sameGroup && first.group != ""
	if hoistGroup {
		common = append(common, first.cmps[0])
	}
	var commonRecs []CheckedRecord
	for j, rec := range first.checked {
		if everywhere[j] {
			common = append(common, first.cmps[len(first.cmps)-len(first.checked)+j])
			commonRecs = append(commonRecs, rec)
		}
	}
	own = make([][]*etcdserverpb.Compare, len(qs))
	if len(common) == 0 {
		for i, q := range qs {
			own[i] = q.cmps
		}
		return nil, own
	}
	for i, q := range qs {
		var mine []*etcdserverpb.Compare
		if q.group != "" && !hoistGroup {
			mine = append(mine, q.cmps[0])
		}
		for j, rec := range q.checked {
			if !slices.Contains(commonRecs, rec) {
				mine = append(mine, q.cmps[len(q.cmps)-len(q.checked)+j])
			}
		}
		own[i] = mine
	}
	return common, own
}

// send plans, sends and answers batch, then sends the next batch from
// the queue if one is waiting.
func (b *createBatcher) send(s *Store, batch []*queuedCreate) {
	ctx, cancel := txnbatch.AllGone(len(batch), func(i int) context.Context { return batch[i].ctx })
	retry := b.sendBatch(ctx, s, batch)
	cancel()
	b.mu.Lock()
	b.inFlight--
	for _, q := range batch {
		delete(b.busy, q.quota.Project)
	}
	// Creates planned again go first: they waited longest.
	var again []*queuedCreate
	for _, q := range retry {
		if q.ctx.Err() != nil {
			q.err = q.ctx.Err()
			close(q.done)
			continue
		}
		q.taken = false
		again = append(again, q)
	}
	b.queue = append(again, b.queue...)
	next := b.takeLocked()
	if next != nil {
		b.inFlight++
	}
	b.mu.Unlock()
	if next != nil {
		go b.send(s, next)
	}
}

// sendBatch is one request: it answers every create of batch except
// those it returns, whose share failed and which are to be planned
// again.
func (b *createBatcher) sendBatch(ctx context.Context, s *Store, batch []*queuedCreate) (again []*queuedCreate) {
	answer := func(q *queuedCreate, out createOutcome, err error) {
		q.out, q.err = out, err
		close(q.done)
	}
	var shares []*share
	byProject := map[string]*share{}
	for _, q := range batch {
		sh := byProject[q.quota.Project]
		if sh == nil {
			sh = &share{}
			byProject[q.quota.Project] = sh
			shares = append(shares, sh)
		}
		sh.members = append(sh.members, q)
	}
	// Built as etcd's messages (package rawtxn): no clientv3 cloning.
	var shareTxns []*etcdserverpb.TxnRequest
	var sent []*share
	for _, sh := range shares {
		reqs := make([]quotas.ServerRequest, len(sh.members))
		for i, q := range sh.members {
			reqs[i] = q.quota
		}
		project := sh.members[0].quota.Project
		plan, err := s.quotas.PlanServers(ctx, project, sh.members[0].quota.RequestID, reqs)
		if err != nil {
			for _, q := range sh.members {
				answer(q, 0, err)
			}
			continue
		}
		var admitted []*queuedCreate
		for i, q := range sh.members {
			if plan.Alone[i] {
				answer(q, createAlone, nil)
				continue
			}
			admitted = append(admitted, q)
		}
		if len(admitted) == 0 {
			continue
		}
		sh.plan, sh.members, sh.cmps = plan, admitted, plan.Cmps
		// A record every create was checked against (the image, the
		// flavor and group of the usual batch) would fail them all
		// together: the share compares it once.
		common, own := hoistChecks(admitted)
		sh.hoisted = len(common) > 0
		if sh.hoisted {
			sh.cmps = append(slices.Clip(plan.Cmps), common...)
		}
		txns := slices.Clip(plan.Ops)
		for i, q := range admitted {
			txns = append(txns, rawtxn.Nested(&etcdserverpb.TxnRequest{Compare: own[i], Success: q.ops}))
		}
		sent = append(sent, sh)
		shareTxns = append(shareTxns, &etcdserverpb.TxnRequest{Compare: sh.cmps, Success: txns, Failure: plan.Refresh})
	}
	if len(shareTxns) == 0 {
		return nil
	}
	// One share is the request itself: a nesting level less to encode
	// and apply.
	r := shareTxns[0]
	if len(sent) > 1 {
		r = &etcdserverpb.TxnRequest{Success: make([]*etcdserverpb.RequestOp, len(shareTxns))}
		for i, t := range shareTxns {
			r.Success[i] = rawtxn.Nested(t)
		}
	}
	resp, err := rawtxn.Commit(ctx, b.kv(s), r)
	for i, sh := range sent {
		var res *etcdserverpb.TxnResponse
		switch {
		case err != nil:
		case len(sent) == 1:
			res = (*etcdserverpb.TxnResponse)(resp)
		case i < len(resp.Responses):
			res = resp.Responses[i].GetResponseTxn()
		}
		switch {
		case res == nil:
			s.quotas.ForgetFence(sh.plan.Project)
			lost := err
			if lost == nil {
				lost = errors.New("etcd answered a batch of creates without a nested response for every project")
			}
			for _, q := range sh.members {
				answer(q, 0, fmt.Errorf("%w: %w", errBatchLost, lost))
			}
		case res.Succeeded:
			s.quotas.PlanCommitted(sh.plan, resp.Header.GetRevision())
			for j, q := range sh.members {
				sub := res.Responses[len(sh.plan.Ops)+j].GetResponseTxn()
				if sub != nil && sub.Succeeded {
					answer(q, createStored, nil)
				} else {
					answer(q, createCmpsFailed, nil)
				}
			}
		case !s.quotas.PlanFailed(sh.plan, res.Responses, resp.Header.GetRevision()) && sh.hoisted:
			// The set and fence are as planned: a record the creates were
			// checked against changed.
			for _, q := range sh.members {
				answer(q, createCmpsFailed, nil)
			}
		default:
			// The fence or set moved: plan again from what the Else read.
			for _, q := range sh.members {
				q.tries++
				if q.tries >= maxQuotaTries {
					answer(q, createAlone, nil)
					continue
				}
				again = append(again, q)
			}
		}
	}
	return again
}
