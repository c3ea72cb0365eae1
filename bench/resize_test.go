package bench

import "testing"

// TestBenchResizeSmoke is CI's small resize churn: 4 servers resized
// back and forth between two flavors, each resize confirmed, for 2 s in
// a cloud of 40 hosts with 40 other servers. The run fails on a failed
// resize, an API error or a server not ACTIVE afterwards; never on
// timing.
func TestBenchResizeSmoke(t *testing.T) {
	res := runBench(t, "resize", "-hosts", "40", "-cells", "2", "-servers", "40", "-clients", "8",
		"-resize-parallel", "4", "-duration", "2s",
		"-timeout", "2m", "-report-interval", "30s", "-service-down-time", "90s")
	if res.Moves < 4 || res.MovesFailed != 0 || res.Lost != 0 || res.APIErrors != 0 {
		t.Fatalf("%d resized, %d failed, %d lost, %d API errors; want every one of the 4 servers resized at least once: %+v",
			res.Moves, res.MovesFailed, res.Lost, res.APIErrors, res)
	}
	if res.Move == nil || res.Move.N != res.Moves || res.ResizeVerify == nil || res.ResizeVerify.N != res.Moves ||
		res.MovesPerSec <= 0 || res.CPUMsPerMove <= 0 || res.ResizeParallel != 4 || len(res.MoveStages) < 5 {
		t.Fatalf("the moves' figures not reported: %+v (move %+v)", res, res.Move)
	}
	t.Logf("%.1f moves/s, one resize p50 %.0f ms p99 %.0f ms (to VERIFY_RESIZE p50 %.0f ms), %.1f ms CPU per move",
		res.MovesPerSec, res.Move.P50, res.Move.P99, res.ResizeVerify.P50, res.CPUMsPerMove)
}

// TestBenchResizeQuotaSmoke is the same churn under every project's
// quota (-resize-quota): each upsize (m1.tiny to m1.small grows ram) is
// checked against the limits, none refused, none failed.
func TestBenchResizeQuotaSmoke(t *testing.T) {
	res := runBench(t, "resize", "-hosts", "40", "-cells", "2", "-servers", "40", "-clients", "8",
		"-resize-parallel", "4", "-duration", "2s", "-resize-quota", "instances=1000,cores=1000,ram=10000000",
		"-timeout", "2m", "-report-interval", "30s", "-service-down-time", "90s")
	if res.Moves < 4 || res.MovesFailed != 0 || res.Lost != 0 || res.APIErrors != 0 {
		t.Fatalf("%d resized, %d failed, %d lost, %d API errors; want every one of the 4 servers resized at least once: %+v",
			res.Moves, res.MovesFailed, res.Lost, res.APIErrors, res)
	}
}
