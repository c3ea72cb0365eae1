package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-project/berth/configs"
	"github.com/berth-project/berth/internal/output"
	"github.com/berth-project/berth/internal/testwait"
)

// Output goldens: every command that prints (it has -o) has its output
// kept in testdata/NOUN_VERB.FORMAT for each of output.Formats, so that a
// change of a column, a key or a format shows in review (go test -update
// rewrites them). TestEveryPrintingCommandHasGoldens walks the cobra tree
// and fails for a printing command without them.
//
// What differs per run is normalised before comparing, by pattern (see
// normaliseOutput): uuids become 00000000-0000-0000-0000-00000000000N,
// numbered in order of first appearance in that output (so that "this
// server is that group's member" still shows, and a table keeps its
// widths); timestamps lose their fraction and their digits become 0
// (same width); a loopback port becomes PORT; the Go toolchain's version
// becomes go1.X; a process's service host (scheduler@HOST:PID:RANDOM)
// becomes scheduler@HOST:PID:ID. A list's order follows ids (random
// uuids), so a list's records are sorted by their text with ids blanked
// before the ids are numbered (sortRecords). Everything else (names, hosts, statuses, flavors) the
// test makes deterministic: servers are built on named hosts.

var (
	uuidPattern = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	timePattern = regexp.MustCompile(`\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})?`)
	fracPattern = regexp.MustCompile(`\.\d+`)
	digit       = regexp.MustCompile(`\d`)
	portPattern = regexp.MustCompile(`(127\.0\.0\.1|localhost|\[::1\]):\d+`)
	goPattern   = regexp.MustCompile(`go1\.\d+(\.\d+)?`)
	procPattern = regexp.MustCompile(`@[^\s:"@]+:\d+:[0-9a-f]{8}\b`)
)

// normaliseOutput replaces what differs per run in s by placeholders.
func normaliseOutput(s string) string {
	seen := map[string]string{}
	s = uuidPattern.ReplaceAllStringFunc(s, func(u string) string {
		if p, ok := seen[u]; ok {
			return p
		}
		p := fmt.Sprintf("00000000-0000-0000-0000-%012d", len(seen)+1)
		seen[u] = p
		return p
	})
	s = timePattern.ReplaceAllStringFunc(s, func(ts string) string {
		return digit.ReplaceAllString(fracPattern.ReplaceAllString(ts, ""), "0")
	})
	s = portPattern.ReplaceAllString(s, "${1}:PORT")
	s = procPattern.ReplaceAllString(s, "@HOST:PID:ID")
	return goPattern.ReplaceAllString(s, "go1.X")
}

