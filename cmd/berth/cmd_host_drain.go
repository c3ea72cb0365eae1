package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-project/berth/api"
	"github.com/berth-project/berth/internal/backoff"
)

// `berth host drain HOST` and its status and cancel: Berth's /v1
// /hosts/{host}/drain. Each prints the drain's servers, one row each;
// the drain's own state goes to stderr as a summary line, and --wait's
// exit status says whether it completed.

var drainColumns = []string{"server", "state", "migration", "dest_host", "reason"}

func drainRows(d *api.DrainView) [][]any {
	rows := make([][]any, len(d.Instances))
	for i, s := range d.Instances {
		rows[i] = []any{s.UUID, s.State, s.MigrationUUID, s.DestHost, s.Reason}
	}
	return rows
}

// drainSummary is the drain's state and counts in one line.
func drainSummary(d *api.DrainView) string {
	states := make([]string, 0, len(d.Counts))
	for st := range d.Counts {
		states = append(states, st)
	}
	sort.Strings(states)
	parts := make([]string, len(states))
	for i, st := range states {
		parts[i] = fmt.Sprintf("%s=%d", st, d.Counts[st])
	}
	line := fmt.Sprintf("drain of %s: %s (%s)", d.Host, d.State, strings.Join(parts, " "))
	if d.Error != "" {
		line += ": " + d.Error
	}
	return line
}

// drainSettled says a drain ended and follows no move any more.
func drainSettled(d *api.DrainView) bool {
	return d.State != "draining" && d.Counts["moving"] == 0
}

func (a *apiCmd) hostDrainCmd() *cobra.Command {
	var req api.DrainRequest
	var deadline time.Duration
	var w waitFlags
	c := &cobra.Command{
		Use:   "drain HOST [--live] [--deadline D] [--parallel N] [--wait]",
		Short: "disable HOST and move every server off it (admin); status and cancel",
		Long: "Drain HOST: disable it (disabled_reason \"draining\"), then the scheduler leader\n" +
			"moves every server off it, --parallel at a time: cold migrations it confirms\n" +
			"itself, or live migrations with --live. The drain is the cloud's, not this\n" +
			"command's: it goes on if the command ends, and survives a change of leader.\n" +
			"Past --deadline no new move starts and the drain ends incomplete; servers that\n" +
			"cannot move are reported with their migration's reason. The host stays\n" +
			"disabled (`berth service enable HOST` when done).\n\n" +
			"Prints the drain's servers; its state and counts go to stderr. With --wait,\n" +
			"a progress line (counts by state) until the drain ends; exits 1 unless it\n" +
			"completed.",
		Args: exactArgs("HOST"),
	}
	p := addPrinter(c, a.s, drainColumns...)
	c.Flags().BoolVar(&req.Live, "live", false, "move with live migrations (the servers keep running)")
	c.Flags().DurationVar(&deadline, "deadline", 0, "stop starting moves after this long and end incomplete (default: none)")
	c.Flags().IntVar(&req.Parallel, "parallel", 0, "moves at once (default 4)")
	w.add(c, "wait until the drain ends, showing its progress")
	c.Flags().Lookup("interval").Usage = "how often --wait reads the drain (one GET)"
	c.RunE = func(cmd *cobra.Command, args []string) error {
		if deadline < 0 {
			return usageErrorf("--deadline must not be negative")
		}
		if deadline > 0 {
			req.Deadline = deadline.String()
		}
		ctx, cl, err := a.connect(cmd)
		if err != nil {
			return err
		}
		d, err := cl.berth().StartDrain(ctx, args[0], req)
		if err != nil {
			return err
		}
		if d.Warning != "" {
			fmt.Fprintln(a.s.err, "warning:", d.Warning)
		}
		var werr error
		if w.wait {
			d, werr = waitDrained(ctx, a.s, cl.berth(), args[0], w)
		}
		if d != nil {
			fmt.Fprintln(a.s.err, drainSummary(d))
			if err := p.list(drainRows(d)); err != nil {
				return err
			}
		}
		return werr
	}
	c.AddCommand(a.hostDrainVerb("status HOST", "a host's drain: its servers' progress, its state on stderr",
		func(ctx context.Context, cl *api.Client, host string) (*api.DrainView, error) {
			return cl.ShowDrain(ctx, host)
		}),
		a.hostDrainVerb("cancel HOST", "stop a host's drain from starting moves; moves in flight finish, the host stays disabled",
			func(ctx context.Context, cl *api.Client, host string) (*api.DrainView, error) {
				return cl.CancelDrain(ctx, host)
			}))
	return c
}

// hostDrainVerb is `host drain status` or `host drain cancel`: one call
// on HOST's drain, its servers printed.
func (a *apiCmd) hostDrainVerb(use, short string, call func(ctx context.Context, cl *api.Client, host string) (*api.DrainView, error)) *cobra.Command {
	c := &cobra.Command{Use: use, Short: short, Args: exactArgs("HOST")}
	p := addPrinter(c, a.s, drainColumns...)
	c.RunE = func(cmd *cobra.Command, args []string) error {
		ctx, cl, err := a.connect(cmd)
		if err != nil {
			return err
		}
		d, err := call(ctx, cl.berth(), args[0])
		if err != nil {
			return err
		}
		fmt.Fprintln(a.s.err, drainSummary(d))
		return p.list(drainRows(d))
	}
	return c
}

// waitDrained reads host's drain once per interval, showing its counts,
// until it has ended and followed its last move. It ends with exit 1
// when the drain did not complete, and on the timeout (the drain goes
// on: the cloud works it, not this command).
func waitDrained(ctx context.Context, s *streams, cl *api.Client, host string, w waitFlags) (*api.DrainView, error) {
	pr := newProgress(s)
	defer pr.done()
	start := time.Now()
	deadline := start.Add(w.timeout)
	for {
		d, err := cl.ShowDrain(ctx, host)
		if err != nil {
			return nil, err
		}
		pr.show(d.Counts, time.Since(start))
		if drainSettled(d) {
			pr.done()
			if d.State != "complete" {
				return d, &exitError{code: exitFailure, err: fmt.Errorf("the drain of %s ended %s", host, d.State)}
			}
			return d, nil
		}
		if time.Now().After(deadline) {
			pr.done()
			return d, &exitError{code: exitFailure, err: fmt.Errorf("timed out after %s; the drain of %s goes on (berth host drain status %s)",
				w.timeout, host, host)}
		}
		if !backoff.Sleep(ctx, w.interval) {
			return d, ctx.Err()
		}
	}
}
