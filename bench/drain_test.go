package bench

import "testing"

// TestBenchDrainSmoke is CI's small drain: 5 of 60 hosts drained at once
// in a cloud of 60 other servers, 4 servers each, 2 moves at a time per
// drain. The run fails on a failed move, a drain that did not complete
// or a lost server; never on timing.
func TestBenchDrainSmoke(t *testing.T) {
	res := runBench(t, "drain", "-hosts", "60", "-cells", "2", "-servers", "60", "-clients", "8",
		"-drain-hosts", "5", "-servers-per-host", "4", "-drain-parallel", "2",
		"-timeout", "5m", "-report-interval", "30s", "-service-down-time", "90s")
	if res.Moves < 20 || res.MovesFailed != 0 || res.Lost != 0 {
		t.Fatalf("%d moved, %d failed, %d lost; want at least the 20 servers pinned to the 5 drained hosts moved: %+v",
			res.Moves, res.MovesFailed, res.Lost, res)
	}
	if res.Move == nil || res.Move.N != res.Moves || res.MovesPerSec <= 0 || res.CPUMsPerMove <= 0 {
		t.Fatalf("the moves' figures not reported: %+v (move %+v)", res, res.Move)
	}
	if res.DrainedHosts != 5 || res.ServersPerHost != 4 || res.DrainParallel != 2 {
		t.Fatalf("the drain's shape not reported: %+v", res)
	}
	t.Logf("%.1f moves/s, one move p50 %.0f ms p99 %.0f ms, %.1f ms CPU per move", res.MovesPerSec, res.Move.P50, res.Move.P99, res.CPUMsPerMove)
}
