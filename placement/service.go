package placement

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/informer"
	"github.com/berth-project/berth/internal/metrics"
)

// allocationConflictRetryCount is Placement's allocation_conflict_retry_count:
// how often a claim that lost a race on a provider generation is re-read and
// retried before the caller sees ErrConcurrentUpdate.
const allocationConflictRetryCount = 10

// Service is placement: the etcd store, the watch-fed in-memory index used
// for candidate searches, and the claim transactions. One Service may run in
// many processes at once; etcd transactions settle every race.
type Service struct {
	cli  *clientv3.Client
	keys etcdschema.Keys
	log  hclog.Logger
	idx  *index
	// inf keeps idx in step with the placement prefix (follow.go).
	inf *informer.Informer
	// revs shares syncIndex's revision reads among concurrent callers
	// (sync_revision.go).
	revs *revisionReads
	now  func() time.Time

	// claims sends allocation writes ready at the same moment as one
	// etcd transaction (group commit; claim_batch.go).
	claims *claimBatcher

	// RetryCount overrides allocationConflictRetryCount (tests).
	retryCount int

	metrics *metrics.Metrics // nil: not counted

	// claimRaces counts claim transactions that lost a race and were
	// retried; claimGaveUp those that ran out of retries; claimWrites and
	// claimNanos the successful allocation writes (claims and frees) and
	// their time, reads and retries included. berth bench reports them
	// (ClaimStats) whether or not metrics are served.
	claimRaces, claimGaveUp atomic.Int64
	claimWrites, claimNanos atomic.Int64
	// claimReplans counts claims planned from the index again, unsent,
	// because a concurrent claim of this service committed first.
	claimReplans atomic.Int64

	// candidateWorkLimit is the steps one candidate search may take,
	// candidateSteps the steps taken so far by all, searchLockMax the
	// longest a search held the index's read lock, in nanoseconds
	// (candidate_budget.go).
	candidateWorkLimit, candidateSteps, searchLockMax atomic.Int64
	// searchViewAbove is the most combinations a merge tries under the
	// index's lock (candidate_view.go).
	searchViewAbove atomic.Int64
	// searchViews counts the searches that moved to a view.
	searchViews atomic.Int64

	// beforeDeleteTxn, when set (tests), runs between DeleteProvider's
	// checks and its transaction, to force the race the transaction's
	// compare must catch.
	beforeDeleteTxn func(id string)
}

// ClaimStats counts a service's allocation writes since New.
type ClaimStats struct {
	// Races is how many claim transactions lost a race (each was re-read
	// and retried), GaveUp how many writes ran out of retries.
	Races, GaveUp int64
	// Writes is how many allocation writes (claims, frees) succeeded and
	// Time their total duration, reads and retries included.
	Writes int64
	Time   time.Duration
	// Txns is how many claim transactions were sent and Batched how many
	// claims they carried (Batched/Txns claims per transaction: the group
	// commit's effect).
	Txns, Batched int64
	// Replans is how many claims were planned again from the index,
	// without a transaction or a read, because a concurrent claim of the
	// same service on the same provider committed first (not races: no
	// transaction lost).
	Replans int64
}

// Add adds o's counters to c (several services' sums).
func (c *ClaimStats) Add(o ClaimStats) {
	c.Races += o.Races
	c.GaveUp += o.GaveUp
	c.Writes += o.Writes
	c.Time += o.Time
	c.Txns += o.Txns
	c.Batched += o.Batched
	c.Replans += o.Replans
}

// ClaimStats returns the service's claim counters.
func (s *Service) ClaimStats() ClaimStats {
	txns, batched := s.claims.counts()
	return ClaimStats{Races: s.claimRaces.Load(), GaveUp: s.claimGaveUp.Load(), Writes: s.claimWrites.Load(),
		Time: time.Duration(s.claimNanos.Load()), Txns: txns, Batched: batched, Replans: s.claimReplans.Load()}
}

// New returns a Service on cli. Call Start before AllocationCandidates.
func New(cli *clientv3.Client, keys etcdschema.Keys, log hclog.Logger) *Service {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	s := &Service{
		cli:        cli,
		keys:       keys,
		log:        log.Named("placement"),
		idx:        newIndex(),
		now:        func() time.Time { return time.Now().UTC() },
		retryCount: allocationConflictRetryCount,
		claims:     newClaimBatcher(cli), // its KV read at each send, as cli.Txn did
	}
	s.candidateWorkLimit.Store(DefaultCandidateWorkLimit)
	s.searchViewAbove.Store(lockedMergeSteps)
	// Resume: a watch broken by an etcd election is taken up where it
	// stopped; only a compaction costs a re-list of every record.
	// OwnStream: every read of the Placement API waits for the index to
	// reach etcd's revision, through a progress request when the writes
	// were elsewhere, and etcd answers none on a stream where another
	// watch starts after its revision (an informer listed since the last
	// write, common on an idle dev as its agents start): alone on its
	// stream the index never waits out the informer's stall detection.
	s.inf = informer.NewRaw(cli, keys.PlacementPrefix(), indexFeed{s}, s.log, informer.Resume(), informer.OwnStream())
	s.revs = &revisionReads{timeout: revisionReadTimeout, read: func(ctx context.Context) (int64, error) {
		resp, err := cli.Get(ctx, keys.PlacementPrefix(), clientv3.WithCountOnly())
		if err != nil {
			return 0, err
		}
		return resp.Header.Revision, nil
	}}
	return s
}

// revisionReadTimeout bounds one shared read of etcd's revision: its
// callers wait with their own contexts, and a read nobody waits for any
// more ends by this.
const revisionReadTimeout = 10 * time.Second

// Start loads every provider and consumer into the index and then follows
// etcd from that revision. It returns once the first load is done; the
// watch runs until ctx is done.
func (s *Service) Start(ctx context.Context) error {
	rev, err := s.load(ctx)
	if err != nil {
		return fmt.Errorf("placement start: %w", err)
	}
	go s.follow(ctx, rev)
	return nil
}

// WaitForRevision returns once the index has applied etcd revision rev
// (read-your-writes: the scheduler passes a BuildRequest's revision).
// Revisions written outside placement's prefix produce no watch events;
// the informer asks etcd for progress notifications meanwhile.
func (s *Service) WaitForRevision(ctx context.Context, rev int64) error {
	return s.inf.WaitForRevision(ctx, rev)
}

// syncIndex makes the index at least as new as etcd is now, so a read from
// it sees every write that finished before the call (read-your-writes
// across placement servers). The revision read is shared with concurrent
// callers, each getting one read after its call began (revisionReads).
func (s *Service) syncIndex(ctx context.Context) error {
	rev, err := s.revs.revision(ctx)
	if err != nil {
		return fmt.Errorf("read etcd revision: %w", err)
	}
	return s.WaitForRevision(ctx, rev)
}

// IndexRevision is the etcd revision the index has applied.
func (s *Service) IndexRevision() int64 { return s.idx.revision() }

// ConsumerRecord is one consumer as read from etcd (ConsumerPage), with
// the mod revision of its record (a guard for a write that must see it
// unchanged).
type ConsumerRecord struct {
	Consumer *etcdschema.Consumer
	ModRev   int64
}
