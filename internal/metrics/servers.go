package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// CellNone is the cell label of servers not in a cell yet: build requests
// waiting for a host (status BUILD).
const CellNone = "none"

// ServerKey is one series of berth_servers: a Nova status (ACTIVE, BUILD,
// ERROR, ...) in a cell (cell0 for the servers buried there).
type ServerKey struct{ Status, Cell string }

// serverCounts is berth_servers: the counts the scheduler leader's
// server_counts duty took last, exported only while this process leads
// (a deposed leader's counts would go stale beside the new leader's).
type serverCounts struct {
	desc *prometheus.Desc
	mu   sync.Mutex
	// counts is nil before the first count of this term.
	counts map[ServerKey]int
}

func newServerCounts() *serverCounts {
	return &serverCounts{desc: prometheus.NewDesc("berth_servers",
		"Servers by Nova status and cell (cell0: buried; none: build requests), counted by the scheduler leader every leader interval; only the leader exports it.",
		[]string{"status", "cell"}, nil)}
}

func (s *serverCounts) Describe(ch chan<- *prometheus.Desc) { ch <- s.desc }

func (s *serverCounts) Collect(ch chan<- prometheus.Metric) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, n := range s.counts {
		ch <- prometheus.MustNewConstMetric(s.desc, prometheus.GaugeValue, float64(n), k.Status, k.Cell)
	}
}

// SetServerCounts replaces berth_servers with counts (the leader's
// server_counts duty); nil withdraws them (the term ended).
func (m *Metrics) SetServerCounts(counts map[ServerKey]int) {
	if m == nil {
		return
	}
	m.servers.mu.Lock()
	defer m.servers.mu.Unlock()
	m.servers.counts = counts
}
