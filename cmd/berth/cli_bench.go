package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/berth-project/berth/bench"
)

// cmdBench is `berth bench [SCENARIO] [flags]`: the load tool's flags,
// bound to a bench.Config, and its result printed; package bench runs it.
func cmdBench(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == bench.SchedulerProcessCmd {
		return bench.SchedulerProcess(args[1:], stdout, stderr)
	}
	c := bench.DefaultConfig()
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		c.Scenario, args = args[0], args[1:]
	}
	fs := flag.NewFlagSet("berth bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		return 2
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
