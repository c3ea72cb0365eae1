package metrics

import "testing"

// TestQueueLeaseCounts: lease attempts are counted by queue, turn and
// outcome, and read back per queue; every series exists at zero first.
func TestQueueLeaseCounts(t *testing.T) {
	m := New()
	if got := m.QueueLeaseCounts(QueueBuildRequests)[TurnFallback][LeaseLost]; got != 0 {
		t.Fatalf("fresh counter = %v", got)
	}
	if _, ok := m.QueueLeaseCounts(QueueRetries)[TurnSibling][LeaseError]; !ok {
		t.Fatal("the retries/sibling/error series does not exist before its first event")
	}
	m.QueueLease(QueueBuildRequests, TurnPreferred, LeaseWon)
	m.QueueLease(QueueBuildRequests, TurnPreferred, LeaseWon)
	m.QueueLease(QueueBuildRequests, TurnFallback, LeaseLost)
	m.QueueLease(QueueRetries, TurnPreferred, LeaseSkipped)
	br := m.QueueLeaseCounts(QueueBuildRequests)
	if br[TurnPreferred][LeaseWon] != 2 || br[TurnFallback][LeaseLost] != 1 || br[TurnPreferred][LeaseSkipped] != 0 {
		t.Errorf("build_requests counts %v", br)
	}
	if r := m.QueueLeaseCounts(QueueRetries); r[TurnPreferred][LeaseSkipped] != 1 || r[TurnPreferred][LeaseWon] != 0 {
		t.Errorf("retries counts %v", r)
	}
	var nilM *Metrics
	nilM.QueueLease(QueueRetries, TurnPreferred, LeaseWon) // no-op, no panic
	if len(nilM.QueueLeaseCounts(QueueRetries)) != 0 {
		t.Error("a nil Metrics reports counts")
	}
}
