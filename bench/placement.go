package bench

// `berth bench placement -url URL` measures any Placement endpoint
// through its REST API alone, so Berth's and OpenStack's are measured
// by the same client in the same sitting: populate N providers
// (inventories, traits, one aggregate), time GET /allocation_candidates
// at several limits, run claim cycles (PUT + DELETE /allocations) from
// C clients, and race many clients claiming one provider (how many 409
// conflicts, how many claims, and that the provider is never
// over-committed). Everything it creates is named for the run (the
// aggregate scopes the candidates query to the run's providers) and
// deleted at the end unless -keep.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/berth-project/berth/internal/backoff"
)

// PlacementConfig is `berth bench placement`'s flags.
type PlacementConfig struct {
	URL          string
	Token        string
	Microversion string
	Providers    int
	// PopulateClients create providers concurrently.
	PopulateClients int
	Limits          []int
	// CandidateRequests per limit, each limit stopping early after
	// CandidateTime (never fewer than 5 requests).
	CandidateRequests int
	CandidateTime     time.Duration
	ClaimClients      int
	ClaimTime         time.Duration
	RaceClients       int
	// RaceVCPU is the hot provider's VCPU total; the race's clients
	// together try to claim twice that, one VCPU a claim.
	RaceVCPU int
	Keep     bool
	Timeout  time.Duration
	// KeepAlive reuses connections. Placement under uwsgi's
	// --http-socket (the reference's start script) closes every
	// connection after its answer without saying so, and a request sent
	// on one being closed is reset: measure it with KeepAlive off.
	KeepAlive bool
}

// DefaultPlacementConfig is the flags' defaults.
func DefaultPlacementConfig() PlacementConfig {
	return PlacementConfig{
		Token: "admin", Microversion: "1.39", Providers: 1000, PopulateClients: 8,
		Limits: []int{10, 100, 1000}, CandidateRequests: 200, CandidateTime: 20 * time.Second,
		ClaimClients: 8, ClaimTime: 10 * time.Second, RaceClients: 16, RaceVCPU: 64,
		Timeout: 30 * time.Second, KeepAlive: true,
	}
}

// AddFlags binds c to fs.
func (c *PlacementConfig) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.URL, "url", c.URL, "the Placement endpoint, e.g. http://127.0.0.1:8778 (required)")
	fs.StringVar(&c.Token, "token", c.Token, "X-Auth-Token sent with every request (\"admin\" for noauth2 and Berth's noauth; empty sends none)")
	fs.StringVar(&c.Microversion, "microversion", c.Microversion, "OpenStack-API-Version placement microversion (1.28 or later)")
	fs.IntVar(&c.Providers, "providers", c.Providers, "providers to create (each with VCPU, MEMORY_MB, DISK_GB, two traits, the run's aggregate)")
	fs.IntVar(&c.PopulateClients, "populate-clients", c.PopulateClients, "clients creating providers at once")
	fs.Func("limits", "comma-separated candidate limits (default 10,100,1000)", func(s string) error {
		var out []int
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				return fmt.Errorf("bad limit %q", f)
			}
			out = append(out, n)
		}
		c.Limits = out
		return nil
	})
	fs.IntVar(&c.CandidateRequests, "candidate-requests", c.CandidateRequests, "candidate requests per limit (one client, one after the other)")
	fs.DurationVar(&c.CandidateTime, "candidate-time", c.CandidateTime, "stop a limit's candidate requests after this long (at least 5 are made)")
	fs.IntVar(&c.ClaimClients, "claim-clients", c.ClaimClients, "clients running claim cycles (PUT then DELETE /allocations) at once")
	fs.DurationVar(&c.ClaimTime, "claim-time", c.ClaimTime, "how long the claim cycles run")
	fs.IntVar(&c.RaceClients, "race-clients", c.RaceClients, "clients racing to claim one provider")
	fs.IntVar(&c.RaceVCPU, "race-vcpu", c.RaceVCPU, "the raced provider's VCPU total (the clients try twice as many one-VCPU claims)")
	fs.BoolVar(&c.Keep, "keep", c.Keep, "leave the run's providers and allocations in place")
	fs.DurationVar(&c.Timeout, "timeout", c.Timeout, "timeout of one request")
	fs.BoolVar(&c.KeepAlive, "keepalive", c.KeepAlive, "reuse connections (-keepalive=false for a server that closes them unannounced, as uwsgi's --http-socket does)")
}

