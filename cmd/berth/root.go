package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
)

// streams are a command's standard input, output and error; tests give
// buffers.
type streams struct {
	in       io.Reader
	out, err io.Writer
}

// rootLong is `berth --help`'s text above the command list.
const rootLong = `berth: a cloud scheduling control plane (Nova scheduler, Placement and cells v2 on etcd).

Roles run as 'berth run ROLE --config FILE'; 'berth dev' runs everything
in one process. Every other noun is a client of the compute (Nova v2.1)
API, found and authenticated as the openstack CLI does: --os-cloud or
OS_CLOUD with clouds.yaml, or OS_AUTH_URL, OS_USERNAME, OS_PASSWORD,
OS_PROJECT_NAME...; with none of them, a 'berth dev' on this machine
(http://127.0.0.1:8774, noauth admin). --api or BERTH_API overrides the
compute endpoint.

Flags may be written with one dash or two (-config and --config).

Exit status:
  0  success
  1  the command failed (a refused request, a server that went to ERROR)
  2  usage: unknown command or flag, missing or extra argument
  3  not found: a resource named on the command line does not exist
  4  unavailable: the API could not be reached or answered 5xx; try again
A command over several resources (server delete A B C) tries every one and
exits with the status of its failures: 3 if each was not found, else the
first other failure's.`

// runIO runs the command line args and returns the process's exit status.
func runIO(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	s := &streams{in: stdin, out: stdout, err: stderr}
	root := newRoot(s)
	root.SetArgs(longSingleDash(root, args))
	cmd, err := root.ExecuteC()
	if err == nil {
		return exitOK
	}
	var ee *exitError
	if !errors.As(err, &ee) || ee.err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", cmd.CommandPath(), err)
	}
	code := exitCodeOf(err)
	if code == exitUsage && (ee == nil || ee.err != nil) {
		fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
	}
	return code
}

func newRoot(s *streams) *cobra.Command {
	root := &cobra.Command{
		Use:           "berth",
		Short:         "a cloud scheduling control plane",
		Long:          rootLong,
		Version:       versionLine(),
		SilenceErrors: true,
		SilenceUsage:  true,
		Args:          subcommandArgs,
		RunE:          missingSubcommand,
	}
	root.SetIn(s.in)
	root.SetOut(s.out)
	root.SetErr(s.err)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{msg: err.Error()} })
	root.AddGroup(
		&cobra.Group{ID: "run", Title: "Run Berth:"},
		&cobra.Group{ID: "compute", Title: "Compute API (Nova v2.1, clouds.yaml or OS_* credentials):"},
		&cobra.Group{ID: "berth", Title: "Berth's own API (same credentials):"},
		&cobra.Group{ID: "tools", Title: "Tools:"},
	)
	add := func(group string, cmds ...*cobra.Command) {
		for _, c := range cmds {
			c.GroupID = group
			root.AddCommand(c)
		}
	}
	add("run", newRunCmd(s), newDevCmd(s), newBenchCmd(s))
	a := &apiCmd{s: s, cf: &cloudFlags{}}
	add("compute", a.serverCmd(), a.flavorCmd(), a.imageCmd(), a.serverGroupCmd(), a.aggregateCmd(),
		a.serviceCmd(), a.hypervisorCmd(), a.zoneCmd(), a.migrationCmd())
	add("berth", a.hostCmd(), a.cellCmd(), a.selectionCmd())
	add("tools", newConfigCmd(s), newDebugCmd(s), newIdentityCmd(s), newTLSCmd(s), newEtcdAuthCmd(s), newEtcdCmd(s), newVersionCmd(s))
	root.SetHelpCommandGroupID("tools")
	root.SetCompletionCommandGroupID("tools")
	return root
}

// groupCmd is a noun whose verbs are its subcommands: run alone it shows
// its help on stderr and exits 2; with an unknown verb it says so.
func groupCmd(use, short string) *cobra.Command {
	return &cobra.Command{Use: use, Short: short, Args: subcommandArgs, RunE: missingSubcommand}
}

// subcommandArgs refuses a word that is none of the command's
// subcommands, with cobra's suggestions.
func subcommandArgs(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2
	}
	if sugg := cmd.SuggestionsFor(args[0]); len(sugg) > 0 {
		msg += "; did you mean " + strings.Join(sugg, " or ") + "?"
	}
	return &usageError{msg: msg}
}

func missingSubcommand(cmd *cobra.Command, _ []string) error {
	cmd.SetOut(cmd.ErrOrStderr())
	_ = cmd.Help()
	return &exitError{code: exitUsage}
}

// exactArgs wants exactly the named operands.
func exactArgs(names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		switch {
		case len(args) < len(names):
			return usageErrorf("missing %s", strings.Join(names[len(args):], " "))
		case len(args) > len(names):
			return usageErrorf("unexpected argument %q", args[len(names)])
		}
		return nil
	}
}

// minArgs wants at least one operand, named name.
func minArgs(name string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return usageErrorf("missing %s", name)
		}
		return nil
	}
}

// longSingleDash rewrites -name to --name where name is a long flag of
// the command args run, so the Go-flag spelling Berth has always had
// (`berth dev -hosts 8`, `-config FILE` in systemd units) keeps working
// beside cobra's. Single-letter shorthands (-o json) and anything after
// "--" are left alone, and a command that parses its own flags gets its
// arguments untouched.
func longSingleDash(root *cobra.Command, args []string) []string {
	cmd, _, err := root.Find(args)
	if err != nil || cmd.DisableFlagParsing {
		return args
	}
	known := func(name string) bool {
		return name == "help" || cmd.Flags().Lookup(name) != nil || cmd.InheritedFlags().Lookup(name) != nil
	}
	out := make([]string, 0, len(args))
	for i, a := range args {
		if a == "--" {
			return append(out, args[i:]...)
		}
		if len(a) > 2 && a[0] == '-' && a[1] != '-' {
			if name, _, _ := strings.Cut(a[1:], "="); len(name) > 1 && known(name) {
				a = "-" + a
			}
		}
		out = append(out, a)
	}
	return out
}
