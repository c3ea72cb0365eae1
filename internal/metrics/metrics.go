// Package metrics holds the Prometheus metrics one berth process exports
// on /metrics: scheduling latency, claims and their conflicts, reschedules,
// builds, hosts by state and etcd request latency, plus Go's runtime and
// process collectors. docs/operations.md ("Status, metrics and shutdown") says what each means.
//
// Each process (each stack) has its own registry rather than Prometheus's
// global one: the embedded etcd server registers its own collectors in the
// global registry, and tests start many stacks in one process, so
// registering Berth's names there would panic on the second stack and mix
// one stack's counts into another's.
//
// Every method is safe on a nil *Metrics and then does nothing, so a
// component built without metrics (most unit tests) needs no special case
// and instrumenting a hot path is one line.
package metrics

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
)

// Outcome label values. They are part of the metrics' contract with
// dashboards: never rename one.
const (
	// select_destinations
	SelectSelected    = "selected"      // every instance claimed
	SelectNoValidHost = "no_valid_host" // NoValidHost: nothing fits
	SelectError       = "error"         // etcd or another failure

	// placement allocation writes
	ClaimCommitted   = "committed"    // the transaction succeeded
	ClaimRejected    = "rejected"     // refused before writing: capacity, generation, bad input
	ClaimConflict    = "conflict"     // every retry lost a race: ErrConcurrentUpdate
	ClaimGuardFailed = "guard_failed" // the caller's guard (server group, fence) no longer held
	ClaimError       = "error"        // etcd failed

	// cell conductor retries
	RescheduleCast      = "rescheduled" // cast to the next alternate
	RescheduleExhausted = "exhausted"   // no alternate left: instance ERROR

	// agent builds
	BuildActive      = "active"      // spawned, instance ACTIVE
	BuildFailed      = "failed"      // failed, not reschedulable: instance ERROR
	BuildRescheduled = "rescheduled" // failed, a retry was filed for the cell conductor

	// superconductor: what became of the instances of a request
	ScheduledHandedOff   = "handed_off"    // created in a cell and cast to a host
	ScheduledNoValidHost = "no_valid_host" // buried in cell0 with the reason
	ScheduledError       = "error"         // scheduling failed; the request is tried again

	// work queues (conductor.Queue): which queue
	QueueBuildRequests = "build_requests" // the superconductors' queue
	QueueRetries       = "retries"        // the cell conductors' queues
	// a lease attempt's turn
	TurnPreferred = "preferred" // this holder ranks first for the item: tried at once
	TurnFallback  = "fallback"  // another holder ranks first: tried after the grace
	TurnSibling   = "sibling"   // gathered with a multi-create's first item
	TurnStolen    = "stolen"    // a live but slow holder ranks first: taken by an idle second-ranked one
	// its outcome
	LeaseWon     = "won"     // the lease transaction succeeded
	LeaseLost    = "lost"    // its compares failed: another holder had it, or it was gone
	LeaseSkipped = "skipped" // our watch already showed it leased: no transaction sent
	LeaseError   = "error"   // etcd failed
)

// Host states of berth_scheduler_hosts.
const (
	HostUp       = "up"
	HostDown     = "down"
	HostDisabled = "disabled"
)

// Metrics is one process's collectors.
type Metrics struct {
	reg *prometheus.Registry

	selectSeconds  *prometheus.HistogramVec
	claims         *prometheus.CounterVec
	claimConflicts prometheus.Counter
	reschedules    *prometheus.CounterVec
	builds         *prometheus.CounterVec
	etcdSeconds    *prometheus.HistogramVec
	etcdErrors     *prometheus.CounterVec
	http           *httpMetrics
	leader         *leaderMetrics
	etcdSpace      *etcdSpaceMetrics
	queueLeases    *prometheus.CounterVec
	scheduled      *prometheus.CounterVec
	servers        *serverCounts
}

