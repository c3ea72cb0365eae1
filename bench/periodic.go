package bench

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/internal/rolelabel"
)

// The hosts' periodic work, as a real agent's tickers would do it: each
// task (liveness renewal, provider sync, instance sync) visits every host
// once per period, host i at offset period*i/H into the lap, so the work
// is spread evenly over the period as a fleet of agents started at random
// moments spreads it. One dispatcher per task walks this schedule lap by
// lap (sorted by construction; see dispatch for a lap that runs long) and
// hands due slots to a pool of workers: no goroutine, timer or watch per
// host. The schedule starts with the fleet, before the hosts register, so
// the rates are a steady fleet's from the first host on rather than
// nothing for a period and then a burst (a host's first slot may come
// soon after its registration: a renewal or sync early, which only a
// fleet started all at once would not do).

const (
	taskRenew = iota
	taskProvider
	taskInstances
	numTasks
)

// dispatchSlack is how early a slot may be handed out, so a dispatcher
// wakes at most about once per slack rather than once per host.
const dispatchSlack = 2 * time.Millisecond

type periodicTask struct {
	kind  int
	every time.Duration
	run   func(ctx context.Context, h *fleetHost) error
	// done and failed count runs; overlapped counts slots passed over
	// because the host's previous run of the task had not finished,
	// periodLate runs that started a whole period or more after their
	// slot.
	done, failed, overlapped, periodLate atomic.Int64
}

type periodicJob struct {
	t   *periodicTask
	h   *fleetHost
	due time.Time
}

func (f *Fleet) periodicTasks() []*periodicTask {
	var ts []*periodicTask
	if f.cfg.Liveness == LivenessPerHost {
		ts = append(ts, &periodicTask{kind: taskRenew, every: f.every.ReportInterval, run: f.renew})
	}
	if !f.cfg.SkipSyncs {
		ts = append(ts,
			&periodicTask{kind: taskProvider, every: f.every.ProviderSyncInterval,
				run: func(ctx context.Context, h *fleetHost) error { return h.ag.SyncProvider(ctx) }},
			&periodicTask{kind: taskInstances, every: f.every.InstanceSyncInterval,
				run: func(ctx context.Context, h *fleetHost) error { return h.ag.SyncInstances(ctx) }})
	}
	return ts
}

// renew is one beat of the host's liveness ticker: the agent's own beat,
// one renewal on the fleet's shared keepalive stream, which re-grants the
// lease and writes the alive key again when etcd answers that the lease
// is gone.
func (f *Fleet) renew(ctx context.Context, h *fleetHost) error {
	old := clientv3.LeaseID(h.lease.Load())
	id, err := h.ag.RenewAlive(ctx, f.renewer, old)
	if id != old {
		h.lease.Store(int64(id))
		f.regrants.Add(1)
	}
	return err
}

// startPeriodic starts the dispatchers and workers: the dispatchers stop
// when ctx ends, the workers once they have finished the runs handed out
// (f.bgWG waits for both); the runs use work.
func (f *Fleet) startPeriodic(ctx, work context.Context) {
	if len(f.tasks) == 0 {
		return
	}
	jobs := make(chan periodicJob, f.cfg.BackgroundWorkers)
	for w := 0; w < f.cfg.BackgroundWorkers; w++ {
		f.bgWG.Add(1)
		// The hosts' liveness and syncs, profiled apart from their builds.
		rolelabel.Go(ctx, "agent fleet background", func(context.Context) {
			defer f.bgWG.Done()
			for j := range jobs {
				late := time.Since(j.due)
				f.noteLate(late)
				if late > j.t.every {
					j.t.periodLate.Add(1)
				}
				err := j.t.run(work, j.h)
				switch {
				case work.Err() != nil:
				case err != nil:
					j.t.failed.Add(1)
					f.log.Debug("periodic host work failed", "task", j.t.kind, "error", err)
				default:
					j.t.done.Add(1)
				}
				j.h.busy[j.t.kind].Store(false)
			}
		})
	}
	var dispatchers sync.WaitGroup
	for _, t := range f.tasks {
		dispatchers.Add(1)
		go func() {
			defer dispatchers.Done()
			f.dispatch(ctx, t, jobs)
		}()
	}
	f.bgWG.Add(1)
	go func() {
		defer f.bgWG.Done()
		dispatchers.Wait()
		close(jobs)
	}()
}

