package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/berth-project/berth/bench"
)

// newBenchCmd is `berth bench`, whose flags package bench defines on a Go
// FlagSet (bench.Config.AddFlags) and cmdBench parses: cobra passes the
// arguments through untouched.
func newBenchCmd(s *streams) *cobra.Command {
	return &cobra.Command{
		Use:                "bench [SCENARIO] [flags]",
		Short:              "load tool: populate, boot, churn, failover, coldstart, drain against simulated hosts (-h for flags)",
		DisableFlagParsing: true,
		RunE:               func(_ *cobra.Command, args []string) error { return codeErr(cmdBench(args, s.out, s.err)) },
	}
}

// cmdBench is `berth bench [SCENARIO] [flags]`: the load tool's flags,
// bound to a bench.Config, and its result printed; package bench runs it.
func cmdBench(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == bench.SchedulerProcessCmd {
		// The tool's scheduler child: a scheduler of `berth run
		// server` in all but its config plumbing, with the default
		// policy.
		defer benchGC("", stderr)()
		return bench.SchedulerProcess(args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == bench.FleetProcessCmd {
		// The tool's fleet child: Berth's default policy too (GC percent
		// 400, bounded), not Go's 100; its heap is the hosts' agents
		// and their etcd client, and at 100 it collected every few
		// hundred milliseconds of a 100,000-host fleet's beats and syncs.
		defer benchGC("", stderr)()
		return bench.FleetProcess(args[1:], os.Stdin, stdout, stderr)
	}
	if len(args) > 0 && args[0] == "placement" {
		return cmdBenchPlacement(args[1:], stdout, stderr)
	}
	c := bench.DefaultConfig()
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		c.Scenario, args = args[0], args[1:]
	}
	fs := flag.NewFlagSet("berth bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c.AddFlags(fs)
	fs.Usage = func() {} // -h is answered below, on stdout; errors say what is wrong
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			// Help asked for is an answer, on stdout.
			fs.SetOutput(stdout)
			fmt.Fprintln(stdout, "usage: berth bench [SCENARIO] [flags]")
			fs.PrintDefaults()
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "berth bench: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if err := c.Validate(); err != nil {
		fmt.Fprintln(stderr, "berth bench:", err)
		return 2
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer cancel()
	defer benchGC(c.ConfigPath, stderr)()
	res, err := bench.Main(ctx, c, stderr)
	if bench.IsUsage(err) {
		fmt.Fprintln(stderr, "berth bench:", err)
		return 2
	}
	if res != nil {
		res.Command = "berth bench " + strings.Join(append([]string{c.Scenario}, args...), " ")
		if c.Format == bench.FormatJSON {
			_ = res.WriteJSON(stdout)
		} else {
			res.WriteTable(stdout)
		}
		if c.JSONPath != "" {
			if err := appendJSON(c.JSONPath, res); err != nil {
				fmt.Fprintln(stderr, "berth bench:", err)
				return 1
			}
		}
	}
	if err != nil {
		fmt.Fprintln(stderr, "berth bench:", err)
		return 1
	}
	return 0
}

// appendJSON appends res as one JSON line to the file at path.
func appendJSON(path string, res *bench.Result) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if err := res.WriteJSON(f); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}
