package bench

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/berth-project/berth/api"
	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/backoff"
	"github.com/berth-project/berth/quotas"
)

// The resize scenario, a steady resize churn: a loaded cloud (-servers
// booted anywhere), then -resize-parallel servers of resizeFlavors[0],
// each resized by a client of its own back and forth between the two
// flavors for -duration, every resize confirmed (Nova's resize, wait for
// VERIFY_RESIZE, confirmResize, wait for ACTIVE), one after the other.
// It reports moves (resizes confirmed) per second over the phase, one
// move's time from the client's resize request to the ACTIVE record on
// the new flavor (the recorder's watch), the time to VERIFY_RESIZE, and
// the process's CPU per move. A resize that failed (the server back
// ACTIVE on its old flavor, or ERROR) and a server not ACTIVE afterwards
// fail the run; timings never do.

// resizeFlavors are the two flavors a server goes back and forth
// between: the same VCPUs, more memory and disk one way.
var resizeFlavors = [2]string{"m1.tiny", "m1.small"}

func (r *runner) resize(ctx context.Context) error {
	cfg := r.cfg
	n := cfg.ResizeParallel
	r.res.Servers, r.res.Clients, r.res.BuildTime, r.res.ResizeParallel = cfg.Servers, cfg.Clients, cfg.BuildTime.String(), n
	resized, err := r.createTracked(ctx, "the resized servers", n, func(i int64) api.CreateRequest {
		return api.CreateRequest{Name: fmt.Sprintf("resized-%d", i), Flavor: resizeFlavors[0], Count: 1}
	})
	if err != nil {
		return fmt.Errorf("resize: %w", err)
	}
	for _, id := range resized {
		if !r.rec.isActive(id) {
			return fmt.Errorf("resize: server %s did not go ACTIVE (the load before any resize)", id)
		}
		r.rec.Follow(id)
	}

	var moved, failed atomic.Int64
	stop := r.progress(ctx, func() string {
		return fmt.Sprintf("resized %d, failed %d, API errors %d", moved.Load(), failed.Load(), r.apiErrors.Load())
	})
	defer stop()
	m, err := r.startMeasuring(ctx)
	if err != nil {
		return err
	}
	endPhase := r.cfg.OnPhase("moves")
	defer endPhase() // stopping a profile twice is harmless
	deadline := m.start.Add(cfg.Duration)
	var mu sync.Mutex
	var whole, verify []time.Duration
	var migs []string
	var failures []string
	var wg sync.WaitGroup
	for _, id := range resized {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 1; time.Now().Before(deadline) && ctx.Err() == nil; k++ {
				toVerify, total, mig, err := r.resizeOnce(ctx, id, resizeFlavors[k%2])
				mu.Lock()
				if err != nil {
					failed.Add(1)
					failures = append(failures, err.Error())
					mu.Unlock()
					return
				}
				moved.Add(1)
				whole, verify, migs = append(whole, total), append(verify, toVerify), append(migs, mig)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	took := time.Since(m.start)
	cpu := r.cpuTime() - m.cpu
	endPhase()
	r.res.Seconds, r.res.CPUSeconds, r.res.HeapMB = took.Seconds(), cpu.Seconds(), heapMB()
	r.res.Moves, r.res.MovesFailed, r.res.APIErrors = int(moved.Load()), int(failed.Load()), int(r.apiErrors.Load())
	r.noteMoveRates(took, cpu)
	slices.Sort(whole)
	slices.Sort(verify)
	p, pv := pct(whole), pct(verify)
	r.res.Move, r.res.ResizeVerify = &p, &pv
	stages := moveStages{}
	if err := r.readMigrations(ctx, migs, func(m *etcdschema.Migration) { stages.add(m) }); err != nil {
		return fmt.Errorf("resize: read the migrations: %w", err)
	}
	r.res.MoveStages = stages.pcts()
	lost, err := r.checkActive(ctx, resized)
	if err != nil {
		return err
	}
	failures = append(failures, lost...)
	if len(failures) > 0 {
		return fmt.Errorf("resize: %d problems, first: %s", len(failures), failures[0])
	}
	return nil
}

// resizeOnce resizes server id to flavor and confirms it: the time to
// VERIFY_RESIZE and to ACTIVE on the new flavor, each from the resize
// request, as the recorder's watch saw them.
func (r *runner) resizeOnce(ctx context.Context, id, flavor string) (toVerify, total time.Duration, migration string, err error) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
	defer cancel()
	settled := func(s instanceState) bool { return s.TaskState == "" && s.Migration == "" }
	seen := r.rec.Seen(id)
	t0 := time.Now()
	body := map[string]any{"resize": map[string]any{"flavorRef": benchFlavorIDs[flavor]}}
	if err := r.post503(ctx, "/servers/"+id+"/action", body); err != nil {
		return 0, 0, "", fmt.Errorf("resize %s to %s: %w", id, flavor, err)
	}
	// VERIFY_RESIZE, or the move's end without it (it failed: the server
	// is back ACTIVE where it was, or ERROR).
	st, at, err := r.rec.WaitInstance(ctx, id, seen, func(s instanceState) bool {
		return s.Status == etcdschema.StatusVerifyResize || settled(s)
	})
	if err != nil {
		return 0, 0, "", fmt.Errorf("resize %s to %s: %w", id, flavor, err)
	}
	if st.Status != etcdschema.StatusVerifyResize {
		return 0, 0, "", fmt.Errorf("resize %s to %s ended %s on %s without VERIFY_RESIZE", id, flavor, st.Status, st.Flavor)
	}
	toVerify, migration = at.Sub(t0), r.t.Keys.Migration(st.Cell, st.Migration)
	seen = r.rec.Seen(id)
	if err := r.post503(ctx, "/servers/"+id+"/action", map[string]any{"confirmResize": nil}); err != nil {
		return 0, 0, "", fmt.Errorf("confirm the resize of %s to %s: %w", id, flavor, err)
	}
	st, at, err = r.rec.WaitInstance(ctx, id, seen, func(s instanceState) bool {
		return s.Status != etcdschema.StatusVerifyResize && settled(s)
	})
	if err != nil {
		return 0, 0, "", fmt.Errorf("confirm the resize of %s to %s: %w", id, flavor, err)
	}
	if st.Status != etcdschema.StatusActive || st.Flavor != flavor {
		return 0, 0, "", fmt.Errorf("resize %s to %s confirmed, but the server is %s on %s", id, flavor, st.Status, st.Flavor)
	}
	return toVerify, at.Sub(t0), migration, nil
}

// post503 posts body to /v2.1+path, again after a 503 (the API's "the
// state store could not be read or written; try again": at 10,000 hosts
// on a loaded machine, 100 upsizes at once in the tool's one project
// timed out counting the project's servers for the quota check), up to
// five times with a growing pause; each error is counted.
func (r *runner) post503(ctx context.Context, path string, body any) error {
	for try := 0; ; try++ {
		err := r.nova.do(ctx, http.MethodPost, path, body, nil)
		if err == nil {
			return nil
		}
		r.apiErrors.Add(1)
		var ae *api.APIError
		if try >= 4 || !errors.As(err, &ae) || ae.Status != http.StatusServiceUnavailable {
			return err
		}
		if !backoff.Sleep(ctx, time.Duration(try+1)*time.Second) {
			return err
		}
	}
}

// checkActive counts the servers that are not ACTIVE through the API now
// as lost, and says which.
func (r *runner) checkActive(ctx context.Context, ids []string) ([]string, error) {
	var mu sync.Mutex
	var lost []string
	err := r.forEachHost(ctx, ids, func(id string) error {
		s, err := r.nova.showServer(ctx, id)
		var ae *api.APIError
		switch {
		case errors.As(err, &ae) && ae.Status == http.StatusNotFound:
			s = &novaServer{ID: id, Status: "gone"}
		case err != nil:
			return err
		}
		if s.Status != "ACTIVE" {
			mu.Lock()
			lost = append(lost, fmt.Sprintf("%s %s on %q", id, s.Status, s.Host))
			mu.Unlock()
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("check the resized servers: %w", err)
	}
	r.res.Lost = len(lost)
	return lost, nil
}

// parseQuota is -resize-quota's "name=limit,..." (nil when malformed or
// naming no quota resource).
func parseQuota(s string) map[string]int64 {
	if s == "" {
		return nil
	}
	q := map[string]int64{}
	for _, kv := range strings.Split(s, ",") {
		name, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		n, err := strconv.ParseInt(v, 10, 64)
		if !ok || err != nil || n < quotas.Unlimited || !quotas.Known(name) {
			return nil
		}
		q[name] = n
	}
	return q
}
