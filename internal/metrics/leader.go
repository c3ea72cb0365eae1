package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Outcomes of berth_scheduler_duty_runs_total.
const (
	DutyOK        = "ok"         // the sweep finished
	DutyError     = "error"      // it failed; it runs again next interval
	DutyNotLeader = "not_leader" // a fenced write was refused: another scheduler leads
)

// leaderMetrics are the scheduler leader's: whether this scheduler leads,
// how often it became leader, and its duties' runs.
type leaderMetrics struct {
	leading     prometheus.Gauge
	terms       prometheus.Counter
	dutyRuns    *prometheus.CounterVec
	dutySeconds *prometheus.HistogramVec
}

func newLeaderMetrics(reg *prometheus.Registry) *leaderMetrics {
	l := &leaderMetrics{
		leading: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "berth_scheduler_leader",
			Help: "1 while this scheduler is the leader (runs the singleton duties), else 0.",
		}),
		terms: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "berth_scheduler_leader_terms_total",
			Help: "Times this scheduler was elected leader.",
		}),
		dutyRuns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_scheduler_duty_runs_total",
			Help: "Leader duty sweeps by duty and outcome (ok, error, not_leader).",
		}, []string{"duty", "outcome"}),
		dutySeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "berth_scheduler_duty_duration_seconds",
			Help:    "Time one leader duty sweep took, by duty.",
			Buckets: latencyBuckets,
		}, []string{"duty"}),
	}
	reg.MustRegister(l.leading, l.terms, l.dutyRuns, l.dutySeconds)
	return l
}

// DeclareDuties creates the duties' series at zero, so a dashboard has
// them before the first sweep (and on schedulers that never lead).
func (m *Metrics) DeclareDuties(names ...string) {
	if m == nil {
		return
	}
	for _, n := range names {
		for _, o := range []string{DutyOK, DutyError, DutyNotLeader} {
			m.leader.dutyRuns.WithLabelValues(n, o)
		}
		m.leader.dutySeconds.WithLabelValues(n)
	}
}

// Leading records that this scheduler became leader (true) or stopped
// leading (false).
func (m *Metrics) Leading(on bool) {
	if m == nil {
		return
	}
	if on {
		m.leader.terms.Inc()
		m.leader.leading.Set(1)
		return
	}
	m.leader.leading.Set(0)
	m.SetServerCounts(nil) // the next leader counts them
}

// ObserveDuty counts one sweep of duty and its time.
func (m *Metrics) ObserveDuty(duty, outcome string, start time.Time) {
	if m == nil {
		return
	}
	m.leader.dutyRuns.WithLabelValues(duty, outcome).Inc()
	m.leader.dutySeconds.WithLabelValues(duty).Observe(time.Since(start).Seconds())
}
