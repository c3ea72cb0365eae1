package main

import (
	"strings"
	"testing"
	"time"

	"github.com/berth-project/berth/configs"
	"github.com/berth-project/berth/internal/testwait"
)

// TestServerResizeAndMigrate drives the cold moves through the CLI
// against a dev stack: resize --wait to VERIFY_RESIZE, the migration in
// `migration list`, confirm --wait to ACTIVE, migrate --host --wait,
// revert --wait back to the source, and the refusals' exit statuses.
func TestServerResizeAndMigrate(t *testing.T) {
	// The dev stack's cell1 holds compute-1 and compute-3: a move of a
	// server on compute-1 has one host to go to.
	startCLIStack(t, configs.AuthNoAuth)
	id := strings.TrimSpace(mustBerth(t, "server", "create", "--flavor", "m1.tiny", "--name", "mover", "--host", "compute-1", "--wait",
		"-o", "value", "-c", "id"))

	out := mustBerth(t, "server", "resize", "--flavor", "m1.small", "mover", "--wait", "--interval", "100ms",
		"-o", "value", "-c", "status", "-c", "flavor")
	if out != "VERIFY_RESIZE m1.small\n" {
		t.Errorf("resize --wait printed %q, want the server VERIFY_RESIZE in m1.small", out)
	}
	out = mustBerth(t, "migration", "list", "--server", "mover", "-o", "value", "-c", "server", "-c", "type", "-c", "status")
	if out != id+" resize finished\n" {
		t.Errorf("migration list --server: %q", out)
	}
	out = mustBerth(t, "server", "resize", "confirm", id, "--wait", "--interval", "100ms", "-o", "value", "-c", "status", "-c", "host")
	fields := strings.Fields(out)
	if len(fields) != 2 || fields[0] != "ACTIVE" {
		t.Fatalf("confirm --wait printed %q", out)
	}
	resizedOn := fields[1]
	if resizedOn != "compute-3" {
		t.Fatalf("resized onto %s, want compute-3 (its cell's other host)", resizedOn)
	}
	if out := mustBerth(t, "migration", "list", "--status", "confirmed", "-o", "value", "-c", "server"); out != id+"\n" {
		t.Errorf("migration list --status confirmed: %q", out)
	}

	// Migrate to a named host, then revert: back where the resize left it.
	to := "compute-1"
	out = mustBerth(t, "server", "migrate", "--host", to, "mover", "--wait", "--interval", "100ms", "-o", "value", "-c", "status", "-c", "host")
	if out != "VERIFY_RESIZE "+to+"\n" {
		t.Errorf("migrate --host %s --wait printed %q", to, out)
	}
	if out := mustBerth(t, "migration", "list", "--host", to, "--type", "migration", "-o", "value", "-c", "dest_host"); out != to+"\n" {
		t.Errorf("migration list --host %s --type migration: %q", to, out)
	}
	out = mustBerth(t, "server", "resize", "revert", "mover", "--wait", "--interval", "100ms", "-o", "value", "-c", "status", "-c", "host")
	if out != "ACTIVE "+resizedOn+"\n" {
		t.Errorf("revert --wait printed %q, want ACTIVE on %s", out, resizedOn)
	}

	for _, c := range []struct {
		args  []string
		code  int
		words string
	}{
		{[]string{"server", "resize", "--flavor", "m1.small", "mover"}, exitFailure, "When resizing, instances must change flavor!"},
		{[]string{"server", "resize", "confirm", "mover"}, exitFailure, "Cannot 'confirmResize' instance"},
		{[]string{"server", "migrate", "nope"}, exitNotFound, "nope"},
		{[]string{"server", "resize", "mover"}, exitUsage, "--flavor is required"},
		{[]string{"server", "resize", "--flavor", "m1.medium"}, exitUsage, "SERVER"},
	} {
		code, out, errs := berth(c.args...)
		if code != c.code || !strings.Contains(errs, c.words) {
			t.Errorf("berth %s: exit %d, stdout %q, stderr %q; want exit %d saying %q", strings.Join(c.args, " "), code, out, errs,
				c.code, c.words)
		}
	}
}

// TestServerEvacuate: `server evacuate` is refused while the servers'
// host is up (exit 1 with Nova's words, every server tried), then, with
// the host forced down, rebuilds every server named on the cell's other
// host, and `migration list --type evacuation` shows them done.
func TestServerEvacuate(t *testing.T) {
	startCLIStack(t, configs.AuthNoAuth)
	for _, name := range []string{"e1", "e2"} {
		mustBerth(t, "server", "create", "--flavor", "m1.tiny", "--name", name, "--host", "compute-1", "--wait")
	}
	code, out, errs := berth("server", "evacuate", "e1", "e2")
	if code != exitFailure || strings.Count(errs, "Compute service of compute-1 is still in use.") != 2 || out != "" {
		t.Fatalf("evacuate from an up host: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	mustBerth(t, "service", "force-down", "compute-1")
	out = mustBerth(t, "server", "evacuate", "e1", "e2", "--wait", "--interval", "100ms", "-o", "value", "-c", "name", "-c", "status", "-c", "host")
	if out != "e1 ACTIVE compute-3\ne2 ACTIVE compute-3\n" {
		t.Errorf("evacuate --wait printed %q, want both ACTIVE on compute-3 (cell1's other host)", out)
	}
	// compute-1's agent runs on (forced down, not dead): it destroys its
	// copies at once and the evacuations end completed.
	testwait.Poll(t, 30*time.Second, "both evacuations completed", func() (bool, string) {
		out := mustBerth(t, "migration", "list", "--type", "evacuation", "-o", "value", "-c", "status", "-c", "source_host", "-c", "dest_host")
		return out == "completed compute-1 compute-3\ncompleted compute-1 compute-3\n", out
	})
	if code, _, errs := berth("server", "evacuate", "nope"); code != exitNotFound || !strings.Contains(errs, "nope") {
		t.Errorf("evacuate nope: exit %d, stderr %q", code, errs)
	}
}