// latencyBuckets span an in-memory pick (well under a millisecond) to a
// claim loop against a loaded etcd (seconds).
var latencyBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// New makes a registry with Berth's collectors and Go's runtime and
// process collectors.
func New() *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	m.selectSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "berth_scheduler_select_destinations_seconds",
		Help:    "Time SelectDestinations took, claims included, by outcome (selected, no_valid_host, error).",
		Buckets: latencyBuckets,
	}, []string{"outcome"})
	m.claims = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "berth_placement_claims_total",
		Help: "Allocation write transactions (claims; a free is a claim of nothing) by outcome (committed, rejected, conflict, guard_failed, error).",
	}, []string{"outcome"})
	m.claimConflicts = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "berth_placement_claim_conflicts_total",
		Help: "Claim transactions whose compares failed because a provider or consumer changed since it was read; each is re-read and retried.",
	})
	m.reschedules = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "berth_conductor_reschedules_total",
		Help: "Failed builds a cell conductor handled, by outcome (rescheduled on an alternate, exhausted).",
	}, []string{"outcome"})
	m.builds = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "berth_agent_builds_total",
		Help: "Builds an agent finished, by outcome (active, failed, rescheduled).",
	}, []string{"outcome"})
	m.etcdSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "berth_etcd_request_duration_seconds",
		Help:    "Latency of this process's etcd KV requests by operation (get, put, delete, txn, compact, do, get_stream).",
		Buckets: latencyBuckets,
	}, []string{"operation"})
	m.etcdErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "berth_etcd_request_errors_total",
		Help: "etcd KV requests of this process that returned an error, by operation.",
	}, []string{"operation"})
	m.queueLeases = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "berth_queue_lease_attempts_total",
		Help: "Work-queue lease attempts by queue (build_requests, retries), turn (preferred, fallback, sibling) and outcome (won, lost, skipped, error).",
	}, []string{"queue", "turn", "outcome"})
	m.scheduled = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "berth_superconductor_instances_total",
		Help: "Instances a superconductor finished scheduling, by outcome (handed_off to a cell, no_valid_host: buried in cell0, error: left for another try).",
	}, []string{"outcome"})
	m.servers = newServerCounts()
	m.reg.MustRegister(m.selectSeconds, m.claims, m.claimConflicts, m.reschedules, m.builds,
		m.etcdSeconds, m.etcdErrors, m.queueLeases, m.scheduled, m.servers, newBuildInfo(),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// Every label value exists from the start, at zero, so a dashboard's
	// rate() has a series before the first event.
	for _, o := range []string{SelectSelected, SelectNoValidHost, SelectError} {
		m.selectSeconds.WithLabelValues(o)
	}
	for _, o := range []string{ClaimCommitted, ClaimRejected, ClaimConflict, ClaimGuardFailed, ClaimError} {
		m.claims.WithLabelValues(o)
	}
	for _, o := range []string{RescheduleCast, RescheduleExhausted} {
		m.reschedules.WithLabelValues(o)
	}
	for _, o := range []string{BuildActive, BuildFailed, BuildRescheduled} {
		m.builds.WithLabelValues(o)
	}
	for _, o := range []string{ScheduledHandedOff, ScheduledNoValidHost, ScheduledError} {
		m.scheduled.WithLabelValues(o)
	}
	m.http = newHTTPMetrics(m.reg)
	m.leader = newLeaderMetrics(m.reg)
	m.etcdSpace = newEtcdSpaceMetrics(m.reg)
	for _, q := range []string{QueueBuildRequests, QueueRetries} {
		for _, t := range []string{TurnPreferred, TurnFallback, TurnSibling, TurnStolen} {
			for _, o := range []string{LeaseWon, LeaseLost, LeaseSkipped, LeaseError} {
				m.queueLeases.WithLabelValues(q, t, o)
			}
		}
	}
	return m
}

// Registry is the process's registry, for tests and extra collectors.
func (m *Metrics) Registry() *prometheus.Registry {
	if m == nil {
		return nil
	}
	return m.reg
}