// sortRecords orders the records of a list printed in format by their
// text with uuids blanked, so that a list in id order compares the same
// whatever ids the run drew. Table: the rows under the header; value:
// the lines; json: the objects of the array; yaml: the "- " items.
// Timestamps are blanked too: the order must not hang on whether two
// records were written in the same second.
func sortRecords(format, s string) string {
	key := func(r string) string { return timePattern.ReplaceAllString(uuidPattern.ReplaceAllString(r, ""), "") }
	sorted := func(recs []string) []string {
		slices.SortStableFunc(recs, func(a, b string) int { return strings.Compare(key(a), key(b)) })
		return recs
	}
	lines := strings.SplitAfter(s, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	switch format {
	case "table":
		if len(lines) > 1 {
			return lines[0] + strings.Join(sorted(lines[1:]), "")
		}
	case "value":
		return strings.Join(sorted(lines), "")
	case "json":
		if len(lines) < 3 || lines[0] != "[\n" || lines[len(lines)-1] != "]\n" {
			return s
		}
		var recs []string
		var cur strings.Builder
		for _, l := range lines[1 : len(lines)-1] {
			if l == "  },\n" {
				l = "  }\n"
			}
			cur.WriteString(l)
			if l == "  }\n" {
				recs = append(recs, cur.String())
				cur.Reset()
			}
		}
		recs = sorted(recs)
		for i := range recs[:len(recs)-1] {
			recs[i] = strings.TrimSuffix(recs[i], "\n") + ",\n"
		}
		return "[\n" + strings.Join(recs, "") + "]\n"
	case "yaml":
		var recs []string
		for _, l := range lines {
			if strings.HasPrefix(l, "- ") || len(recs) == 0 {
				recs = append(recs, l)
				continue
			}
			recs[len(recs)-1] += l
		}
		return strings.Join(sorted(recs), "")
	}
	return s
}

// A migration's id is the etcd revision that created it (Nova's is an
// autoincrement): it depends on how many writes (heartbeats) came before.
var (
	migIDKey   = regexp.MustCompile(`(?m)^(\s*(?:- )?"?id"?: )\d+`)
	migIDRow   = regexp.MustCompile(`(?m)^\d+ +`)
	migIDValue = regexp.MustCompile(`(?m)^\d+ `)
	migIDHead  = regexp.MustCompile(`^ID +`)
)

// blankMigrationIDs replaces the ids of a migration list by REV, the
// table's id column by one of a fixed width.
func blankMigrationIDs(format, s string) string {
	switch format {
	case "json", "yaml":
		return migIDKey.ReplaceAllString(s, "${1}REV")
	case "table":
		return migIDRow.ReplaceAllString(migIDHead.ReplaceAllString(s, "ID   "), "REV  ")
	case "value":
		return migIDValue.ReplaceAllString(s, "REV ")
	}
	return s
}

// goldenName is the stem of a command's output goldens: its path under
// berth joined by "_" (server-group show: server-group_show).
func goldenName(path ...string) string { return strings.Join(path, "_") }

// goldenFormats runs the command of path with args in every format and
// compares each normalised output with its golden. A command that
// changes something runs once per format on the same starting state:
// before and after, when not nil, run around each run to make it so.
func goldenFormats(t *testing.T, path []string, args []string, before, after func()) {
	t.Helper()
	for _, f := range output.Formats {
		if before != nil {
			before()
		}
		goldenOf(t, f, path, args...)
		if after != nil {
			after()
		}
	}
}

// goldenOf runs the command of path with args in format f and compares
// its normalised output with its golden.
func goldenOf(t *testing.T, f string, path []string, args ...string) {
	t.Helper()
	out := mustBerth(t, append(append(append([]string{}, path...), args...), "-o", f)...)
	if goldenName(path...) == "migration_list" {
		out = blankMigrationIDs(f, out)
	}
	if verb := path[len(path)-1]; verb == "list" || verb == "discover-hosts" || slices.Contains(path, "drain") {
		out = sortRecords(f, out)
	}
	out = normaliseOutput(out)
	if f == "table" {
		// A table's widths follow its longest cell, and a placeholder can
		// replace text of any length (a process's host and pid): compare
		// the columns, not their padding.
		out = columnGap.ReplaceAllString(out, "  ")
	}
	golden(t, goldenName(path...)+"."+f, out)
}

// columnGap is the padding between a table's columns.
var columnGap = regexp.MustCompile(` {2,}`)

// TestEveryPrintingCommandHasGoldens: each command with -o has a golden
// per format (written by TestCLIOutputGoldens or TestCLIAgainstDevNoauth).
func TestEveryPrintingCommandHasGoldens(t *testing.T) {
	root := newRoot(&streams{in: strings.NewReader(""), out: &strings.Builder{}, err: &strings.Builder{}})
	printing := 0
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}
		if c.Flags().Lookup("output") == nil {
			return
		}
		printing++
		name := goldenName(strings.Fields(c.CommandPath())[1:]...)
		for _, f := range output.Formats {
			if _, err := os.Stat(filepath.Join("testdata", name+"."+f)); err != nil {
				t.Errorf("%s prints but has no golden of -o %s: add it to TestCLIOutputGoldens (%v)", c.CommandPath(), f, err)
			}
		}
	}
	walk(root)
	if printing < 30 {
		t.Errorf("found %d printing commands: does the walk still see the -o flag?", printing)
	}
}

