package main

import (
	"strings"
	"testing"
	"time"

	"github.com/berth-project/berth/configs"
	"github.com/berth-project/berth/internal/testwait"
)

// TestServerShelveAndUnshelve drives shelving through the CLI against a
// dev stack (shelved_offload_time 0): shelve of two servers at once
// --wait to SHELVED_OFFLOADED with no host, unshelve of both --wait to
// ACTIVE, and the refusals' exit statuses (every server named is tried).
func TestServerShelveAndUnshelve(t *testing.T) {
	startCLIStack(t, configs.AuthNoAuth)
	for _, n := range []string{"s1", "s2"} {
		mustBerth(t, "server", "create", "--flavor", "m1.tiny", "--name", n, "--host", "compute-1", "--wait")
	}
	out := mustBerth(t, "server", "shelve", "s1", "s2", "--wait", "--interval", "100ms", "-o", "value", "-c", "name", "-c", "status", "-c", "host")
	if out != "s1 SHELVED_OFFLOADED None\ns2 SHELVED_OFFLOADED None\n" && out != "s1 SHELVED_OFFLOADED \ns2 SHELVED_OFFLOADED \n" {
		t.Errorf("shelve --wait printed %q, want both SHELVED_OFFLOADED with no host", out)
	}
	out = mustBerth(t, "server", "unshelve", "s1", "s2", "--wait", "--interval", "100ms", "-o", "value", "-c", "status")
	if out != "ACTIVE\nACTIVE\n" {
		t.Errorf("unshelve --wait printed %q, want both ACTIVE", out)
	}
	for _, c := range []struct {
		args  []string
		code  int
		words string
	}{
		{[]string{"server", "unshelve", "s1"}, exitFailure, "Cannot 'unshelve' instance"},
		{[]string{"server", "shelve", "nope", "s1"}, exitNotFound, "nope"},
		{[]string{"server", "shelve"}, exitUsage, "SERVER"},
	} {
		code, out, errs := berth(c.args...)
		if code != c.code || !strings.Contains(errs, c.words) {
			t.Errorf("berth %s: exit %d, stdout %q, stderr %q; want exit %d saying %q", strings.Join(c.args, " "), code, out, errs,
				c.code, c.words)
		}
	}
	// "shelve nope s1" tried s1 too: it goes offloaded.
	testwait.Poll(t, 30*time.Second, "s1 offloaded by the bulk shelve", func() (bool, string) {
		st := strings.TrimSpace(mustBerth(t, "server", "show", "s1", "-o", "value", "-c", "status"))
		return st == "SHELVED_OFFLOADED", st
	})
}