// Validate says what is wrong with c.
func (c *PlacementConfig) Validate() error {
	switch {
	case c.URL == "":
		return errors.New("-url is required")
	case c.Providers < 1 || c.PopulateClients < 1 || c.ClaimClients < 1 || c.RaceClients < 1 || c.RaceVCPU < 1:
		return errors.New("-providers, -populate-clients, -claim-clients, -race-clients and -race-vcpu must be at least 1")
	case len(c.Limits) == 0 || c.CandidateRequests < 1:
		return errors.New("-limits and -candidate-requests need at least one")
	}
	major, minor, ok := strings.Cut(c.Microversion, ".")
	if n, err := strconv.Atoi(minor); !ok || major != "1" || err != nil || n < 28 {
		return fmt.Errorf("-microversion %q: 1.28 or later (consumer generations)", c.Microversion)
	}
	return nil
}

// Latency is a set of timings' summary.
type Latency struct {
	N   int           `json:"n"`
	P50 time.Duration `json:"p50_ns"`
	P99 time.Duration `json:"p99_ns"`
	Max time.Duration `json:"max_ns"`
}

func latencyOf(d []time.Duration) Latency {
	if len(d) == 0 {
		return Latency{}
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return Latency{N: len(s), P50: s[len(s)/2], P99: s[min(len(s)-1, len(s)*99/100)], Max: s[len(s)-1]}
}

// CandidatesFigure is one limit's candidate requests.
type CandidatesFigure struct {
	Limit   int     `json:"limit"`
	Answers int     `json:"answers"` // allocation requests in the last answer
	Bytes   int     `json:"bytes"`   // the last answer's size
	Latency Latency `json:"latency"`
}

// RaceFigure is the hot-provider race's outcome.
type RaceFigure struct {
	Clients   int `json:"clients"`
	Attempts  int `json:"attempts"`
	Claimed   int `json:"claimed"`
	Conflicts int `json:"conflicts"` // 409 placement.concurrent_update: a lost generation race
	Refused   int `json:"refused"`   // other 409s: no capacity left
	Capacity  int `json:"capacity"`
	// Used is the provider's VCPU usage read after the race; it must
	// never exceed Capacity (OverCommit) and must hold every claim
	// answered 204 (Lost counts those it does not).
	Used         int           `json:"used"`
	OverCommit   bool          `json:"over_commit"`
	Lost         int           `json:"lost"`
	Elapsed      time.Duration `json:"elapsed_ns"`
	ClaimLatency Latency       `json:"claim_latency"`
}

// PlacementResult is one run's figures.
type PlacementResult struct {
	URL            string             `json:"url"`
	Providers      int                `json:"providers"`
	PopulateTime   time.Duration      `json:"populate_ns"`
	PopulateReqs   int                `json:"populate_requests"`
	Candidates     []CandidatesFigure `json:"candidates"`
	ClaimClients   int                `json:"claim_clients"`
	ClaimCycles    int                `json:"claim_cycles"`
	ClaimTime      time.Duration      `json:"claim_ns"`
	ClaimPut       Latency            `json:"claim_put"`
	ClaimCycle     Latency            `json:"claim_cycle"`
	ClaimConflicts int                `json:"claim_conflicts"`
	Race           RaceFigure         `json:"race"`
	KeepAlive      bool               `json:"keepalive"`
	LoadAvg        [2]string          `json:"loadavg"` // /proc/loadavg at start and end
	Command        string             `json:"command,omitempty"`
}

// placementClient sends the run's requests.
type placementClient struct {
	cfg   PlacementConfig
	minor int // the microversion's
	http  *http.Client
	reqs  atomic.Int64
}

// apiError is an answer the run did not expect.
type apiError struct {
	method, path string
	status       int
	code         string
	body         string
}

func (e *apiError) Error() string {
	body := strings.TrimSpace(e.body)
	if len(body) > 400 {
		body = body[:400] + "..."
	}
	return fmt.Sprintf("%s %s: %d %s", e.method, e.path, e.status, body)
}

// do sends method path with body (JSON unless nil), expects one of want,
// and decodes a JSON answer into out (when not nil). It returns the
// status and the answer's size.
func (pc *placementClient) do(ctx context.Context, method, path string, body, out any, want ...int) (int, int, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, 0, err
		}
		rd = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(ctx, pc.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(pc.cfg.URL, "/")+path, rd)
	if err != nil {
		return 0, 0, err
	}
	if pc.cfg.Token != "" {
		req.Header.Set("X-Auth-Token", pc.cfg.Token)
	}
	req.Header.Set("OpenStack-API-Version", "placement "+pc.cfg.Microversion)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	pc.reqs.Add(1)
	resp, err := pc.http.Do(req)
	if err != nil {
		return 0, 0, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	ok := slices.Contains(want, resp.StatusCode)
	if ok && out == nil {
		// An answer only counted (the candidates measured) is not kept:
		// growing a buffer for 500 KB would be the client's time in the
		// server's latency.
		n, err := io.Copy(io.Discard, resp.Body)
		if err != nil {
			return resp.StatusCode, int(n), fmt.Errorf("%s %s: read: %w", method, path, err)
		}
		return resp.StatusCode, int(n), nil
	}
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, 0, fmt.Errorf("%s %s: read: %w", method, path, err)
	}
	if !ok {
		e := &apiError{method: method, path: path, status: resp.StatusCode, body: string(raw)}
		var eb struct {
			Errors []struct {
				Code string `json:"code"`
			} `json:"errors"`
		}
		if json.Unmarshal(raw, &eb) == nil && len(eb.Errors) > 0 {
			e.code = eb.Errors[0].Code
		}
		return resp.StatusCode, len(raw), e
	}
	if out != nil && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			return resp.StatusCode, len(raw), fmt.Errorf("%s %s: decode: %w", method, path, err)
		}
	}
	return resp.StatusCode, len(raw), nil
}