// dispatch walks t's schedule until ctx ends, lap by lap (a lap visits
// every host once, in order). A host that has not registered yet is
// passed over, as is one whose previous run of t is still going. When
// busy workers hold the dispatcher up, the slots after it run late but in
// order, so every host waits alike, as real agents all waiting on one
// slow etcd do; and a lap that ran long is followed by the next from the
// moment it ended, not from its nominal start: the missed beats are not
// made up in a burst (an agent's time.Ticker drops the ticks of a slow
// receiver), so no host runs t twice within a period.
func (f *Fleet) dispatch(ctx context.Context, t *periodicTask, jobs chan<- periodicJob) {
	n := int64(len(f.hosts))
	every := int64(t.every)
	lap := time.Now()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for k := int64(0); ; k++ {
		i := k % n
		if i == 0 && k > 0 {
			lap = lap.Add(t.every)
			if now := time.Now(); now.After(lap) {
				lap = now
			}
		}
		due := lap.Add(time.Duration(every * i / n))
		if d := time.Until(due); d > dispatchSlack {
			timer.Reset(d)
			select {
			case <-timer.C:
			case <-ctx.Done():
				return
			}
		}
		h := f.hosts[i]
		if h.lease.Load() == 0 {
			continue
		}
		if !h.busy[t.kind].CompareAndSwap(false, true) {
			t.overlapped.Add(1)
			continue
		}
		select {
		case jobs <- periodicJob{t: t, h: h, due: due}:
		case <-ctx.Done():
			h.busy[t.kind].Store(false)
			return
		}
	}
}

func (f *Fleet) noteLate(d time.Duration) {
	for {
		cur := f.maxLate.Load()
		if int64(d) <= cur || f.maxLate.CompareAndSwap(cur, int64(d)) {
			return
		}
	}
}

// BackgroundStats counts the hosts' periodic work since the fleet
// registered.
type BackgroundStats struct {
	// Renewals are liveness beats answered (per-host leases only),
	// ProviderSyncs and InstanceSyncs the periodic syncs, that succeeded.
	Renewals, ProviderSyncs, InstanceSyncs int64
	// Failures are periodic runs that returned an error.
	Failures int64
	// Regrants are leases found lost and granted again (alive key
	// rewritten).
	Regrants int64
	// Overlapped are slots passed over because the host's previous run
	// of the task had not finished; PeriodLate are runs that started a
	// whole period or more after their slot (the workers waited on a
	// saturated etcd).
	Overlapped, PeriodLate int64
	// MaxLate is the longest a run started after its slot, since the
	// last ResetLate.
	MaxLate time.Duration
}

// Background snapshots the periodic work's counters.
func (f *Fleet) Background() BackgroundStats {
	s := BackgroundStats{Regrants: f.regrants.Load(), MaxLate: time.Duration(f.maxLate.Load())}
	for _, t := range f.tasks {
		switch t.kind {
		case taskRenew:
			s.Renewals = t.done.Load()
		case taskProvider:
			s.ProviderSyncs = t.done.Load()
		case taskInstances:
			s.InstanceSyncs = t.done.Load()
		}
		s.Failures += t.failed.Load()
		s.Overlapped += t.overlapped.Load()
		s.PeriodLate += t.periodLate.Load()
	}
	return s
}

// ResetLate restarts MaxLate (at the start of a measured phase).
func (f *Fleet) ResetLate() { f.maxLate.Store(0) }
