package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-project/berth/api"
)

// The Berth-only commands: what Nova's API has no route for (cells as
// Berth runs them, the scheduler's alternates, Placement usage per host,
// re-mirroring aggregates to Placement). They use Berth's /v1 on the
// compute listener, with the same credentials' token.

var hostColumns = []string{"host", "cell", "mapped", "state", "status", "instances", "vcpu", "memory_mb", "disk_gb", "provider"}

func (a *apiCmd) hostCmd() *cobra.Command {
	c := a.noun("host", "compute hosts: usage and capacity from Placement, drain (Berth's API)")
	list := &cobra.Command{Use: "list", Short: "hosts with used/capacity per resource class", Args: exactArgs()}
	p := addPrinter(list, a.s, hostColumns...)
	list.RunE = func(cmd *cobra.Command, _ []string) error {
		ctx, cl, err := a.connect(cmd)
		if err != nil {
			return err
		}
		hosts, err := cl.berth().ListHosts(ctx)
		if err != nil {
			return err
		}
		use := func(h api.HostView, rc string) any {
			r, ok := h.Resources[rc]
			if !ok {
				return nil
			}
			return fmt.Sprintf("%d/%d", r.Used, r.Capacity)
		}
		rows := make([][]any, len(hosts))
		for i, h := range hosts {
			rows[i] = []any{h.Host, h.Cell, h.Mapped, h.State, h.Status, h.Instances,
				use(h, "VCPU"), use(h, "MEMORY_MB"), use(h, "DISK_GB"), h.Provider}
		}
		return p.list(rows)
	}
	c.AddCommand(list, a.hostDrainCmd())
	return c
}

var cellColumns = []string{"name", "uuid", "hosts", "disabled"}

func (a *apiCmd) cellCmd() *cobra.Command {
	c := a.noun("cell", "cells: list, create, discover-hosts (Berth's API)")
	list := &cobra.Command{Use: "list", Short: "cells", Args: exactArgs()}
	lp := addPrinter(list, a.s, cellColumns...)
	list.RunE = func(cmd *cobra.Command, _ []string) error {
		ctx, cl, err := a.connect(cmd)
		if err != nil {
			return err
		}
		cells, err := cl.berth().ListCells(ctx)
		if err != nil {
			return err
		}
		rows := make([][]any, len(cells))
		for i, x := range cells {
			rows[i] = []any{x.Name, x.UUID, x.Hosts, x.Disabled}
		}
		return lp.list(rows)
	}
	create := &cobra.Command{Use: "create NAME", Short: "create a cell (nova-manage cell_v2 create_cell)", Args: exactArgs("NAME")}
	cp := addPrinter(create, a.s, cellColumns...)
	create.RunE = func(cmd *cobra.Command, args []string) error {
		ctx, cl, err := a.connect(cmd)
		if err != nil {
			return err
		}
		x, err := cl.berth().CreateCell(ctx, args[0])
		if err != nil {
			return err
		}
		return cp.record(x.Name, x.UUID, x.Hosts, x.Disabled)
	}
	discover := &cobra.Command{Use: "discover-hosts", Short: "map hosts to their cells (nova-manage cell_v2 discover_hosts)", Args: exactArgs()}
	dp := addPrinter(discover, a.s, "host", "cell", "mapped", "reason")
	discover.RunE = func(cmd *cobra.Command, _ []string) error {
		ctx, cl, err := a.connect(cmd)
		if err != nil {
			return err
		}
		mapped, unmapped, err := cl.berth().DiscoverHosts(ctx)
		if err != nil {
			return err
		}
		if dp.format == "table" && len(dp.columns) == 0 {
			for _, h := range mapped {
				fmt.Fprintf(a.s.out, "mapped %s to %s\n", h.Host, h.Cell)
			}
			for _, h := range unmapped {
				fmt.Fprintf(a.s.out, "left %s unmapped: %s\n", h.Host, h.Reason)
			}
			if len(mapped)+len(unmapped) == 0 {
				fmt.Fprintln(a.s.out, "every host is mapped")
			}
			return nil
		}
		var rows [][]any
		for _, h := range mapped {
			rows = append(rows, []any{h.Host, h.Cell, true, nil})
		}
		for _, h := range unmapped {
			rows = append(rows, []any{h.Host, h.Cell, false, h.Reason})
		}
		return dp.list(rows)
	}
	c.AddCommand(list, create, discover)
	return c
}