// TestCLIOutputGoldens runs every printing command against a fresh
// noauth dev stack in every format.
func TestCLIOutputGoldens(t *testing.T) {
	st := startCLIStack(t, configs.AuthNoAuth)
	cleanEnv(t, "BERTH_API", st.compute)
	g := func(path []string, args ...string) { t.Helper(); goldenFormats(t, path, args, nil, nil) }
	run := func(args ...string) func() { return func() { mustBerth(t, args...) } }
	wait := []string{"--wait", "--interval", "100ms"}

	g([]string{"version"})

	// Flavors and images.
	g([]string{"flavor", "show"}, "m1.small")
	// The image API checks tokens even beside a noauth compute API: log
	// in to the stack's identity for it, as an operator of dev would.
	cleanEnv(t, "OS_AUTH_URL", st.identity, "OS_USERNAME", configs.DevAdminUser, "OS_PASSWORD", configs.DevAdminPassword,
		"OS_PROJECT_NAME", configs.DevAdminProject, "OS_USER_DOMAIN_NAME", "Default", "OS_PROJECT_DOMAIN_NAME", "Default")
	g([]string{"image", "list"})
	g([]string{"image", "show"}, "berth-fake")
	cleanEnv(t, "BERTH_API", st.compute)
	goldenFormats(t, []string{"flavor", "create"}, []string{"gold", "--vcpus", "1", "--ram", "128", "--property", "hw:cpu_policy=shared"},
		nil, run("flavor", "delete", "gold"))

	// Servers, each built on a named host so that the goldens are stable.
	goldenFormats(t, []string{"server-group", "create"}, []string{"spread", "--policy", "anti-affinity"}, nil, run("server-group", "delete", "spread"))
	mustBerth(t, "server-group", "create", "spread", "--policy", "anti-affinity")
	goldenFormats(t, []string{"server", "create"}, append([]string{"--flavor", "m1.tiny", "--name", "gamma", "--host", "compute-3"}, wait...),
		nil, run(append([]string{"server", "delete", "gamma"}, wait...)...))
	mustBerth(t, append([]string{"server", "create", "--flavor", "m1.tiny", "--name", "alpha", "--host", "compute-1", "--hint", "group=spread"}, wait...)...)
	mustBerth(t, append([]string{"server", "create", "--flavor", "m1.small", "--name", "beta", "--host", "compute-2"}, wait...)...)
	g([]string{"server", "list"})
	g([]string{"server", "show"}, "alpha")
	g([]string{"selection", "show"}, "alpha")
	g([]string{"server-group", "list"})
	g([]string{"server-group", "show"}, "spread")

	// The cold moves, one round per format, of a server on compute-1
	// (cell1 holds compute-1 and compute-3, so each move has one host to
	// go to): resize, confirm, migrate back, revert. Each round starts
	// where the last one left the server, so its hosts alternate.
	mustBerth(t, append([]string{"server", "create", "--flavor", "m1.tiny", "--name", "mover", "--host", "compute-1"}, wait...)...)
	flavors := []string{"m1.small", "m1.tiny"}
	for i, f := range output.Formats {
		goldenOf(t, f, []string{"server", "resize"}, append([]string{"mover", "--flavor", flavors[i%2]}, wait...)...)
		goldenOf(t, f, []string{"server", "resize", "confirm"}, append([]string{"mover"}, wait...)...)
		back := map[string]string{"compute-3": "compute-1", "compute-1": "compute-3"}[strings.TrimSpace(mustBerth(t, "server", "show", "mover", "-o", "value", "-c", "host"))]
		goldenOf(t, f, []string{"server", "migrate"}, append([]string{"mover", "--host", back}, wait...)...)
		goldenOf(t, f, []string{"server", "resize", "revert"}, append([]string{"mover"}, wait...)...)
	}
	g([]string{"migration", "list"})
	// Evacuate, one round per format: mover's host forced down, the
	// server rebuilt on cell1's other host, the host back up; the rounds
	// alternate its host, so it ends where it started.
	for _, f := range output.Formats {
		from := strings.TrimSpace(mustBerth(t, "server", "show", "mover", "-o", "value", "-c", "host"))
		mustBerth(t, "service", "force-down", from)
		goldenOf(t, f, []string{"server", "evacuate"}, append([]string{"mover"}, wait...)...)
		mustBerth(t, "service", "force-down", from, "--unset")
	}

	// Shelving, one round per format: shelve --wait (the dev stack's
	// shelved_offload_time is 0: SHELVED_OFFLOADED), then unshelve onto
	// a named host so that the golden's host is stable.
	mustBerth(t, append([]string{"server", "create", "--flavor", "m1.tiny", "--name", "shelver", "--host", "compute-1"}, wait...)...)
	for _, f := range output.Formats {
		goldenOf(t, f, []string{"server", "shelve"}, append([]string{"shelver"}, wait...)...)
		goldenOf(t, f, []string{"server", "unshelve"}, append([]string{"shelver", "--host", "compute-1"}, wait...)...)
	}
	mustBerth(t, append([]string{"server", "delete", "shelver"}, wait...)...) // the host goldens below count without it

	// Aggregates.
	goldenFormats(t, []string{"aggregate", "create"}, []string{"east", "--az", "az-east"}, nil, run("aggregate", "delete", "east"))
	mustBerth(t, "aggregate", "create", "east", "--az", "az-east")
	g([]string{"aggregate", "set"}, "east", "ssd=true")
	goldenFormats(t, []string{"aggregate", "add-host"}, []string{"east", "compute-3"}, nil, run("aggregate", "remove-host", "east", "compute-3"))
	mustBerth(t, "aggregate", "add-host", "east", "compute-3")
	g([]string{"aggregate", "list"})
	g([]string{"aggregate", "show"}, "east")
	g([]string{"aggregate", "sync"})
	goldenFormats(t, []string{"aggregate", "remove-host"}, []string{"east", "compute-3"}, nil, run("aggregate", "add-host", "east", "compute-3"))
	g([]string{"aggregate", "unset"}, "east", "ssd")

	// Hosts, services, hypervisors and cells.
	goldenFormats(t, []string{"service", "disable"}, []string{"compute-3", "--reason", "bad fan"}, nil, run("service", "enable", "compute-3"))
	goldenFormats(t, []string{"service", "enable"}, []string{"compute-3"}, run("service", "disable", "compute-3", "--reason", "bad fan"), nil)
	goldenFormats(t, []string{"service", "force-down"}, []string{"compute-3"}, nil, run("service", "force-down", "compute-3", "--unset"))
	g([]string{"host", "list"})
	g([]string{"service", "list"})
	g([]string{"hypervisor", "list"})
	g([]string{"hypervisor", "show"}, "compute-2")
	g([]string{"cell", "list"})
	g([]string{"cell", "discover-hosts"})
	// A cell cannot be deleted: one per format, each named alike.
	for i, f := range output.Formats {
		goldenOf(t, f, []string{"cell", "create"}, fmt.Sprintf("extra%d", i))
	}

	// Host drains, last: a drain leaves its host disabled. cell1 holds
	// compute-1 and compute-3, so each drain of one has one host to go
	// to. A server waiting for its resize's confirm cannot move: a drain
	// of its host waits for it, so a cancel's output is stable once
	// every other server has moved.
	enableCell1 := func() { mustBerth(t, "service", "enable", "compute-1"); mustBerth(t, "service", "enable", "compute-3") }
	hostOf := func(server string) string {
		return strings.TrimSpace(mustBerth(t, "server", "show", server, "-o", "value", "-c", "host"))
	}
	mustBerth(t, append([]string{"server", "resize", "mover", "--flavor", "m1.small"}, wait...)...)
	busy := hostOf("mover")
	for _, f := range output.Formats {
		enableCell1()
		mustBerth(t, "host", "drain", busy)
		testwait.Poll(t, time.Minute, "every server but mover moved off "+busy, func() (bool, string) {
			out := mustBerth(t, "host", "drain", "status", busy, "-o", "value", "-c", "state", "-c", "reason")
			waiting := strings.Count(out, "waiting waiting: Cannot 'migrate' instance")
			return waiting == 1 && strings.Count(out, "\n") == waiting+strings.Count(out, "moved"), out
		})
		goldenOf(t, f, []string{"host", "drain", "cancel"}, busy)
	}
	g([]string{"host", "drain", "status"}, busy)
	mustBerth(t, append([]string{"server", "resize", "confirm", "mover"}, wait...)...)
	for _, f := range output.Formats {
		enableCell1()
		goldenOf(t, f, []string{"host", "drain"}, append([]string{hostOf("mover"), "--parallel", "2"}, wait...)...)
	}
}
