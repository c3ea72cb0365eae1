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

	"github.com/berth-project/berth/bench"
)

// cmdBenchPlacement is `berth bench placement -url URL [flags]`: the
// Placement API measured through HTTP alone (bench.RunPlacement), so
// Berth's and OpenStack's can be compared by one client.
func cmdBenchPlacement(args []string, stdout, stderr io.Writer) int {
	c := bench.DefaultPlacementConfig()
	fs := flag.NewFlagSet("berth bench placement", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c.AddFlags(fs)
	var jsonPath string
	format := "table"
	fs.StringVar(&jsonPath, "json", "", "append the result as one JSON line to this file")
	fs.StringVar(&format, "format", format, "output: table, or json (one line)")
	fs.Usage = func() {}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stdout)
			fmt.Fprintln(stdout, "usage: berth bench placement -url URL [flags]")
			fs.PrintDefaults()
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "berth bench placement: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	if err := c.Validate(); err != nil {
		fmt.Fprintln(stderr, "berth bench placement:", err)
		return exitUsage
	}
	if format != "table" && format != "json" {
		fmt.Fprintf(stderr, "berth bench placement: -format %q: table or json\n", format)
		return exitUsage
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer cancel()
	res, err := bench.RunPlacement(ctx, c, stderr)
	if res != nil {
		res.Command = "berth bench placement " + strings.Join(args, " ")
		if format == "json" {
			_ = res.WriteJSON(stdout)
		} else {
			res.WriteTable(stdout)
		}
		if jsonPath != "" {
			if werr := appendPlacementJSON(jsonPath, res); werr != nil {
				fmt.Fprintln(stderr, "berth bench placement:", werr)
				return 1
			}
		}
	}
	if err != nil {
		fmt.Fprintln(stderr, "berth bench placement:", err)
		if bench.IsUsage(err) {
			return exitUsage
		}
		return 1
	}
	return exitOK
}

func appendPlacementJSON(path string, res *bench.PlacementResult) error {
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
