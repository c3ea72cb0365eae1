package main

import (
	"strings"
	"testing"

	"github.com/berth-project/berth/configs"
)

// TestServerLiveMigrate drives `server migrate --live` against a dev
// stack: one server --wait to its cell's other host, ACTIVE there with
// its migration completed; two servers in one command; and the
// refusals: the server's own host (Nova's 400, exit 1), several SERVERs
// without --live (usage).
func TestServerLiveMigrate(t *testing.T) {
	// cell1 holds compute-1 and compute-3: a server on compute-1 has one
	// host to go to.
	startCLIStack(t, configs.AuthNoAuth)
	id := strings.TrimSpace(mustBerth(t, "server", "create", "--flavor", "m1.tiny", "--name", "runner", "--host", "compute-1",
		"--wait", "-o", "value", "-c", "id"))
	out := mustBerth(t, "server", "migrate", "--live", "runner", "--wait", "--interval", "100ms", "-o", "value", "-c", "status", "-c", "host")
	if out != "ACTIVE compute-3\n" {
		t.Errorf("migrate --live --wait printed %q, want ACTIVE on compute-3", out)
	}
	out = mustBerth(t, "migration", "list", "--type", "live-migration", "-o", "value", "-c", "server", "-c", "status", "-c", "dest_host")
	if out != id+" completed compute-3\n" {
		t.Errorf("migration list --type live-migration: %q", out)
	}

	mustBerth(t, "server", "create", "--flavor", "m1.tiny", "--name", "other", "--host", "compute-3", "--wait")
	out = mustBerth(t, "server", "migrate", "--live", "--host", "compute-1", "runner", "other", "--wait", "--interval", "100ms",
		"-o", "value", "-c", "name", "-c", "host")
	if got := strings.Fields(out); len(got) != 4 || got[1] != "compute-1" || got[3] != "compute-1" {
		t.Errorf("two servers to compute-1 printed %q", out)
	}

	for _, c := range []struct {
		args  []string
		code  int
		words string
	}{
		{[]string{"server", "migrate", "--live", "--host", "compute-1", "runner"}, exitFailure, "to current host (compute-1)"},
		{[]string{"server", "migrate", "runner", "other"}, exitUsage, "--live takes several"},
		{[]string{"server", "migrate", "--live", "nope"}, exitNotFound, "nope"},
	} {
		code, out, errs := berth(c.args...)
		if code != c.code || !strings.Contains(errs, c.words) {
			t.Errorf("berth %s: exit %d, stdout %q, stderr %q; want exit %d saying %q", strings.Join(c.args, " "), code, out, errs,
				c.code, c.words)
		}
	}
}
