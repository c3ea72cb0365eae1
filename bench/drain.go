package bench

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/api"
	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/backoff"
)

// The drain scenario: a loaded cloud (-servers booted anywhere), then
// -servers-per-host servers pinned to each of -drain-hosts hosts, then
// every one of those hosts drained at once through /v1, each
// -drain-parallel moves at a time, until every drain has ended. It
// reports moves per second over the drains' whole time, one move's
// time from its migration's request to its confirm (the migration
// record's created and last-updated times), and the process's CPU per
// move. A move that failed, a drain that did not complete and a server
// not ACTIVE off its drained host afterwards fail the run; timings
// never do.

func (r *runner) drain(ctx context.Context) error {
	cfg := r.cfg
	drained := r.drainedHosts()
	r.res.DrainedHosts, r.res.ServersPerHost, r.res.DrainParallel = len(drained), cfg.ServersPerHost, cfg.DrainParallel
	r.res.Servers, r.res.Clients, r.res.BuildTime = cfg.Servers, cfg.Clients, cfg.BuildTime.String()
	// The load: the cloud's servers anywhere, then the drained hosts'.
	per := int64(cfg.ServersPerHost)
	moving, err := r.createTracked(ctx, "the drained hosts' servers", len(drained)*cfg.ServersPerHost, func(i int64) api.CreateRequest {
		return api.CreateRequest{Name: fmt.Sprintf("drained-%d", i), Flavor: "m1.tiny", Count: 1, Host: drained[(i-1)/per]}
	})
	if err != nil {
		return fmt.Errorf("drain: %w", err)
	}
	for _, id := range moving {
		if !r.rec.isActive(id) {
			st := "unknown"
			if s, err := r.nova.showServer(ctx, id); err == nil {
				st = s.Status + " on " + s.Host
			}
			return fmt.Errorf("drain: server %s pinned to a drained host did not go ACTIVE (now %s; the load before any drain)", id, st)
		}
	}

	stop := r.progress(ctx, func() string { return r.drainProgress(ctx, drained) })
	defer stop()
	m, err := r.startMeasuring(ctx)
	if err != nil {
		return err
	}
	endPhase := r.cfg.OnPhase("moves")
	defer endPhase() // stopping a profile twice is harmless
	body := api.DrainRequest{Parallel: cfg.DrainParallel}
	if err := r.forEachHost(ctx, drained, func(h string) error {
		return r.nova.doAt(ctx, http.MethodPost, "/v1/hosts/"+url.PathEscape(h)+"/drain", body, nil)
	}); err != nil {
		return fmt.Errorf("drain: start: %w", err)
	}
	views, err := r.waitDrains(ctx, drained)
	took := time.Since(m.start)
	cpu := r.cpuTime() - m.cpu
	endPhase()
	if err != nil {
		return fmt.Errorf("drain: %w", err)
	}
	r.res.Seconds, r.res.CPUSeconds, r.res.HeapMB = took.Seconds(), cpu.Seconds(), heapMB()
	var failures []string
	for _, v := range views {
		c := v.Counts
		r.res.Moves += c[etcdschema.DrainMoved]
		r.res.MovesFailed += c[etcdschema.DrainFailed]
		if v.State != etcdschema.DrainComplete {
			failures = append(failures, fmt.Sprintf("%s ended %s: %s", v.Host, v.State, v.Error))
		}
		for _, s := range v.Instances {
			if s.State == etcdschema.DrainFailed {
				failures = append(failures, fmt.Sprintf("%s: %s", s.UUID, s.Reason))
			}
		}
	}
	r.noteMoveRates(took, cpu)
	times, err := r.moveTimes(ctx, drained)
	if err != nil {
		return err
	}
	p := pct(times)
	r.res.Move = &p
	stillOn, err := r.checkMovedOff(ctx, moving, drained)
	if err != nil {
		return err
	}
	failures = append(failures, stillOn...)
	if len(failures) > 0 {
		return fmt.Errorf("drain: %d problems, first: %s", len(failures), failures[0])
	}
	return nil
}

// drainedHosts are -drain-hosts of the fleet's hosts, spread evenly (and
// so over the cells, which take hosts round-robin).
func (r *runner) drainedHosts() []string {
	n, all := r.cfg.DrainHosts, r.fleet.Hosts()
	out := make([]string, 0, n)
	for k := 0; k < n; k++ {
		out = append(out, r.fleet.HostName(1+k*all/n))
	}
	return out
}