// Handler serves the registry in Prometheus's text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// ObserveSelect records one SelectDestinations call that began at start.
func (m *Metrics) ObserveSelect(outcome string, start time.Time) {
	if m == nil {
		return
	}
	m.selectSeconds.WithLabelValues(outcome).Observe(time.Since(start).Seconds())
}

// Claim counts one allocation write by outcome.
func (m *Metrics) Claim(outcome string) {
	if m == nil {
		return
	}
	m.claims.WithLabelValues(outcome).Inc()
}

// ClaimConflict counts one claim transaction lost to a concurrent change.
func (m *Metrics) ClaimConflict() {
	if m == nil {
		return
	}
	m.claimConflicts.Inc()
}

// Reschedule counts one retry a cell conductor finished.
func (m *Metrics) Reschedule(outcome string) {
	if m == nil {
		return
	}
	m.reschedules.WithLabelValues(outcome).Inc()
}

// Build counts one build an agent finished.
func (m *Metrics) Build(outcome string) {
	if m == nil {
		return
	}
	m.builds.WithLabelValues(outcome).Inc()
}

// Scheduled counts n instances a superconductor finished, by outcome.
func (m *Metrics) Scheduled(outcome string, n int) {
	if m == nil {
		return
	}
	m.scheduled.WithLabelValues(outcome).Add(float64(n))
}

// QueueLease counts one lease attempt of a work queue.
func (m *Metrics) QueueLease(queue, turn, outcome string) {
	if m == nil {
		return
	}
	m.queueLeases.WithLabelValues(queue, turn, outcome).Inc()
}

// QueueLeaseCounts reads berth_queue_lease_attempts_total of one queue,
// by turn then outcome (for the load tool's summary and tests).
//
// It collects that one counter vector, not the registry: a Gather runs
// every collector, and the capacity collector walks every host (0.26 CPU
// s at 100,000 hosts, twice a boot in the load tool's profile).
func (m *Metrics) QueueLeaseCounts(queue string) map[string]map[string]float64 {
	out := map[string]map[string]float64{}
	if m == nil {
		return out
	}
	ch := make(chan prometheus.Metric)
	go func() {
		m.queueLeases.Collect(ch)
		close(ch)
	}()
	for metric := range ch {
		var mt dto.Metric
		if metric.Write(&mt) != nil {
			continue
		}
		l := map[string]string{}
		for _, lp := range mt.GetLabel() {
			l[lp.GetName()] = lp.GetValue()
		}
		if l["queue"] != queue {
			continue
		}
		if out[l["turn"]] == nil {
			out[l["turn"]] = map[string]float64{}
		}
		out[l["turn"]][l["outcome"]] = mt.GetCounter().GetValue()
	}
	return out
}

// HostCounts is what berth_scheduler_hosts reports: hosts with a service
// record that are up or down (up + down = all), and those disabled (up or
// down).
type HostCounts struct {
	Up, Down, Disabled int
}

// WatchHosts exports berth_scheduler_hosts{state}, computed by count at
// each scrape (from a scheduler's host manager: no etcd read).
func (m *Metrics) WatchHosts(count func() HostCounts) {
	if m == nil {
		return
	}
	m.reg.MustRegister(hostsCollector{count: count, desc: prometheus.NewDesc("berth_scheduler_hosts",
		"Compute hosts as this scheduler's host manager sees them, by state: up (alive key present, not forced down), down, disabled (up or down).",
		[]string{"state"}, nil)})
}

type hostsCollector struct {
	count func() HostCounts
	desc  *prometheus.Desc
}

func (c hostsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c hostsCollector) Collect(ch chan<- prometheus.Metric) {
	n := c.count()
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n.Up), HostUp)
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n.Down), HostDown)
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n.Disabled), HostDisabled)
}

// observeEtcd records one KV request.
func (m *Metrics) observeEtcd(op string, start time.Time, err error) {
	m.etcdSeconds.WithLabelValues(op).Observe(time.Since(start).Seconds())
	if err != nil {
		m.etcdErrors.WithLabelValues(op).Inc()
	}
}
