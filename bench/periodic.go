package bench

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/agent"
	"github.com/berth-project/berth/internal/rolelabel"
)

// The hosts' periodic work, as a real agent's tickers would do it: each
// task (liveness renewal, provider sync, instance sync) visits every host
// once per period, host i at offset period*i/H into the lap, so the work
// is spread evenly over the period as a fleet of agents started at random
// moments spreads it. One dispatcher per task walks this schedule lap by
// lap (sorted by construction; see dispatch for a lap that runs long) and
// hands due slots to a pool of workers (worker_pool.go): no goroutine,
// timer or watch per host. The schedule starts with the fleet, before the hosts register, so
// the rates are a steady fleet's from the first host on rather than
// nothing for a period and then a burst (a host's first slot may come
// soon after its registration: a renewal or sync early, which only a
// fleet started all at once would not do). The renewals have no workers:
// the dispatcher sends each beat and its answer calls back (Fleet.beat).

const (
	taskRenew = iota
	taskProvider
	taskInstances
	numTasks
)

// dispatchSlack is how early a slot may be handed out, so a dispatcher
// wakes at most about once per slack rather than once per host, and the
// runs it hands out at once go out together: at most this, and at most
// a hundredth of the task's period (slackOf), so a host's beat or sync
// comes at most 20 ms early on Nova's 10 s report_interval, the same
// period after period.
//
// Why 20 ms and not 2: each wake-up sent its few beats alone, and their
// answers came back alone, so the fleet's threads slept and woke about
// once a beat (1.2 voluntary context switches per renewal at 5,000 a
// second); the sleeping and waking (futex, epoll, the Go scheduler's
// findRunnable) was most of a child's CPU per beat. At 20 ms the beats of
// a wake-up (100 at 5,000 a second) share the gRPC writes and reads,
// and a fleet child's CPU per renewal fell 2-3x (BenchmarkFleetBackground:
// slack 2/5/10/20/50 ms: 50/24/19/16/12 cpu-us a renewal, 1.2/0.50/0.38/
// 0.26/0.14 context switches). etcd still sees each lease's one beat a
// period, in bursts of 20 ms of the fleet's beats rather than one by one.
const dispatchSlack = 20 * time.Millisecond

// slackOf is the dispatch slack of a task of period every.
func slackOf(every time.Duration) time.Duration { return min(dispatchSlack, every/100) }

type periodicTask struct {
	kind  int
	every time.Duration
	run   func(ctx context.Context, h *fleetHost) error
	// start, when set instead of run, runs a slot with no worker: it
	// starts the run and returns, and the run calls end once with its
	// outcome (from any goroutine). The renewals: a beat is a request on
	// the renewer's stream whose answer calls back
	// (agent.LeaseRenewer.RenewAsync), so no goroutine waits per beat.
	start func(ctx context.Context, h *fleetHost, end func(error))
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
		ts = append(ts, &periodicTask{kind: taskRenew, every: f.every.ReportInterval, start: f.beat})
	}
	if !f.cfg.SkipSyncs {
		ts = append(ts,
			&periodicTask{kind: taskProvider, every: f.every.ProviderSyncInterval,
				run: func(ctx context.Context, h *fleetHost) error {
					defer f.trace.provider.since(time.Now())
					return h.ag.SyncProvider(ctx)
				}},
			&periodicTask{kind: taskInstances, every: f.every.InstanceSyncInterval,
				run: func(ctx context.Context, h *fleetHost) error {
					defer f.trace.instances.since(time.Now())
					return f.syncInstances(ctx, h)
				}})
	}
	return ts
}

// beat is one beat of the host's liveness ticker, the agent's own
// (agent.RenewAlive) in two halves: one renewal sent on the fleet's
// keepalive streams, and once answered the rest, which re-grants the
// lease and writes the alive key again when etcd answers that the lease
// is gone. No goroutine waits for the answer: the renewer calls back on
// its own (the re-grant, two calls to etcd, on a goroutine of its own).
//
// Why: with a worker waiting on each beat a beat was the dispatcher
// waking a worker, the worker queueing the request and parking on a
// channel and a timer, and the answer waking it again: at 5,000 beats a
// second a fleet child's threads slept and woke for each, and the Go
// scheduler's hand-offs (findRunnable, futex, epoll) were the largest
// part of its CPU per beat (BenchmarkFleetBackground).
func (f *Fleet) beat(work context.Context, h *fleetHost, end func(error)) {
	old := clientv3.LeaseID(h.lease.Load())
	start := time.Now()
	since := start.Sub(time.Unix(0, h.lastAnswer.Load()))
	f.trace.since.add(since)
	f.renewer.RenewAsync(old, func(_ int64, err error) {
		if errors.Is(err, agent.ErrLeaseLost) && work.Err() == nil {
			go func() { end(f.renewed(work, h, old, start, since, err)) }()
			return
		}
		end(f.renewed(work, h, old, start, since, err))
	})
}