// placementRun is one run's names and providers.
type placementRun struct {
	pc        *placementClient
	id        string // names the run's providers
	aggregate string
	providers []string
	consumers sync.Map // consumers holding allocations: deleted at the end
}

// benchTraits are set on every provider: a standard one and the run's
// own custom one (created first).
const benchStdTrait = "HW_CPU_X86_AVX2"

// RunPlacement runs the whole measurement against cfg.URL, logging
// progress to log.
func RunPlacement(ctx context.Context, cfg PlacementConfig, log io.Writer) (*PlacementResult, error) {
	if err := cfg.Validate(); err != nil {
		return nil, &UsageError{err}
	}
	clients := max(cfg.PopulateClients, cfg.ClaimClients, cfg.RaceClients)
	tr := newTransport(clients)
	tr.DisableKeepAlives = !cfg.KeepAlive
	pc := &placementClient{cfg: cfg, http: &http.Client{Transport: tr}}
	_, minor, _ := strings.Cut(cfg.Microversion, ".")
	pc.minor, _ = strconv.Atoi(minor)
	defer pc.http.CloseIdleConnections()
	var idb [4]byte
	_, _ = rand.Read(idb[:])
	run := &placementRun{pc: pc, id: fmt.Sprintf("%x", idb), aggregate: uuid.NewString()}
	res := &PlacementResult{URL: cfg.URL, Providers: cfg.Providers, ClaimClients: cfg.ClaimClients, KeepAlive: cfg.KeepAlive}
	res.LoadAvg[0] = LoadAvg()
	defer func() { res.LoadAvg[1] = LoadAvg() }()
	if !cfg.Keep {
		defer func() {
			// A run cut short still removes what it made, with a
			// context of its own.
			cctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			if err := run.cleanup(cctx); err != nil {
				fmt.Fprintf(log, "placement bench: cleanup: %v\n", err)
			}
		}()
	}
	fmt.Fprintf(log, "placement bench %s: populating %d providers at %s\n", run.id, cfg.Providers, cfg.URL)
	t0, r0 := time.Now(), pc.reqs.Load()
	if err := run.populate(ctx); err != nil {
		return nil, fmt.Errorf("populate: %w", err)
	}
	res.PopulateTime, res.PopulateReqs = time.Since(t0), int(pc.reqs.Load()-r0)
	for _, limit := range cfg.Limits {
		fmt.Fprintf(log, "placement bench %s: candidates at limit %d\n", run.id, limit)
		f, err := run.candidates(ctx, limit)
		if err != nil {
			return nil, fmt.Errorf("candidates at limit %d: %w", limit, err)
		}
		res.Candidates = append(res.Candidates, f)
	}
	fmt.Fprintf(log, "placement bench %s: claim cycles, %d clients, %s\n", run.id, cfg.ClaimClients, cfg.ClaimTime)
	if err := run.claimCycles(ctx, res); err != nil {
		return nil, fmt.Errorf("claim cycles: %w", err)
	}
	fmt.Fprintf(log, "placement bench %s: hot-provider race, %d clients\n", run.id, cfg.RaceClients)
	race, err := run.race(ctx)
	if err != nil {
		return nil, fmt.Errorf("race: %w", err)
	}
	res.Race = race
	if race.OverCommit || race.Used != race.Claimed {
		return res, fmt.Errorf("race: %d VCPU used of %d after %d claims answered 204", race.Used, race.Capacity, race.Claimed)
	}
	return res, nil
}

