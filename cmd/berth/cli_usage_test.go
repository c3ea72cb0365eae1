package main

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestExitCodes: usage mistakes are 2 with the reason, help is 0 on
// stdout, an unreachable API is 4.
func TestExitCodes(t *testing.T) {
	cleanEnv(t)
	for _, tc := range []struct {
		desc      string
		args      []string
		code      int
		out, errs string
	}{
		{"no command", nil, exitUsage, "", "Usage:"},
		{"help", []string{"--help"}, exitOK, "Exit status:", ""},
		{"help command", []string{"help", "server", "create"}, exitOK, "--hint", ""},
		{"a verb's help", []string{"server", "list", "-h"}, exitOK, "--all-projects", ""},
		{"single-dash long help", []string{"aggregate", "-help"}, exitOK, "add-host", ""},
		{"unknown command", []string{"nope"}, exitUsage, "", `unknown command "nope" for "berth"`},
		{"a suggestion", []string{"sever"}, exitUsage, "", "did you mean server?"},
		{"unknown verb", []string{"aggregate", "frobnicate"}, exitUsage, "", `unknown command "frobnicate" for "berth aggregate"`},
		{"noun alone", []string{"service"}, exitUsage, "", "Available Commands:"},
		{"unknown flag", []string{"server", "list", "--bogus"}, exitUsage, "", "unknown flag: --bogus"},
		{"a flag of another verb", []string{"service", "enable", "h1", "--reason", "x"}, exitUsage, "", "unknown flag: --reason"},
		{"missing operand", []string{"server", "show"}, exitUsage, "", "missing SERVER"},
		{"extra operand", []string{"service", "enable", "a", "b"}, exitUsage, "", `unexpected argument "b"`},
		{"flag without value", []string{"service", "disable", "h1", "--reason"}, exitUsage, "", "flag needs an argument"},
		{"bad format", []string{"server", "list", "-o", "xml"}, exitUsage, "", `unknown output format "xml"`},
		{"bad column", []string{"flavor", "list", "-c", "nope"}, exitUsage, "", `no column "nope" (columns: id, name,`},
		{"create without flavor", []string{"server", "create"}, exitUsage, "", "--flavor is required"},
		{"bad hint", []string{"server", "create", "--flavor", "x", "--hint", "colour=red"}, exitUsage, "", `unknown hint "colour"`},
		{"role without config", []string{"run", "server"}, exitUsage, "", "--config FILE is required"},
		{"role with a missing config", []string{"run", "agent", "-config", "/nonexistent.hcl"}, exitUsage, "", "/nonexistent.hcl"},
		{"unreachable API", []string{"server", "list", "--api", "http://127.0.0.1:1"}, exitUnavailable, "", "connection refused"},
		{"version", []string{"version"}, exitOK, "go_version     go1.", ""},
		{"version as json", []string{"version", "-o", "json", "-c", "go_version"}, exitOK, "{\n  \"go_version\": \"go1.", ""},
		{"completion", []string{"completion", "bash"}, exitOK, "bash completion", ""},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			code, out, errs := berth(tc.args...)
			if code != tc.code || !strings.Contains(out, tc.out) || !strings.Contains(errs, tc.errs) {
				t.Errorf("berth %s: exit %d\nstdout:\n%s\nstderr:\n%s\nwant exit %d, stdout with %q, stderr with %q",
					strings.Join(tc.args, " "), code, out, errs, tc.code, tc.out, tc.errs)
			}
		})
	}
}

// TestHelpGolden keeps every command's help in testdata/help: a change of
// grammar, flags or wording shows in review (go test -update rewrites).
func TestHelpGolden(t *testing.T) {
	cleanEnv(t)
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Hidden || c.Name() == "__complete" || c.Name() == "__completeNoDesc" {
			return
		}
		path := strings.Fields(c.CommandPath())[1:]
		code, out, errs := berth(append(path, "--help")...)
		if code != 0 || errs != "" {
			t.Errorf("berth %s --help: exit %d, stderr %q", strings.Join(path, " "), code, errs)
		}
		name := strings.Join(append([]string{"berth"}, path...), "_")
		golden(t, "help/"+name+".golden", out)
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	root := newRoot(&streams{in: strings.NewReader(""), out: &strings.Builder{}, err: &strings.Builder{}})
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	walk(root)
}

// TestLongSingleDash: Go's -name spelling of long flags is rewritten for
// the command's own flags only.
func TestLongSingleDash(t *testing.T) {
	root := newRoot(&streams{in: strings.NewReader(""), out: &strings.Builder{}, err: &strings.Builder{}})
	for _, tc := range []struct{ in, want string }{
		{"run server -config f.hcl", "run server --config f.hcl"},
		{"dev -hosts 8 -data-dir=/x", "dev --hosts 8 --data-dir=/x"},
		{"server list -o json -c id", "server list -o json -c id"},
		{"server list -api http://x", "server list --api http://x"},
		{"server delete -x -- -hosts", "server delete -x -- -hosts"},
		{"bench boot -hosts 8", "bench boot -hosts 8"},
	} {
		if got := strings.Join(longSingleDash(root, strings.Fields(tc.in)), " "); got != tc.want {
			t.Errorf("%q → %q, want %q", tc.in, got, tc.want)
		}
	}
}