// renewed is the rest of h's beat once its renewal of old, started at
// start, since after the lease's last answer, is answered with renewErr:
// the agent's (a new lease if it was lost), and the fleet's records.
func (f *Fleet) renewed(ctx context.Context, h *fleetHost, old clientv3.LeaseID, start time.Time, since time.Duration,
	renewErr error) error {
	id, err := h.ag.RenewedAlive(ctx, old, renewErr)
	now := time.Now()
	switch {
	case id != old:
		h.lease.Store(int64(id))
		f.regrants.Add(1)
		switch ttl := f.every.ServiceDownTime; {
		case !h.renewed.Load() && since >= ttl:
			f.trace.lostFirst.Add(1)
		case since >= ttl:
			f.trace.lostSentLate.Add(1)
		default:
			f.trace.lostAnsweredLate.Add(1)
		}
		h.renewed.Store(false)
		h.lastAnswer.Store(now.UnixNano())
	case err == nil:
		f.trace.renew.add(now.Sub(start))
		h.renewed.Store(true)
		h.lastAnswer.Store(now.UnixNano())
	case ctx.Err() == nil:
		f.trace.renewErrors.Add(1)
	}
	return err
}

// startPeriodic starts the dispatchers and workers: the dispatchers stop
// when ctx ends, the workers once they have finished the runs handed out
// (f.bgWG waits for both); the runs use work.
//
// Each task has workers of its own. With one pool for all three, the
// dispatchers took turns handing it slots, so once the syncs' calls
// slowed (etcd busy registering hosts) the workers were mostly waiting
// on syncs, renewals started as rarely as syncs did, and leases expired
// unrenewed though etcd answered every renewal within 128 ms (a
// 20,000-host run at a 2 s beat and 12 s TTL: 7,450 of 20,000 leases
// lost while registering, every one counted "first beat" by
// livenessTrace). An agent beats on a goroutine of its own, never
// behind its syncs; so does the fleet.
func (f *Fleet) startPeriodic(ctx, work context.Context) {
	if len(f.tasks) == 0 {
		return
	}
	for _, t := range f.tasks {
		if t.start != nil {
			// Dispatched without workers: the slots start their runs.
			f.bgWG.Add(1)
			rolelabel.Go(ctx, "agent fleet background", func(context.Context) {
				defer f.bgWG.Done()
				f.dispatch(ctx, t, func(j periodicJob) bool {
					f.startJob(work, j)
					return true
				})
			})
			continue
		}
		// The hosts' syncs, profiled apart from their builds.
		pool := newWorkerPool(ctx, "agent fleet background", f.cfg.BackgroundWorkers, func(j periodicJob) { f.runJob(work, j) }, &f.bgWG)
		f.bgWG.Add(1)
		go func() {
			defer f.bgWG.Done()
			defer pool.close() // the task's workers end once their runs are done
			f.dispatch(ctx, t, func(j periodicJob) bool { return pool.submit(ctx, j) })
		}()
	}
}

// runJob runs one slot of a task, counting it.
func (f *Fleet) runJob(work context.Context, j periodicJob) {
	f.slotStarted(j)
	f.slotEnded(work, j, j.t.run(work, j.h))
}

// startJob starts one slot of a task run without a worker (start); it
// is counted when it ends. The run is counted in bgWG until then.
func (f *Fleet) startJob(work context.Context, j periodicJob) {
	f.slotStarted(j)
	f.bgWG.Add(1)
	j.t.start(work, j.h, func(err error) {
		f.slotEnded(work, j, err)
		f.bgWG.Done()
	})
}

// slotStarted notes how late a slot's run started.
func (f *Fleet) slotStarted(j periodicJob) {
	late := time.Since(j.due)
	f.noteLate(late)
	if j.t.kind == taskRenew {
		f.trace.slot.add(late)
	}
	if late > j.t.every {
		j.t.periodLate.Add(1)
	}
}

// slotEnded counts a slot's run by its outcome and frees its host for
// the task's next slot.
func (f *Fleet) slotEnded(work context.Context, j periodicJob, err error) {
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

// dispatch walks t's schedule until ctx ends, lap by lap (a lap visits
// every host once, in order). A host that has not registered yet is
// passed over, as is one whose previous run of t is still going. When
// busy workers hold the dispatcher up, the slots after it run late but in
// order, so every host waits alike, as real agents all waiting on one
// slow etcd do; and a lap that ran long is followed by the next from the
// moment it ended, not from its nominal start: the missed beats are not
// made up in a burst (an agent's time.Ticker drops the ticks of a slow
// receiver), so no host runs t twice within a period.
func (f *Fleet) dispatch(ctx context.Context, t *periodicTask, submit func(periodicJob) bool) {
	n := int64(len(f.hosts))
	every := int64(t.every)
	slack := slackOf(t.every)
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
		if d := time.Until(due); d > slack {
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
		if !submit(periodicJob{t: t, h: h, due: due}) {
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
	// InstanceSyncWrites are the instance syncs (periodic or at
	// registration) that wrote the host's HostSync.
	InstanceSyncWrites int64
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
	// Liveness says how long grants and beats took and why leases
	// were lost (livenessTrace).
	Liveness LivenessStats
}

// Background snapshots the periodic work's counters.
func (f *Fleet) Background() BackgroundStats {
	s := BackgroundStats{Regrants: f.regrants.Load(), InstanceSyncWrites: f.syncWrites.Load(), MaxLate: time.Duration(f.maxLate.Load()),
		Liveness: f.trace.snapshot()}
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
