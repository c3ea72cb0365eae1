// Package leader elects one scheduler to lead and runs the leader's
// singleton duties while it does: down-host handling, orphaned-allocation
// and stale-alternates clean-up, and stuck build requests (duties.go);
// the automatic confirm of resizes, Nova's resize_confirm_window
// (auto_confirm.go); etcd's space: defragmenting members one at a time and recovering from
// the NOSPACE alarm (etcdspace.go).
// Every scheduler runs a candidate; at most one leads at a time, and every
// leader write carries the term's Fence, so a deposed leader that has not
// noticed yet cannot write.
package leader

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/backoff"
	"github.com/berth-project/berth/internal/metrics"
)

// ErrNotLeader is returned by a fenced write whose fence no longer holds:
// the writer's election key is gone or was re-created, so another
// scheduler may lead now and the write was refused.
var ErrNotLeader = errors.New("not the leader: fenced write refused")

// Fence is the fencing token of one term of leadership: the election key
// the leader won with and that key's create revision. It holds while that
// exact key exists; when the session's lease expires the key is deleted,
// and a new key (even from the same process) has a new create revision.
type Fence struct {
	Key string
	Rev int64
}

// Cmp is the compare every leader write carries.
func (f Fence) Cmp() clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(f.Key), "=", f.Rev)
}

// Txn runs ops if the fence holds and cmps hold. It returns ErrNotLeader
// when the fence failed, and false when only cmps failed (the state the
// leader read has changed: it writes nothing and looks again next sweep).
func (f Fence) Txn(ctx context.Context, cli *clientv3.Client, cmps []clientv3.Cmp, ops ...clientv3.Op) (bool, error) {
	resp, err := cli.Txn(ctx).If(f.Cmp()).Then(clientv3.OpTxn(cmps, ops, nil)).Commit()
	if err != nil {
		return false, err
	}
	if !resp.Succeeded {
		return false, ErrNotLeader
	}
	return resp.Responses[0].GetResponseTxn().Succeeded, nil
}

// Duty is one of the leader's singleton jobs, run every Interval while
// this scheduler leads, with the fence of the current term.
type Duty struct {
	Name     string
	Interval time.Duration
	Run      func(ctx context.Context, f Fence) error
}

// Config configures an election candidate.
type Config struct {
	Client *clientv3.Client
	Keys   etcdschema.Keys
	// Election is the name the candidates campaign under
	// (/elections/<name>): the schedulers' role, scheduler.Role.
	Election string
	// ID names this candidate (the election value, and logs).
	ID string
	// TTL is the session lease: a dead leader is replaced within it.
	TTL    time.Duration
	Duties []Duty
	Log    hclog.Logger
	// Metrics counts terms and duty sweeps (nil: not counted).
	Metrics *metrics.Metrics
}

// Leader campaigns in /elections/<Election> and, while elected, runs the
// duties. Every scheduler runs one; at most one leads at a time, and every
// leader write is fenced so that a deposed leader that has not noticed yet
// cannot write.
type Leader struct {
	cfg Config

	mu      sync.Mutex
	fence   *Fence
	changed chan struct{} // closed and replaced on every change of fence
}

// New returns a candidate; Run campaigns.
func New(cfg Config) *Leader {
	for _, d := range cfg.Duties {
		cfg.Metrics.DeclareDuties(d.Name)
	}
	return &Leader{cfg: cfg, changed: make(chan struct{})}
}

// Fence returns the current term's fence, and false when not leading.
func (l *Leader) Fence() (Fence, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fence == nil {
		return Fence{}, false
	}
	return *l.fence, true
}

// Changed returns a channel closed at the next gain or loss of leadership.
func (l *Leader) Changed() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.changed
}

func (l *Leader) setFence(f *Fence) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.fence = f
	close(l.changed)
	l.changed = make(chan struct{})
}

// Run campaigns until ctx ends, leading whenever elected. On ctx's end a
// leader resigns at once so another takes over without waiting the TTL.
func (l *Leader) Run(ctx context.Context) error {
	if l.cfg.Election == "" {
		return errors.New("leader: no election name configured")
	}
	ttl := int(l.cfg.TTL / time.Second)
	if ttl < 1 {
		ttl = 1
	}
	log := l.cfg.Log
	backoff := backoff.Default()
	for ctx.Err() == nil {
		sess, err := concurrency.NewSession(l.cfg.Client, concurrency.WithTTL(ttl), concurrency.WithContext(ctx))
		if err != nil {
			if ctx.Err() == nil {
				log.Warn("leader election: no session, retrying", "error", err, "backoff", backoff.Current())
				backoff.Wait(ctx)
			}
			continue
		}
		backoff.Reset()
		l.term(ctx, sess)
		// Revoke with a fresh context: when ctx is done, Close would
		// revoke with it and only log a cancelled call, leaving the lease
		// to expire.
		sess.Orphan()
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		_, _ = l.cfg.Client.Revoke(rctx, sess.Lease())
		cancel()
	}
	return nil
}

// term is one session: campaign, lead until the session or ctx ends.
func (l *Leader) term(ctx context.Context, sess *concurrency.Session) {
	log := l.cfg.Log
	e := concurrency.NewElection(sess, l.cfg.Keys.Election(l.cfg.Election))
	// Campaigning stops when the session dies, so a candidate whose lease
	// expired while waiting starts over with a new one.
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-sess.Done():
			cancel()
		case <-cctx.Done():
		}
	}()
	if err := e.Campaign(cctx, l.cfg.ID); err != nil {
		if ctx.Err() == nil {
			log.Debug("campaign ended without winning", "error", err)
		}
		return
	}
	f := Fence{Key: e.Key(), Rev: e.Rev()}
	l.setFence(&f)
	l.cfg.Metrics.Leading(true)
	defer l.cfg.Metrics.Leading(false)
	log.Info("elected leader", "id", l.cfg.ID, "election_key", f.Key, "fence_revision", f.Rev)
	var wg sync.WaitGroup
	for _, d := range l.cfg.Duties {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.runDuty(cctx, d, f)
		}()
	}
	<-cctx.Done()
	wg.Wait()
	l.setFence(nil)
	if ctx.Err() != nil {
		rctx, rcancel := context.WithTimeout(context.Background(), 2*time.Second)
		if err := e.Resign(rctx); err != nil {
			log.Warn("could not resign leadership; it passes on when the lease expires", "error", err)
		}
		rcancel()
		log.Info("resigned leadership", "id", l.cfg.ID)
		return
	}
	log.Warn("lost leadership: the election session ended", "id", l.cfg.ID)
}

// runDuty runs d at once and then every interval until ctx ends or a
// fenced write says we no longer lead.
func (l *Leader) runDuty(ctx context.Context, d Duty, f Fence) {
	log := l.cfg.Log.With("duty", d.Name)
	t := time.NewTicker(d.Interval)
	defer t.Stop()
	for {
		start := time.Now()
		err := d.Run(ctx, f)
		switch {
		case errors.Is(err, ErrNotLeader):
			l.cfg.Metrics.ObserveDuty(d.Name, metrics.DutyNotLeader, start)
			log.Warn("duty stopped: fenced write refused, another scheduler leads")
			return
		case err != nil && ctx.Err() == nil:
			l.cfg.Metrics.ObserveDuty(d.Name, metrics.DutyError, start)
			log.Warn("duty failed; retrying next interval", "error", err)
		case err == nil:
			l.cfg.Metrics.ObserveDuty(d.Name, metrics.DutyOK, start)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// String names the fence for logs.
func (f Fence) String() string { return fmt.Sprintf("%s@%d", f.Key, f.Rev) }
