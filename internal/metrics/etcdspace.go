package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Outcomes of berth_etcd_defrags_total.
const (
	DefragOK    = "ok"    // the member was defragmented
	DefragError = "error" // etcd refused or the call timed out
)

// EtcdAlarmTypes are the alarms etcd raises (etcdserverpb.AlarmType
// names), each exported from the start at 0.
var EtcdAlarmTypes = []string{"NOSPACE", "CORRUPT"}

// etcdSpaceMetrics are the etcd space duties' (leader/etcdspace.go) and
// the alarm readiness check's.
type etcdSpaceMetrics struct {
	defrags    *prometheus.CounterVec
	reclaimed  prometheus.Counter
	alarm      *prometheus.GaugeVec
	recoveries prometheus.Counter
}

func newEtcdSpaceMetrics(reg *prometheus.Registry) *etcdSpaceMetrics {
	e := &etcdSpaceMetrics{
		defrags: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_etcd_defrags_total",
			Help: "etcd member defragmentations the leader ran, by outcome (ok, error).",
		}, []string{"outcome"}),
		reclaimed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "berth_etcd_defrag_reclaimed_bytes_total",
			Help: "Bytes of etcd backend files given back by the leader's defragmentations.",
		}),
		alarm: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "berth_etcd_alarm",
			Help: "1 while etcd reported an alarm of this type (NOSPACE, CORRUPT) when this process last listed them, else 0.",
		}, []string{"type"}),
		recoveries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "berth_etcd_nospace_recoveries_total",
			Help: "NOSPACE alarms the leader recovered from (compacted, defragmented, disarmed).",
		}),
	}
	reg.MustRegister(e.defrags, e.reclaimed, e.alarm, e.recoveries)
	for _, o := range []string{DefragOK, DefragError} {
		e.defrags.WithLabelValues(o)
	}
	for _, t := range EtcdAlarmTypes {
		e.alarm.WithLabelValues(t)
	}
	return e
}

// EtcdDefrag counts one member's defragmentation and the bytes it gave back.
func (m *Metrics) EtcdDefrag(outcome string, reclaimed int64) {
	if m == nil {
		return
	}
	m.etcdSpace.defrags.WithLabelValues(outcome).Inc()
	m.etcdSpace.reclaimed.Add(float64(reclaimed))
}

// EtcdAlarms records the alarm types etcd reports now: those set to 1,
// every other known type to 0.
func (m *Metrics) EtcdAlarms(active []string) {
	if m == nil {
		return
	}
	for _, t := range EtcdAlarmTypes {
		m.etcdSpace.alarm.WithLabelValues(t).Set(0)
	}
	for _, t := range active {
		m.etcdSpace.alarm.WithLabelValues(t).Set(1)
	}
}

// EtcdNoSpaceRecovered counts one NOSPACE recovery.
func (m *Metrics) EtcdNoSpaceRecovered() {
	if m == nil {
		return
	}
	m.etcdSpace.recoveries.Inc()
}