// selectionColumns are selection show's: one row for the server as it
// is, one per attempt made, one per alternate left, so that every format
// (a table, json's objects, value's lines) carries the same rows.
var selectionColumns = []string{"instance", "status", "kind", "n", "host", "node", "cell", "at", "reason"}

// Kinds of selection show's rows.
const (
	selectionServer    = "server"    // n: attempts made; reason: what is kept
	selectionAttempt   = "attempt"   // n: which; at and reason: how it ended
	selectionAlternate = "alternate" // n: its place in the list
)

func (a *apiCmd) selectionCmd() *cobra.Command {
	c := a.noun("selection", "a build's alternates left and attempts made (Berth's API)")
	show := &cobra.Command{Use: "show SERVER", Short: "the alternates left and the attempts made for a server, by name or id",
		Long: "The alternates left and the attempts made for a server, by name or id: one row\n" +
			"for the server (kind server: n is the attempts made, reason says whether\n" +
			"alternates are kept and how many attempts are allowed), one per attempt made\n" +
			"(kind attempt: when and why it ended), one per alternate host left (kind\n" +
			"alternate, in the order a retry takes them).",
		Args: exactArgs("SERVER")}
	p := addPrinter(show, a.s, selectionColumns...)
	show.RunE = func(cmd *cobra.Command, args []string) error {
		ctx, cl, err := a.connect(cmd)
		if err != nil {
			return err
		}
		id := args[0]
		if !uuidRE.MatchString(id) {
			s, err := findServer(ctx, cl.compute, id)
			if err != nil {
				return err
			}
			id = s.ID
		}
		sel, err := cl.berth().GetSelection(ctx, id)
		if err != nil {
			return err
		}
		return p.list(selectionRows(sel))
	}
	c.AddCommand(show)
	return c
}

// orNil is nil for "", which every format shows as nothing (json null),
// as it shows the columns a row's kind has no value for.
func orNil(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// selectionRows are sel's rows in selectionColumns' order.
func selectionRows(sel *api.SelectionView) [][]any {
	note := "no alternates kept (the server is ACTIVE, deleted, or was never scheduled)"
	if sel.Kept {
		note = fmt.Sprintf("alternates kept; at most %d attempts", sel.MaxAttempts)
	}
	rows := [][]any{{sel.Instance, sel.Status, selectionServer, sel.AttemptsMade, orNil(sel.Host), nil, orNil(sel.Cell), nil, note}}
	for i, at := range sel.Attempts {
		rows = append(rows, []any{sel.Instance, sel.Status, selectionAttempt, i + 1, at.Host, nil, nil, at.At.Format(time.RFC3339), at.Reason})
	}
	for i, al := range sel.Alternates {
		rows = append(rows, []any{sel.Instance, sel.Status, selectionAlternate, i + 1, al.Host, al.Node, al.Cell, nil, nil})
	}
	return rows
}

func (a *apiCmd) aggregateSync() *cobra.Command {
	c := &cobra.Command{Use: "sync", Short: "mirror every aggregate's hosts to Placement again (Berth's API)", Args: exactArgs()}
	p := addPrinter(c, a.s, "hosts", "added", "missing", "failed")
	c.RunE = func(cmd *cobra.Command, _ []string) error {
		ctx, cl, err := a.connect(cmd)
		if err != nil {
			return err
		}
		res, err := cl.berth().SyncAggregates(ctx)
		if err != nil {
			return err
		}
		if err := p.record(res.Hosts, res.Added, res.Missing, res.Failed); err != nil {
			return err
		}
		if len(res.Failed) > 0 {
			return &exitError{code: exitFailure, err: fmt.Errorf("%d mirror(s) failed", len(res.Failed))}
		}
		return nil
	}
	return c
}
