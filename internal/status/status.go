// Package status serves what an operator's probes and Prometheus ask of
// every berth process: /healthz (the process runs), /readyz (etcd answers
// and the role's caches are loaded) and /metrics.
//
// Server processes mount the three paths on their existing HTTP servers
// (Mount); conductors, agents and etcd members, which have none, serve
// them on the config's status { bind } listener.
package status

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/internal/metrics"
)

// The paths this package answers; Mount sends nothing else here.
const (
	PathHealth  = "/healthz"
	PathReady   = "/readyz"
	PathMetrics = "/metrics"
)

// EtcdCheck is the name of the etcd readiness check.
const EtcdCheck = "etcd"

// EtcdAlarmsCheck is the name of the check that fails while etcd has an
// alarm raised (NOSPACE: every write is refused).
const EtcdAlarmsCheck = "etcd alarms"

// etcdTimeout bounds the readiness read: a probe must answer within its
// own timeout (Kubernetes' default is 1 s, systemd watchdogs a few), so a
// hung etcd is reported as not ready rather than as a hung probe.
const etcdTimeout = 900 * time.Millisecond

// Status holds one process's readiness checks and metrics.
type Status struct {
	metrics *metrics.Metrics

	mu     sync.Mutex
	checks []check

	stopping atomic.Bool
}

type check struct {
	name string
	fn   func(ctx context.Context) error
}

// New returns a Status with no checks; add them with Check, Ready and Etcd.
// A nil *Status accepts checks and ignores them, and serves health and an
// always-ready /readyz, so code that builds a process without one works.
func New(m *metrics.Metrics) *Status { return &Status{metrics: m} }

// Check adds a readiness check: fn returns nil when that part is ready,
// else an error saying why not.
func (s *Status) Check(name string, fn func(ctx context.Context) error) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.checks = append(s.checks, check{name, fn})
}

// Ready adds a check that passes once ch is closed (a role's "synced" or
// "registered" signal); until then it fails with notYet.
func (s *Status) Ready(name string, ch <-chan struct{}, notYet string) {
	s.Check(name, func(context.Context) error {
		select {
		case <-ch:
			return nil
		default:
			return errors.New(notYet)
		}
	})
}

// Etcd adds the etcd check: a bounded, linearizable read of key (a count
// only, so its value size does not matter), which needs the cluster's
// quorum, not just a connection.
func (s *Status) Etcd(cli *clientv3.Client, key string) {
	s.Check(EtcdCheck, func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, etcdTimeout)
		defer cancel()
		if _, err := cli.Get(ctx, key, clientv3.WithCountOnly()); err != nil {
			return fmt.Errorf("read %s: %w", key, err)
		}
		return nil
	})
}

// EtcdAlarms adds the etcd alarms check: it lists etcd's alarms (bounded
// like the etcd check) and fails while any is raised, naming each; a
// NOSPACE alarm means etcd refuses every write until the scheduler
// leader's etcd_alarms duty (or an operator) recovers it. It also
// records what it saw in berth_etcd_alarm. A failed listing is the etcd
// check's to report, not this one's.
func (s *Status) EtcdAlarms(cli *clientv3.Client) {
	s.Check(EtcdAlarmsCheck, func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, etcdTimeout)
		defer cancel()
		resp, err := cli.AlarmList(ctx)
		if err != nil {
			return nil
		}
		var types, raised []string
		for _, a := range resp.Alarms {
			t := a.Alarm.String()
			if !slices.Contains(types, t) {
				types = append(types, t)
			}
			raised = append(raised, fmt.Sprintf("%s on member %x", t, a.MemberID))
		}
		s.metrics.EtcdAlarms(types)
		if len(raised) > 0 {
			return fmt.Errorf("etcd alarm raised: %s (NOSPACE: etcd refuses writes until it is recovered, see the runbook in docs/operations.md)",
				strings.Join(raised, ", "))
		}
		return nil
	})
}

// Stopping makes /readyz fail from now on: a process shutting down takes
// no more work, and a load balancer should stop sending it any.
func (s *Status) Stopping() {
	if s != nil {
		s.stopping.Store(true)
	}
}

// CheckResult is one check in /readyz's answer.
type CheckResult struct {
	Name  string `json:"name"`
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
}

// Readiness is /readyz's JSON body.
type Readiness struct {
	Ready  bool          `json:"ready"`
	Checks []CheckResult `json:"checks"`
}

// Evaluate runs every check (in the order they were added; all of them,
// so the answer names every failing part, not just the first).
func (s *Status) Evaluate(ctx context.Context) Readiness {
	s.mu.Lock()
	checks := append([]check(nil), s.checks...)
	s.mu.Unlock()
	r := Readiness{Ready: true}
	if s.stopping.Load() {
		r.Ready = false
		r.Checks = append(r.Checks, CheckResult{Name: "shutdown", Error: "the process is shutting down"})
	}
	for _, c := range checks {
		res := CheckResult{Name: c.name, OK: true}
		if err := c.fn(ctx); err != nil {
			res.OK, res.Error, r.Ready = false, err.Error(), false
		}
		r.Checks = append(r.Checks, res)
	}
	return r
}

// Handler serves the three paths, and 404 for anything else.
func (s *Status) Handler() http.Handler {
	if s == nil {
		s = New(nil)
	}
	mux := http.NewServeMux()
	mux.HandleFunc(PathHealth, s.health)
	mux.HandleFunc(PathReady, s.ready)
	if s.metrics != nil {
		mux.Handle(PathMetrics, s.metrics.Handler())
	}
	return mux
}

func (s *Status) health(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"status":"ok"}` + "\n"))
}

func (s *Status) ready(w http.ResponseWriter, r *http.Request) {
	res := s.Evaluate(r.Context())
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if !res.Ready {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_ = json.NewEncoder(w).Encode(res)
}

// Mount sends exactly the three status paths to st and every other
// request, untouched, to app. None of the three is a route of the
// compute, Placement or scheduler APIs, so their answers do not change.
func Mount(app, st http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case PathHealth, PathReady, PathMetrics:
			if r.Method == http.MethodGet || r.Method == http.MethodHead {
				st.ServeHTTP(w, r)
				return
			}
		}
		app.ServeHTTP(w, r)
	})
}
