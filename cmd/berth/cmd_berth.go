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

var selectionFields = []string{"instance", "status", "host", "cell", "attempts_made", "attempts", "kept", "max_attempts", "alternates"}

func (a *apiCmd) selectionCmd() *cobra.Command {
	c := a.noun("selection", "a build's alternates left and attempts made (Berth's API)")
	show := &cobra.Command{Use: "show SERVER", Short: "the alternates left and the attempts made for a server, by name or id", Args: exactArgs("SERVER")}
	p := addPrinter(show, a.s, selectionFields...)
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
		if p.format == "table" && len(p.columns) == 0 {
			printSelection(a.s, sel)
			return nil
		}
		attempts := make([]string, len(sel.Attempts))
		for i, at := range sel.Attempts {
			attempts[i] = fmt.Sprintf("%s at %s: %s", at.Host, at.At.Format(time.RFC3339), at.Reason)
		}
		alts := make([]string, len(sel.Alternates))
		for i, al := range sel.Alternates {
			alts[i] = al.Host + "/" + al.Cell
		}
		return p.record(sel.Instance, sel.Status, sel.Host, sel.Cell, sel.AttemptsMade, attempts, sel.Kept, sel.MaxAttempts, alts)
	}
	c.AddCommand(show)
	return c
}

func printSelection(s *streams, sel *api.SelectionView) {
	w := s.out
	dash := func(v string) string {
		if v == "" {
			return "-"
		}
		return v
	}
	fmt.Fprintf(w, "instance %s: %s on %s (cell %s), %d attempt(s) made\n", sel.Instance, sel.Status, dash(sel.Host),
		dash(sel.Cell), sel.AttemptsMade)
	o := printer{s: s, format: "table", known: []string{"attempt", "host", "at", "reason"}}
	if len(sel.Attempts) > 0 {
		rows := make([][]any, len(sel.Attempts))
		for i, at := range sel.Attempts {
			rows[i] = []any{i + 1, at.Host, at.At.Format(time.RFC3339), at.Reason}
		}
		_ = o.list(rows)
	}
	if !sel.Kept {
		fmt.Fprintln(w, "no alternates kept (the instance is ACTIVE, deleted, or was never scheduled)")
		return
	}
	fmt.Fprintf(w, "max attempts %d\n", sel.MaxAttempts)
	o.known = []string{"alternate", "host", "node", "cell"}
	rows := make([][]any, len(sel.Alternates))
	for i, al := range sel.Alternates {
		rows[i] = []any{i + 1, al.Host, al.Node, al.Cell}
	}
	if len(rows) == 0 {
		rows = [][]any{{nil, "none left", nil, nil}}
	}
	_ = o.list(rows)
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
