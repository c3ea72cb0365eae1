// Package monitoring holds what an operator loads into Prometheus and
// Grafana to watch Berth: alerts.yml (hosts down, no scheduler leader,
// etcd NOSPACE or near its quota, builds failing, capacity low), its
// promtool unit tests (alerts_test.yml) and berth-dashboard.json. Its Go
// tests check them with the real promtool (Debian's prometheus package)
// and check that every Berth metric they name is one a Berth process
// exports and docs/operations.md documents.
package monitoring