// traitName is the run's own custom trait.
func (r *placementRun) traitName() string { return "CUSTOM_BENCH_" + strings.ToUpper(r.id) }

// populate creates the run's providers: per provider a create, its
// inventories, its traits and its aggregate, as an agent registers a
// host, from PopulateClients clients.
func (r *placementRun) populate(ctx context.Context) error {
	if _, _, err := r.pc.do(ctx, "PUT", "/traits/"+r.traitName(), nil, nil, 201, 204); err != nil {
		return err
	}
	r.providers = make([]string, r.pc.cfg.Providers)
	for i := range r.providers {
		r.providers[i] = uuid.NewString()
	}
	return forEach(ctx, r.pc.cfg.PopulateClients, len(r.providers), func(ctx context.Context, i int) error {
		return r.createProvider(ctx, i)
	})
}

func (r *placementRun) createProvider(ctx context.Context, i int) error {
	u := r.providers[i]
	var p struct {
		Generation int64 `json:"generation"`
	}
	name := fmt.Sprintf("bench-%s-%d", r.id, i)
	if _, _, err := r.pc.do(ctx, "POST", "/resource_providers", map[string]any{"uuid": u, "name": name}, &p, 200); err != nil {
		return err
	}
	inv := func(total int) map[string]any { return map[string]any{"total": total} }
	var g struct {
		Generation int64 `json:"resource_provider_generation"`
	}
	vcpu := 64
	if i == 0 {
		vcpu = r.pc.cfg.RaceVCPU // the race's provider
	}
	invs := map[string]any{"VCPU": inv(vcpu), "MEMORY_MB": inv(262144), "DISK_GB": inv(2000)}
	if _, _, err := r.pc.do(ctx, "PUT", "/resource_providers/"+u+"/inventories",
		map[string]any{"resource_provider_generation": p.Generation, "inventories": invs}, &g, 200); err != nil {
		return err
	}
	if _, _, err := r.pc.do(ctx, "PUT", "/resource_providers/"+u+"/traits",
		map[string]any{"resource_provider_generation": g.Generation, "traits": []string{benchStdTrait, r.traitName()}}, &g, 200); err != nil {
		return err
	}
	_, _, err := r.pc.do(ctx, "PUT", "/resource_providers/"+u+"/aggregates",
		map[string]any{"resource_provider_generation": g.Generation, "aggregates": []string{r.aggregate}}, nil, 200)
	return err
}

// candidatesPath is the measured query: three classes and the run's
// aggregate (which scopes it to the run's providers), at limit.
func (r *placementRun) candidatesPath(limit int) string {
	return fmt.Sprintf("/allocation_candidates?resources=VCPU:1,MEMORY_MB:512,DISK_GB:10&member_of=%s&limit=%d", r.aggregate, limit)
}