// createAll posts n servers from the clients, then waits until every one
// has finished building.
func (r *runner) createAll(ctx context.Context, n int, req func(i int64) api.CreateRequest) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errc := make(chan error, r.cfg.Clients)
	for c := 0; c < r.cfg.Clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > int64(n) || ctx.Err() != nil {
					return
				}
				q := req(i)
				t0 := time.Now()
				id, err := r.nova.createServer(ctx, q)
				// A 503 is the API saying etcd did not answer in time
				// (a loaded machine): tried again, as a client would,
				// a few times; counted as API errors.
				var ae *api.APIError
				for try := 0; try < 5 && errors.As(err, &ae) && ae.Status == http.StatusServiceUnavailable; try++ {
					r.apiErrors.Add(1)
					if !backoff.Sleep(ctx, time.Duration(try+1)*time.Second) {
						break
					}
					t0 = time.Now()
					id, err = r.nova.createServer(ctx, q)
				}
				t1 := time.Now()
				r.posted.Add(1)
				if err != nil {
					r.apiErrors.Add(1)
					errc <- fmt.Errorf("create server: %w", err)
					return
				}
				r.rec.Expect([]string{id}, t0, t1)
				r.expected.Add(1)
				r.idsMu.Lock()
				r.ids = append(r.ids, id)
				r.idsMu.Unlock()
			}
		}()
	}
	wg.Wait()
	select {
	case err := <-errc:
		return err
	default:
	}
	wctx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
	defer cancel()
	if err := r.rec.WaitFinished(wctx, int(r.expected.Load())); err != nil {
		return fmt.Errorf("%w; unfinished:%s", err, r.unfinishedReport(ctx))
	}
	return nil
}

// createTracked boots a move scenario's servers: the cloud's load
// (-servers of the boot's requests, anywhere), then n servers made by req
// (named what in errors), and returns the latter's uuids, the servers
// the scenario moves and checks. All have finished building by then.
func (r *runner) createTracked(ctx context.Context, what string, n int, req func(i int64) api.CreateRequest) ([]string, error) {
	if err := r.createAll(ctx, r.cfg.Servers, func(i int64) api.CreateRequest { return r.request(i) }); err != nil {
		return nil, fmt.Errorf("the cloud's load: %w", err)
	}
	r.idsMu.Lock()
	r.ids = nil
	r.idsMu.Unlock()
	if err := r.createAll(ctx, n, req); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	r.idsMu.Lock()
	defer r.idsMu.Unlock()
	return slices.Clone(r.ids), nil
}

// noteMoveRates sets what a move scenario reports per move, from r.res.Moves
// and the measured phase's wall time and process CPU.
func (r *runner) noteMoveRates(took, cpu time.Duration) {
	r.res.Measured = r.res.Moves
	if r.res.Moves > 0 {
		r.res.MovesPerSec = float64(r.res.Moves) / took.Seconds()
		r.res.CPUMsPerMove = float64(cpu.Microseconds()) / 1000 / float64(r.res.Moves)
	}
}

// forEachHost runs fn for every host from the clients.
func (r *runner) forEachHost(ctx context.Context, hosts []string, fn func(h string) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for c := 0; c < min(r.cfg.Clients, len(hosts)); c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1); i <= int64(len(hosts)) && ctx.Err() == nil; i = next.Add(1) {
				if err := fn(hosts[i-1]); err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("%s: %w", hosts[i-1], err))
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// waitDrains waits until every drain has ended with no move in flight,
// or the run's timeout, reading the drains' records from etcd in one
// range every 250 ms; then it reads each drain's view through the API
// once. (It polled every host's drain through the API every 100 ms: at
// 100 drains a sixth of the process's CPU went to the tool's own
// polling and its requests' handling, counted in the CPU per move.)
func (r *runner) waitDrains(ctx context.Context, hosts []string) ([]api.DrainView, error) {
	deadline := time.Now().Add(r.cfg.Timeout)
	for {
		ended, err := r.drainsEnded(ctx, hosts)
		if err != nil {
			return nil, err
		}
		if ended {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("drains still going after %s", r.cfg.Timeout)
		}
		if !backoff.Sleep(ctx, 250*time.Millisecond) {
			return nil, ctx.Err()
		}
	}
	out := make([]api.DrainView, len(hosts))
	err := r.forEachHost(ctx, hosts, func(h string) error {
		var v struct {
			Drain api.DrainView `json:"drain"`
		}
		if err := r.nova.doAt(ctx, http.MethodGet, "/v1/hosts/"+url.PathEscape(h)+"/drain", nil, &v); err != nil {
			return err
		}
		out[slices.Index(hosts, h)] = v.Drain
		return nil
	})
	return out, err
}

// drainsEnded says whether every one of hosts' drains has ended with no
// move in flight, from one read of the drains' prefix.
func (r *runner) drainsEnded(ctx context.Context, hosts []string) (bool, error) {
	resp, err := r.t.Client.Get(ctx, r.t.Keys.HostDrains(), clientv3.WithPrefix())
	if err != nil {
		return false, fmt.Errorf("read the drains: %w", err)
	}
	ended := 0
	for _, kv := range resp.Kvs {
		var d etcdschema.HostDrain
		if err := etcdschema.Decode(string(kv.Key), kv.Value, &d); err != nil {
			return false, err
		}
		if slices.Contains(hosts, d.Host) && d.State != etcdschema.DrainDraining && d.Counts()[etcdschema.DrainMoving] == 0 {
			ended++
		}
	}
	return ended == len(hosts), nil
}

