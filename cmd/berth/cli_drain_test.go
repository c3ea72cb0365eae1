package main

import (
	"strings"
	"testing"

	"github.com/berth-project/berth/configs"
)

// TestHostDrainExitStatuses drives `berth host drain` against a dev
// stack where it cannot complete: compute-2 is cell2's only host, so
// its servers have nowhere to go. --wait shows its progress, prints the
// servers with their migrations' reasons and exits 1; the refusals have
// their own statuses.
func TestHostDrainExitStatuses(t *testing.T) {
	startCLIStack(t, configs.AuthNoAuth)
	id := strings.TrimSpace(mustBerth(t, "server", "create", "--flavor", "m1.tiny", "--name", "stuck", "--host", "compute-2", "--wait",
		"-o", "value", "-c", "id"))

	for _, tc := range []struct {
		desc string
		args []string
		code int
		err  string
	}{
		{"no such host", []string{"host", "drain", "compute-9"}, exitNotFound, "Compute host compute-9 could not be found."},
		{"no drain yet", []string{"host", "drain", "status", "compute-2"}, exitNotFound, "Host compute-2 has no drain."},
		{"nothing to cancel", []string{"host", "drain", "cancel", "compute-2"}, exitNotFound, "Host compute-2 has no drain."},
		{"negative deadline", []string{"host", "drain", "compute-2", "--deadline", "-1m"}, exitUsage, "--deadline must not be negative"},
		{"parallel too high", []string{"host", "drain", "compute-2", "--parallel", "100"}, exitFailure, "'parallel' must be between 1 and 64"},
		{"missing host", []string{"host", "drain"}, exitUsage, "missing HOST"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			code, _, errs := berth(tc.args...)
			if code != tc.code || !strings.Contains(errs, tc.err) {
				t.Errorf("berth %s: exit %d, stderr %q; want %d with %q", strings.Join(tc.args, " "), code, errs, tc.code, tc.err)
			}
		})
	}

	code, out, errs := berth("host", "drain", "compute-2", "--wait", "--interval", "100ms", "-o", "value", "-c", "server", "-c", "state", "-c", "reason")
	if code != exitFailure {
		t.Errorf("drain --wait of a host whose servers cannot move: exit %d, want 1\n%s", code, errs)
	}
	if !strings.HasPrefix(out, id+" failed ") || !strings.Contains(out, "No valid host") {
		t.Errorf("drain --wait printed %q, want %s failed with the no-valid-host reason", out, id)
	}
	for _, want := range []string{"waiting: ", "drain of compute-2: incomplete (failed=1 moved=0 moving=0 waiting=0): 1 servers could not move",
		"the drain of compute-2 ended incomplete"} {
		if !strings.Contains(errs, want) {
			t.Errorf("stderr %q lacks %q", errs, want)
		}
	}
	if code, _, errs := berth("host", "drain", "cancel", "compute-2"); code != exitFailure || !strings.Contains(errs, "already ended") {
		t.Errorf("cancel an ended drain: exit %d %q", code, errs)
	}
	if out := mustBerth(t, "service", "list", "--host", "compute-2", "-o", "value", "-c", "status", "-c", "disabled_reason"); out != "disabled draining\n" {
		t.Errorf("compute-2 after its drain: %q, want disabled draining", out)
	}

	// A live drain moves its servers while they run: cell1 holds
	// compute-1 and compute-3, so compute-1's server goes to compute-3 by
	// a live migration the drain started.
	live := strings.TrimSpace(mustBerth(t, "server", "create", "--flavor", "m1.tiny", "--name", "runner", "--host", "compute-1", "--wait",
		"-o", "value", "-c", "id"))
	if code, out, errs := berth("host", "drain", "compute-1", "--live", "--wait", "--interval", "100ms", "-o", "value", "-c", "server", "-c", "state", "-c", "dest_host"); code != 0 ||
		out != live+" moved compute-3\n" {
		t.Errorf("live drain of compute-1: exit %d, printed %q (stderr %q); want %s moved to compute-3", code, out, errs, live)
	}
	if out := mustBerth(t, "migration", "list", "-o", "value", "-c", "type", "-c", "status"); !strings.Contains(out, "live-migration completed\n") {
		t.Errorf("migrations after the live drain: %q, want a live-migration completed", out)
	}
}