// candidates times one client's candidate requests at limit, after two
// unmeasured ones.
func (r *placementRun) candidates(ctx context.Context, limit int) (CandidatesFigure, error) {
	f := CandidatesFigure{Limit: limit}
	path := r.candidatesPath(limit)
	var ans struct {
		AllocationRequests []json.RawMessage `json:"allocation_requests"`
	}
	for range 2 {
		if _, _, err := r.pc.do(ctx, "GET", path, nil, nil, 200); err != nil {
			return f, err
		}
	}
	var lat []time.Duration
	start := time.Now()
	for i := 0; i < r.pc.cfg.CandidateRequests; i++ {
		if i >= 5 && time.Since(start) > r.pc.cfg.CandidateTime {
			break
		}
		t0 := time.Now()
		_, n, err := r.pc.do(ctx, "GET", path, nil, nil, 200)
		if err != nil {
			return f, err
		}
		lat = append(lat, time.Since(t0))
		f.Bytes = n
	}
	if _, _, err := r.pc.do(ctx, "GET", path, nil, &ans, 200); err != nil {
		return f, err
	}
	f.Answers = len(ans.AllocationRequests)
	f.Latency = latencyOf(lat)
	if want := min(limit, r.pc.cfg.Providers); f.Answers != want {
		return f, fmt.Errorf("%d allocation requests, want %d", f.Answers, want)
	}
	return f, nil
}

// claimBody is a new consumer's allocation of one VCPU and some memory
// on provider rp.
func (r *placementRun) claimBody(rp string, res map[string]int) map[string]any {
	b := map[string]any{
		"allocations":         map[string]any{rp: map[string]any{"resources": res}},
		"project_id":          "bench-" + r.id,
		"user_id":             "bench",
		"consumer_generation": nil,
	}
	if r.pc.minor >= 38 {
		b["consumer_type"] = "INSTANCE"
	}
	return b
}

// claimCycles runs ClaimClients clients for ClaimTime, each claiming
// on a provider of its own (VCPU 1, MEMORY_MB 512) and deleting the
// claim again, and records both requests' times.
func (r *placementRun) claimCycles(ctx context.Context, res *PlacementResult) error {
	cfg := r.pc.cfg
	type clientTimes struct{ put, cycle []time.Duration }
	times := make([]clientTimes, cfg.ClaimClients)
	var conflicts atomic.Int64
	deadline := time.Now().Add(cfg.ClaimTime)
	start := time.Now()
	err := forEach(ctx, cfg.ClaimClients, cfg.ClaimClients, func(ctx context.Context, w int) error {
		for k := 0; time.Now().Before(deadline); k++ {
			// Provider 0 is the race's; the clients take the others in turn.
			rp := r.providers[0]
			if n := len(r.providers) - 1; n > 0 {
				rp = r.providers[1+(w+k*cfg.ClaimClients)%n]
			}
			consumer := uuid.NewString()
			t0 := time.Now()
			r.consumers.Store(consumer, true)
			if _, _, err := r.pc.do(ctx, "PUT", "/allocations/"+consumer, r.claimBody(rp, map[string]int{"VCPU": 1, "MEMORY_MB": 512}), nil, 204); err != nil {
				var ae *apiError
				if errors.As(err, &ae) && ae.status == 409 {
					conflicts.Add(1) // another client's claim on the same provider won
					r.consumers.Delete(consumer)
					continue
				}
				return err
			}
			t1 := time.Now()
			if _, _, err := r.pc.do(ctx, "DELETE", "/allocations/"+consumer, nil, nil, 204); err != nil {
				return err
			}
			r.consumers.Delete(consumer)
			times[w].put = append(times[w].put, t1.Sub(t0))
			times[w].cycle = append(times[w].cycle, time.Since(t0))
		}
		return nil
	})
	res.ClaimTime = time.Since(start)
	if err != nil {
		return err
	}
	var put, cycle []time.Duration
	for _, t := range times {
		put, cycle = append(put, t.put...), append(cycle, t.cycle...)
	}
	res.ClaimCycles, res.ClaimPut, res.ClaimCycle = len(cycle), latencyOf(put), latencyOf(cycle)
	res.ClaimConflicts = int(conflicts.Load())
	return nil
}