// drainProgress is the progress line: the drains' servers by state.
func (r *runner) drainProgress(ctx context.Context, hosts []string) string {
	counts := map[string]int{}
	for _, h := range hosts {
		resp, err := r.t.Client.Get(ctx, r.t.Keys.HostDrain(h))
		if err != nil || len(resp.Kvs) == 0 {
			continue
		}
		var d etcdschema.HostDrain
		if etcdschema.Decode(string(resp.Kvs[0].Key), resp.Kvs[0].Value, &d) != nil {
			continue
		}
		for st, n := range d.Counts() {
			counts[st] += n
		}
	}
	return fmt.Sprintf("drains: %d waiting, %d moving, %d moved, %d failed", counts[etcdschema.DrainWaiting],
		counts[etcdschema.DrainMoving], counts[etcdschema.DrainMoved], counts[etcdschema.DrainFailed])
}

// moveTimes reads the drains' records and their confirmed migrations
// from etcd: each move's time from its request (created) to its confirm
// (the last update, which made it confirmed), sorted.
func (r *runner) moveTimes(ctx context.Context, hosts []string) ([]time.Duration, error) {
	k := r.t.Keys
	var migs []string
	for _, h := range hosts {
		resp, err := r.t.Client.Get(ctx, k.HostDrain(h))
		if err != nil {
			return nil, fmt.Errorf("read the drain of %s: %w", h, err)
		}
		if len(resp.Kvs) == 0 {
			return nil, fmt.Errorf("the drain of %s is gone", h)
		}
		var d etcdschema.HostDrain
		if err := etcdschema.Decode(string(resp.Kvs[0].Key), resp.Kvs[0].Value, &d); err != nil {
			return nil, err
		}
		for _, s := range d.Instances {
			if s.State == etcdschema.DrainMoved && s.MigrationUUID != "" {
				migs = append(migs, k.Migration(s.Cell, s.MigrationUUID))
			}
		}
	}
	var out []time.Duration
	stages := moveStages{}
	err := r.readMigrations(ctx, migs, func(m *etcdschema.Migration) {
		if m.Status == etcdschema.MigrationConfirmed {
			out = append(out, m.UpdatedAt.Sub(m.CreatedAt))
			stages.add(m)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("read the drains' migrations: %w", err)
	}
	r.res.MoveStages = stages.pcts()
	slices.Sort(out)
	return out, nil
}

// readMigrations reads the migration records at keys, 100 to a read
// transaction (etcd allows 128 operations), and hands each to fn.
func (r *runner) readMigrations(ctx context.Context, keys []string, fn func(*etcdschema.Migration)) error {
	for start := 0; start < len(keys); start += 100 {
		var ops []clientv3.Op
		for _, key := range keys[start:min(start+100, len(keys))] {
			ops = append(ops, clientv3.OpGet(key))
		}
		resp, err := r.t.Client.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			return err
		}
		for _, rr := range resp.Responses {
			for _, kv := range rr.GetResponseRange().Kvs {
				var m etcdschema.Migration
				if err := etcdschema.Decode(string(kv.Key), kv.Value, &m); err != nil {
					return err
				}
				fn(&m)
			}
		}
	}
	return nil
}

// checkMovedOff counts the drained hosts' servers that are not ACTIVE
// now as lost, and returns those still ACTIVE on a drained host.
func (r *runner) checkMovedOff(ctx context.Context, ids, drained []string) ([]string, error) {
	var mu sync.Mutex
	var lost, stillOn []string
	err := r.forEachHost(ctx, ids, func(id string) error {
		s, err := r.nova.showServer(ctx, id)
		var ae *api.APIError
		switch {
		case errors.As(err, &ae) && ae.Status == http.StatusNotFound:
			s = &novaServer{ID: id, Status: "gone"}
		case err != nil:
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		switch {
		case s.Status != "ACTIVE":
			lost = append(lost, fmt.Sprintf("%s %s on %q", id, s.Status, s.Host))
		case slices.Contains(drained, s.Host):
			stillOn = append(stillOn, fmt.Sprintf("%s still on drained host %s", id, s.Host))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("drain: check the moved servers: %w", err)
	}
	r.res.Lost = len(lost)
	if len(lost) > 0 {
		return nil, fmt.Errorf("drain: %d servers lost (not ACTIVE after their host's drain), first: %s", len(lost), lost[0])
	}
	return stillOn, nil
}
