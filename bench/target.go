package bench

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/embedetcd"
	"github.com/berth-project/berth/internal/etcdtally"
	"github.com/berth-project/berth/internal/metrics"
	"github.com/berth-project/berth/internal/stack"
	"github.com/berth-project/berth/placement"
)

// Target is the Berth under load: an etcd client and the compute API,
// and for a Berth the tool started itself (startTarget), its stacks or
// scheduler processes, which the run asks to sync, count claims and
// leases, and crash the leader. An existing Berth (existingTarget) gives
// only the client and the API.
type Target struct {
	Client *clientv3.Client
	Keys   etcdschema.Keys
	API    string
	// Auth logs the load in to Berth's identity API (the compute API in
	// keystone mode); nil when the API is noauth (-noauth).
	Auth *Credentials
	// Schedulers is how many schedulers serve the target (for the report).
	Schedulers int
	// ClaimWorkers is how many claims can be in flight at once (every
	// superconductor's workers); the CAS baseline uses as many workers.
	ClaimWorkers int

	// etcdEndpoints and etcdPrefix reach the etcd the tool started, for
	// fleet processes (-fleet-procs); nil for an existing Berth.
	etcdEndpoints []string
	etcdPrefix    string

	// base is the tool's own stack: etcd, the API and the cell
	// conductors (nil for an existing Berth).
	base *stack.Stack
	// scheds are the in-process schedulers, each with its superconductor
	// in a stack of its own with its own etcd client, so one can be
	// crashed without the others.
	scheds []*stack.Stack
	// procs are the scheduler child processes of -scheduler-procs,
	// instead of scheds.
	procs *schedProcs
	// tally counts the in-process clients' etcd requests (-etcd-tally);
	// nil when off.
	tally *etcdtally.Tally
	// recorderClient is what the recorder watches etcd with: an
	// in-process client of the member the tool started, Client for an
	// existing Berth.
	recorderClient *clientv3.Client
	// fleetClient is the simulated hosts' in-process client (-fleet-etcd
	// in-process); nil: they use Client.
	fleetClient *clientv3.Client
}

// fleetCli is the client the simulated hosts in the tool's process use.
func (t *Target) fleetCli() *clientv3.Client {
	if t.fleetClient != nil {
		return t.fleetClient
	}
	return t.Client
}

// etcdMember is the etcd member the tool started in its process, nil
// for an existing Berth.
func (t *Target) etcdMember() *embedetcd.Server {
	if t.base == nil {
		return nil
	}
	return t.base.EtcdMember()
}

// recorderCli is the client the recorder watches with.
func (t *Target) recorderCli() *clientv3.Client {
	if t.recorderClient != nil {
		return t.recorderClient
	}
	return t.Client
}

// sync waits until every scheduler's placement index and host manager
// (and the tool's own stack's placement index) have seen rev. An
// existing Berth's cannot be asked: nothing to wait for.
func (t *Target) sync(ctx context.Context, rev int64) error {
	if t.base == nil {
		return nil
	}
	for _, s := range append([]*stack.Stack{t.base}, t.scheds...) {
		if err := s.WaitForRevision(ctx, rev); err != nil {
			return err
		}
	}
	if t.procs != nil {
		return t.procs.sync(ctx, rev)
	}
	return nil
}

// claimStats sums the placement claim counters of the tool's own stack
// (its cell conductors claim on reschedules) and of the schedulers,
// in-process or asked of each child; zero for an existing Berth.
func (t *Target) claimStats() placement.ClaimStats {
	var sum placement.ClaimStats
	if t.base == nil {
		return sum
	}
	if t.procs != nil {
		sum = t.procs.claimStats()
	}
	for _, s := range append([]*stack.Stack{t.base}, t.scheds...) {
		sum.Add(s.Placement().ClaimStats())
	}
	return sum
}

// canKill says whether killLeader can: the tool started the schedulers.
func (t *Target) canKill() bool { return len(t.scheds) > 0 || t.procs != nil }

// killLeader crashes the scheduler (with its superconductor) whose
// election id is id, without resigning or revoking anything, as a
// killed process would.
func (t *Target) killLeader(ctx context.Context, id string) error {
	if t.procs != nil {
		return t.procs.kill(ctx, id)
	}
	for _, s := range t.scheds {
		if s.SchedulerID() == id {
			s.Crash()
			return nil
		}
	}
	return fmt.Errorf("no scheduler started here has id %s", id)
}

// countsLeases says whether leaseAttempts can: the superconductors run
// in this process.
func (t *Target) countsLeases() bool { return len(t.scheds) > 0 }

// leaseAttempts sums the superconductor queues' lease transactions that
// won and lost (berth_queue_lease_attempts_total, every turn) over the
// in-process scheduler stacks: what the superconductors' lease attempts
// cost (each holder sees every build request; issue 7), in the report.
func (t *Target) leaseAttempts() (won, lost float64) {
	for _, s := range t.scheds {
		for _, outs := range s.Metrics().QueueLeaseCounts(metrics.QueueBuildRequests) {
			won += outs[metrics.LeaseWon]
			lost += outs[metrics.LeaseLost]
		}
	}
	return won, lost
}

// claimServices are the in-process schedulers' own placement services
// (their watch-fed indexes and claim batching), for the claim baseline;
// nil when the schedulers are in other processes, and the baseline then
// claims through a placement of its own that reads before it writes.
func (t *Target) claimServices() []*placement.Service {
	var out []*placement.Service
	for _, s := range t.scheds {
		out = append(out, s.Placement())
	}
	return out
}

// childCPU is the CPU used so far by the processes the tool started for
// the target besides its own (scheduler processes), so the process CPU of
// a run stays all of the work.
func (t *Target) childCPU() time.Duration {
	if t.procs == nil {
		return 0
	}
	return t.procs.cpuTime()
}