// race sends RaceClients clients claiming one VCPU each on provider 0
// until 2×RaceVCPU claims were tried, then reads the provider's usage:
// every claim answered 204 must be in it, and it must not pass the
// inventory.
func (r *placementRun) race(ctx context.Context) (RaceFigure, error) {
	cfg := r.pc.cfg
	hot := r.providers[0]
	f := RaceFigure{Clients: cfg.RaceClients, Capacity: cfg.RaceVCPU}
	var next, claimed, conflicts, refused atomic.Int64
	attempts := int64(2 * cfg.RaceVCPU)
	lats := make([][]time.Duration, cfg.RaceClients)
	start := time.Now()
	err := forEach(ctx, cfg.RaceClients, cfg.RaceClients, func(ctx context.Context, w int) error {
		for next.Add(1) <= attempts {
			consumer := uuid.NewString()
			r.consumers.Store(consumer, true)
			t0 := time.Now()
			_, _, err := r.pc.do(ctx, "PUT", "/allocations/"+consumer, r.claimBody(hot, map[string]int{"VCPU": 1}), nil, 204)
			var ae *apiError
			switch {
			case err == nil:
				claimed.Add(1)
				lats[w] = append(lats[w], time.Since(t0))
			case errors.As(err, &ae) && ae.status == 409:
				r.consumers.Delete(consumer)
				if ae.code == "placement.concurrent_update" {
					conflicts.Add(1)
				} else {
					refused.Add(1)
				}
			default:
				return err
			}
		}
		return nil
	})
	f.Elapsed = time.Since(start)
	if err != nil {
		return f, err
	}
	f.Attempts, f.Claimed, f.Conflicts, f.Refused = int(attempts), int(claimed.Load()), int(conflicts.Load()), int(refused.Load())
	var all []time.Duration
	for _, l := range lats {
		all = append(all, l...)
	}
	f.ClaimLatency = latencyOf(all)
	var usages struct {
		Usages map[string]int `json:"usages"`
	}
	if _, _, err := r.pc.do(ctx, "GET", "/resource_providers/"+hot+"/usages", nil, &usages, 200); err != nil {
		return f, err
	}
	f.Used = usages.Usages["VCPU"]
	f.OverCommit = f.Used > f.Capacity
	f.Lost = max(0, f.Claimed-f.Used)
	return f, nil
}

// cleanup deletes the run's remaining allocations and its providers.
func (r *placementRun) cleanup(ctx context.Context) error {
	var consumers []string
	r.consumers.Range(func(k, _ any) bool { consumers = append(consumers, k.(string)); return true })
	n := r.pc.cfg.PopulateClients
	if err := forEach(ctx, n, len(consumers), func(ctx context.Context, i int) error {
		// Deletes on the raced provider race each other as the claims
		// did: a 409 concurrent_update is tried again.
		bo := backoff.New(10*time.Millisecond, time.Second)
		for attempt := 0; ; attempt++ {
			_, _, err := r.pc.do(ctx, "DELETE", "/allocations/"+consumers[i], nil, nil, 204, 404)
			var ae *apiError
			if err == nil || attempt == 20 || !errors.As(err, &ae) || ae.status != 409 {
				return err
			}
			if !backoff.Sleep(ctx, bo.Next()) {
				return ctx.Err()
			}
		}
	}); err != nil {
		return err
	}
	if err := forEach(ctx, n, len(r.providers), func(ctx context.Context, i int) error {
		_, _, err := r.pc.do(ctx, "DELETE", "/resource_providers/"+r.providers[i], nil, nil, 204, 404)
		return err
	}); err != nil {
		return err
	}
	_, _, err := r.pc.do(ctx, "DELETE", "/traits/"+r.traitName(), nil, nil, 204, 404)
	return err
}

// forEach runs f for 0..n-1 on workers goroutines, stopping at the
// first error, which it returns.
func forEach(ctx context.Context, workers, n int, f func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(workers, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := f(ctx, i); err != nil {
					cancel(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return ctx.Err()
}
