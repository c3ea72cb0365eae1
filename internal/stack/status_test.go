package stack

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/api"
	"github.com/berth-project/berth/conductor"
	"github.com/berth-project/berth/configs"
	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/internal/status"
	"github.com/berth-project/berth/internal/testhook"
	"github.com/berth-project/berth/internal/testwait"
	"github.com/berth-project/berth/scheduler"
)

// stackHCL is every role on loopback with ephemeral ports, a status
// listener, and a cell1 conductor; agents are added per test.
const stackHCL = `
status {
  bind = "127.0.0.1:0"
}
api {
  bind = "127.0.0.1:0"
}
placement {
  bind = "127.0.0.1:0"
}
scheduler {
  bind         = "127.0.0.1:0"
  max_attempts = 2
}
superconductor {}
conductor {
  cell = "cell1"
}
agent {
  cell = "cell1"
  inventory {
    vcpus     = 8
    memory_mb = 16384
    disk_gb   = 100
  }
}
`

// testStack is a whole control plane in one stack, as `berth dev` wires it,
// over a real embedded etcd reached through cli.
type testStack struct {
	*Stack
	endpoints map[string]string
}

// startTestStack starts every role of stackHCL, one agent per host
// (failing hosts' builds fail, reschedulable), over cli.
func startTestStack(t *testing.T, cli *clientv3.Client, hosts []string, failing map[string]bool) *testStack {
	t.Helper()
	return startTestStackWith(t, cli, hosts, failing, nil)
}

// startTestStackWith is startTestStack with stackHCL's config changed by
// mod first (nil: unchanged).
func startTestStackWith(t *testing.T, cli *clientv3.Client, hosts []string, failing map[string]bool, mod func(*configs.Config)) *testStack {
	t.Helper()
	cfg, err := configs.Parse([]byte(stackHCL), "stack.hcl")
	if err != nil {
		t.Fatal(err)
	}
	if mod != nil {
		mod(cfg)
	}
	s := New(cfg, hclog.NewNullLogger())
	s.Attach(cli)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.ServeStatus(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	// Conductor and agents first, and the agents up before the
	// superconductor starts: a build request already in etcd (handed back
	// by a stopped stack) must find its host up, not be buried.
	if err := s.StartConductor(ctx, cfg.Conductor); err != nil {
		t.Fatalf("start conductor: %v", err)
	}
	for _, h := range hosts {
		a := *cfg.Agent
		a.Host = h
		a.Fake.Fail = failing[h]
		if err := s.StartAgent(ctx, &a, t.TempDir()); err != nil {
			t.Fatalf("start agent %s: %v", h, err)
		}
	}
	// Within what is left of the start-up's 30 s.
	err = testwait.Wait(ctx, 30*time.Second, func() (bool, string) {
		r := s.status.Evaluate(ctx)
		return r.Ready, fmt.Sprintf("%+v", r.Checks)
	})
	if err != nil {
		t.Fatalf("conductor and agents not ready: %v", err)
	}
	if err := s.StartServerRoles(ctx); err != nil {
		t.Fatalf("start server roles: %v", err)
	}
	ts := &testStack{Stack: s, endpoints: map[string]string{}}
	for _, ep := range s.Endpoints {
		ts.endpoints[ep[0]] = ep[1]
	}
	return ts
}

// get answers a GET: status code and body.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// waitReady polls /readyz until 200, within 30 s.
func waitReady(t *testing.T, base string) status.Readiness {
	t.Helper()
	var r status.Readiness
	testwait.Poll(t, 30*time.Second, base+" ready", func() (bool, string) {
		code, body := get(t, base+status.PathReady)
		r = status.Readiness{}
		if err := json.Unmarshal([]byte(body), &r); err != nil {
			t.Fatalf("/readyz body is not JSON: %v: %s", err, body)
		}
		if code == http.StatusOK {
			if !r.Ready {
				t.Fatalf("/readyz 200 with ready=false: %s", body)
			}
			return true, ""
		}
		if code != http.StatusServiceUnavailable || r.Ready {
			t.Fatalf("/readyz = %d, %s; want 200 or 503 with ready=false", code, body)
		}
		return false, body
	})
	return r
}

// scrape reads /metrics into "name{labels}" → value.
func scrape(t *testing.T, base string) map[string]float64 {
	t.Helper()
	code, body := get(t, base+status.PathMetrics)
	if code != http.StatusOK {
		t.Fatalf("/metrics = %d: %s", code, body)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

// waitStatus polls a server until it is ACTIVE or ERROR.
func waitStatus(t *testing.T, c *api.Client, id string) *api.ServerView {
	t.Helper()
	var v *api.ServerView
	testwait.Poll(t, 30*time.Second, "server "+id+" ACTIVE or ERROR", func() (bool, string) {
		var err error
		v, err = c.GetServer(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		return v.Status == "ACTIVE" || v.Status == "ERROR", v.Status
	})
	return v
}

func create(t *testing.T, c *api.Client, name, host string) string {
	t.Helper()
	resp, err := c.CreateServers(context.Background(), api.CreateRequest{Name: name, Flavor: "m1.tiny", Count: 1, Host: host})
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	return resp.Servers[0].ID
}

// TestMetricsMoveWithRealWork boots a server that goes ACTIVE and one
// pinned to a failing host (rescheduled, then out of alternates), and
// checks each counter moved on every endpoint that serves /metrics.
func TestMetricsMoveWithRealWork(t *testing.T) {
	s := startTestStack(t, etcdtest.Client(t), []string{"good", "bad"}, map[string]bool{"bad": true})
	r := waitReady(t, s.endpoints["status"])
	want := []string{status.EtcdCheck, status.EtcdAlarmsCheck, "conductor cell1 queue", "agent good", "agent bad",
		"host manager", "placement index", "scheduler registration", "superconductor queue"}
	var got []string
	for _, c := range r.Checks {
		got = append(got, c.Name)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("readiness checks (-want +got):\n%s", diff)
	}
	c := api.NewClient(s.endpoints["compute API"])
	if v := waitStatus(t, c, create(t, c, "ok", "good")); v.Status != "ACTIVE" {
		t.Fatalf("server on good = %s (%+v), want ACTIVE", v.Status, v.Fault)
	}
	// Pinned to the failing host there is no alternate: the build fails
	// reschedulable, and the cell conductor finds nothing left.
	if v := waitStatus(t, c, create(t, c, "doomed", "bad")); v.Status != "ERROR" {
		t.Fatalf("server on bad = %s, want ERROR", v.Status)
	}

	atLeast := map[string]float64{
		`berth_scheduler_select_destinations_seconds_count{outcome="selected"}`: 2,
		`berth_placement_claims_total{outcome="committed"}`:                     2, // two claims; the free of the failed build is one more
		`berth_agent_builds_total{outcome="active"}`:                            1,
		`berth_agent_builds_total{outcome="rescheduled"}`:                       1,
		`berth_conductor_reschedules_total{outcome="exhausted"}`:                1,
		`berth_etcd_request_duration_seconds_count{operation="txn"}`:            5,
		`berth_etcd_request_duration_seconds_count{operation="get"}`:            1,
		`go_goroutines`: 1,
		// Labelled by route template, from every listener alike.
		`berth_http_requests_total{code="202",method="POST",route="/v1/servers",server="compute API"}`:     2,
		`berth_http_requests_total{code="200",method="GET",route="/v1/servers/{id}",server="compute API"}`: 2,
	}
	// The agents and the conductor count an outcome once its transaction
	// has committed, so the API can show the server settled a moment
	// before the count moves (a worker descheduled between the two on a
	// loaded machine failed this test): wait for the counts, with a
	// deadline, before reading them on every listener.
	testwait.Poll(t, 30*time.Second, "every count at its least", func() (bool, string) {
		m := scrape(t, s.endpoints["status"])
		var short []string
		for k, min := range atLeast {
			if m[k] < min {
				short = append(short, fmt.Sprintf("%s = %v (want at least %v)", k, m[k], min))
			}
		}
		return len(short) == 0, strings.Join(short, "; ")
	})

	// One registry per process: every listener serves the same figures.
	for _, ep := range []string{"status", "compute API", "placement", "scheduler"} {
		t.Run(ep, func(t *testing.T) {
			base := s.endpoints[ep]
			if code, body := get(t, base+status.PathHealth); code != http.StatusOK {
				t.Errorf("/healthz = %d: %s", code, body)
			}
			m := scrape(t, base)
			exactly := map[string]float64{
				`berth_scheduler_select_destinations_seconds_count{outcome="no_valid_host"}`: 0,
				`berth_agent_builds_total{outcome="failed"}`:                                 0,
				`berth_conductor_reschedules_total{outcome="rescheduled"}`:                   0,
				`berth_scheduler_hosts{state="up"}`:                                          2,
				`berth_scheduler_hosts{state="down"}`:                                        0,
				`berth_scheduler_hosts{state="disabled"}`:                                    0,
			}
			for k, min := range atLeast {
				if v, ok := m[k]; !ok || v < min {
					t.Errorf("%s = %v (present %v), want at least %v", k, v, ok, min)
				}
			}
			for k, wantV := range exactly {
				if v, ok := m[k]; !ok || v != wantV {
					t.Errorf("%s = %v (present %v), want %v", k, v, ok, wantV)
				}
			}
			if _, ok := m["process_resident_memory_bytes"]; !ok {
				t.Errorf("no process collector figures")
			}
		})
	}

	// An operator disables and forces down the failing host: the hosts
	// gauge follows the host manager's view.
	disabled, forced := "disabled", true
	if _, err := c.UpdateService(context.Background(), "bad", api.ServiceUpdate{Status: &disabled, ForcedDown: &forced}); err != nil {
		t.Fatal(err)
	}
	wantHosts := map[string]float64{"up": 1, "down": 1, "disabled": 1}
	testwait.Poll(t, 30*time.Second, "the hosts gauge after disabling and forcing down one of two", func() (bool, string) {
		m := scrape(t, s.endpoints["scheduler"])
		got := map[string]float64{}
		for state := range wantHosts {
			got[state] = m[`berth_scheduler_hosts{state="`+state+`"}`]
		}
		diff := cmp.Diff(wantHosts, got)
		return diff == "", "(-want +got):\n" + diff
	})
}

// TestReadyzFollowsEtcd: /readyz is 200 while etcd answers and 503, naming
// the etcd check and why, once the member is closed, for the in-process
// client and for a networked one (whose read the check bounds).
func TestReadyzFollowsEtcd(t *testing.T) {
	for _, networked := range []bool{false, true} {
		t.Run(fmt.Sprintf("networked=%v", networked), func(t *testing.T) {
			srv := etcdtest.Start(t)
			cli := srv.Client()
			if networked {
				var err error
				cli, err = clientv3.New(clientv3.Config{Endpoints: []string{srv.ClientURL()}, DialTimeout: time.Second})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { cli.Close() })
			}
			cfg, err := configs.Parse([]byte("status {\n  bind = \"127.0.0.1:0\"\n}\n"), "t.hcl")
			if err != nil {
				t.Fatal(err)
			}
			s := New(cfg, hclog.NewNullLogger())
			s.Attach(cli)
			if err := s.ServeStatus(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(s.Stop)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := s.startPlacement(ctx); err != nil {
				t.Fatal(err)
			}
			base := s.Endpoints[len(s.Endpoints)-1][1]
			waitReady(t, base)

			t0 := time.Now()
			srv.Close()
			t.Logf("etcd close took %s", time.Since(t0))
			start := time.Now()
			code, body := get(t, base+status.PathReady)
			if code != http.StatusServiceUnavailable {
				t.Fatalf("/readyz with etcd closed = %d: %s", code, body)
			}
			if took := time.Since(start); took > 5*time.Second {
				t.Errorf("/readyz took %s with etcd down; the etcd check must be bounded", took)
			}
			var r status.Readiness
			if err := json.Unmarshal([]byte(body), &r); err != nil {
				t.Fatal(err)
			}
			if r.Ready || len(r.Checks) == 0 || r.Checks[0].Name != status.EtcdCheck || r.Checks[0].OK || r.Checks[0].Error == "" {
				t.Errorf("/readyz body = %s, want the etcd check failing with its error", body)
			}
			if code, _ := get(t, base+status.PathHealth); code != http.StatusOK {
				t.Errorf("/healthz = %d with etcd down; the process still runs", code)
			}
		})
	}
}

// TestGracefulStopHandsBackAtOnce stops a stack holding a queue lease
// (paused just before its commit) and checks that its leases, member keys,
// election key and the agents' liveness keys are gone at once: well
// within the TTLs (10 s for leases and the election, 60 s for liveness)
// that a killed process would leave them for. A second stack then
// finishes the handed-back work before the lease TTL would have run out.
func TestGracefulStopHandsBackAtOnce(t *testing.T) {
	cases := []struct {
		desc    string
		point   string
		hosts   []string
		failing map[string]bool
		lease   func(s *testStack) string // the prefix whose lease must go
		settled string                    // the server's status once the work is finished
	}{
		{desc: "superconductor holding a build request", point: "superconductor.before-handoff",
			hosts: []string{"h1"}, lease: func(s *testStack) string { return s.keys.BuildRequestLeases() },
			settled: "ACTIVE"},
		{desc: "cell conductor holding a retry", point: "cellconductor.before-commit",
			hosts: []string{"h1", "h2"}, failing: map[string]bool{"h1": true, "h2": true},
			lease:   func(s *testStack) string { return s.keys.RetryLeases("cell1") },
			settled: "ERROR"}, // the alternate fails too: out of hosts
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			t.Setenv(testhook.EnvPoint, tc.point)
			srv := etcdtest.Start(t)
			cli := srv.Client()
			s := startTestStack(t, cli, tc.hosts, tc.failing)
			waitReady(t, s.endpoints["status"])
			c := api.NewClient(s.endpoints["compute API"])
			id := create(t, c, "held", "")

			ctx := context.Background()
			count := func(prefix string) int64 {
				resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
				if err != nil {
					t.Fatal(err)
				}
				return resp.Count
			}
			leases := tc.lease(s)
			testwait.Poll(t, 30*time.Second, "a lease under "+leases, func() (bool, string) {
				return count(leases) != 0, "none"
			})
			held := map[string]string{
				"queue lease":            leases,
				"scheduler member":       s.keys.Members(scheduler.Role),
				"superconductor member":  s.keys.Members(conductor.SuperconductorRole),
				"scheduler election key": s.keys.Election(scheduler.Role) + "/",
			}
			for _, h := range tc.hosts {
				held["liveness of "+h] = s.keys.Alive(h)
			}
			for what, p := range held {
				if count(p) == 0 {
					t.Fatalf("%s (%s) absent before the stop", what, p)
				}
			}

			start := time.Now()
			s.Stop()
			// Revocations are synchronous in stop: the keys are gone when it
			// returns. The 2 s poll is only slack for a slow machine, still
			// well under every TTL.
			testwait.Poll(t, 2*time.Second, "every held key gone after the stop", func() (bool, string) {
				for what, p := range held {
					if count(p) != 0 {
						return false, fmt.Sprintf("%s (%s) still present %s after the stop began", what, p, time.Since(start))
					}
				}
				return true, ""
			})
			if took := time.Since(start); took > 8*time.Second {
				t.Errorf("graceful stop took %s; the TTLs are 10 s", took)
			}

			// Another process (its own networked client) takes the work
			// over at once.
			t.Setenv(testhook.EnvPoint, "")
			cli2, err := clientv3.New(clientv3.Config{Endpoints: []string{srv.ClientURL()}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cli2.Close() })
			s2 := startTestStack(t, cli2, tc.hosts, tc.failing)
			c2 := api.NewClient(s2.endpoints["compute API"])
			if v := waitStatus(t, c2, id); v.Status != tc.settled {
				t.Fatalf("server after the hand-back = %s, want %s", v.Status, tc.settled)
			}
			if took := time.Since(start); took > 10*time.Second {
				t.Errorf("the handed-back work finished %s after the stop began; a lease left to expire takes 10-15 s", took)
			}
		})
	}
}
