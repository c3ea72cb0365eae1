package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/berth-project/berth/api"
)

// opsVerbs lists each operator noun's verbs and their usage lines.
var opsVerbs = map[string]map[string]string{
	"service": {
		"list":       "berth service list",
		"disable":    "berth service disable HOST [--reason TEXT]",
		"enable":     "berth service enable HOST",
		"force-down": "berth service force-down HOST [--unset]",
	},
	"host":      {"list": "berth host list"},
	"cell":      {"list": "berth cell list", "create": "berth cell create NAME", "discover-hosts": "berth cell discover-hosts"},
	"selection": {"show": "berth selection show INSTANCE"},
}

func opsUsage(noun string) string {
	var lines []string
	for _, u := range opsVerbs[noun] {
		lines = append(lines, "  "+u)
	}
	sort.Strings(lines)
	return "usage:\n" + strings.Join(lines, "\n") + "\n"
}

// cmdOps runs `berth service|host|cell|selection VERB ...`, the operator's
// CLI over the compute API.
func cmdOps(noun string, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || opsVerbs[noun][args[0]] == "" {
		if len(args) > 0 && args[0] != "-h" && args[0] != "--help" && args[0] != "help" {
			fmt.Fprintf(stderr, "berth %s: unknown verb %q\n", noun, args[0])
		}
		fmt.Fprint(stderr, opsUsage(noun))
		return 2
	}
	verb, rest := args[0], args[1:]
	fs := flag.NewFlagSet("berth "+noun+" "+verb, flag.ContinueOnError)
	fs.SetOutput(stderr)
	apiURL := apiFlag(fs)
	var reason *string
	var unset *bool
	switch noun + " " + verb {
	case "service disable":
		reason = fs.String("reason", "", "why the host is disabled (shown in service list, at most 255 characters)")
	case "service force-down":
		unset = fs.Bool("unset", false, "clear forced_down instead of setting it")
	}
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: %s\n", opsVerbs[noun][verb])
		fs.PrintDefaults()
	}
	pos, err := parseInterspersed(fs, rest)
	if err != nil {
		return 2
	}
	// Verbs whose usage names an operand take exactly one.
	line := opsVerbs[noun][verb]
	needsOne := strings.Contains(line, "HOST") || strings.Contains(line, "NAME") || strings.Contains(line, "INSTANCE")
	if (needsOne && len(pos) != 1) || (!needsOne && len(pos) != 0) {
		fmt.Fprintf(stderr, "usage: %s\n", line)
		return 2
	}
	c := api.NewClient(*apiURL)
	// Disabling waits for the agent's trait (bounded by the API); allow it.
	c.HTTP.Timeout = time.Minute
	ctx := context.Background()
	fail := func(err error) int {
		fmt.Fprintf(stderr, "berth %s %s: %v\n", noun, verb, err)
		return 1
	}
	switch noun + " " + verb {
	case "service list":
		svcs, err := c.ListServices(ctx)
		if err != nil {
			return fail(err)
		}
		printServices(stdout, svcs)
	case "service disable", "service enable":
		status := verb + "d" // "enabled" or "disabled"
		u := api.ServiceUpdate{Status: &status}
		if reason != nil && *reason != "" { // only disable has --reason
			u.DisabledReason = reason
		}
		v, err := c.UpdateService(ctx, pos[0], u)
		if err != nil {
			return fail(err)
		}
		printServices(stdout, []api.ServiceView{*v})
		if v.Warning != "" {
			fmt.Fprintln(stderr, "warning:", v.Warning)
		}
	case "service force-down":
		down := !*unset
		v, err := c.UpdateService(ctx, pos[0], api.ServiceUpdate{ForcedDown: &down})
		if err != nil {
			return fail(err)
		}
		printServices(stdout, []api.ServiceView{*v})
	case "host list":
		hosts, err := c.ListHosts(ctx)
		if err != nil {
			return fail(err)
		}
		printHosts(stdout, hosts)
	case "cell list":
		cells, err := c.ListCells(ctx)
		if err != nil {
			return fail(err)
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tUUID\tHOSTS\tDISABLED")
		for _, cl := range cells {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%v\n", cl.Name, cl.UUID, cl.Hosts, cl.Disabled)
		}
		tw.Flush()
	case "cell create":
		cl, err := c.CreateCell(ctx, pos[0])
		if err != nil {
			return fail(err)
		}
		fmt.Fprintf(stdout, "cell %s created (%s)\n", cl.Name, cl.UUID)
	case "cell discover-hosts":
		mapped, unmapped, err := c.DiscoverHosts(ctx)
		if err != nil {
			return fail(err)
		}
		for _, h := range mapped {
			fmt.Fprintf(stdout, "mapped %s to %s\n", h.Host, h.Cell)
		}
		for _, h := range unmapped {
			fmt.Fprintf(stdout, "left %s unmapped: %s\n", h.Host, h.Reason)
		}
		if len(mapped)+len(unmapped) == 0 {
			fmt.Fprintln(stdout, "every host is mapped")
		}
	case "selection show":
		sel, err := c.GetSelection(ctx, pos[0])
		if err != nil {
			return fail(err)
		}
		printSelection(stdout, sel)
	}
	return 0
}

func printServices(w io.Writer, svcs []api.ServiceView) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "HOST\tCELL\tSTATE\tSTATUS\tFORCED_DOWN\tFAILED_BUILDS\tDISABLED_REASON")
	for _, s := range svcs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%v\t%d\t%s\n", s.Host, dash(s.Cell), s.State, s.Status, s.ForcedDown,
			s.FailedBuilds, dash(s.DisabledReason))
	}
	tw.Flush()
}

func printHosts(w io.Writer, hosts []api.HostView) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "HOST\tCELL\tSTATE\tSTATUS\tINSTANCES\tVCPU\tMEMORY_MB\tDISK_GB\tPROVIDER")
	use := func(h api.HostView, rc string) string {
		r, ok := h.Resources[rc]
		if !ok {
			return "-"
		}
		return fmt.Sprintf("%d/%d", r.Used, r.Capacity)
	}
	for _, h := range hosts {
		cell := h.Cell
		if !h.Mapped {
			cell += " (unmapped)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", h.Host, cell, h.State, h.Status, h.Instances,
			use(h, "VCPU"), use(h, "MEMORY_MB"), use(h, "DISK_GB"), dash(h.Provider))
	}
	tw.Flush()
}

func printSelection(w io.Writer, s *api.SelectionView) {
	fmt.Fprintf(w, "instance %s: %s on %s (cell %s), %d attempt(s) made\n", s.Instance, s.Status, dash(s.Host),
		dash(s.Cell), s.AttemptsMade)
	if len(s.Attempts) > 0 {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ATTEMPT\tHOST\tAT\tREASON")
		for i, a := range s.Attempts {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", i+1, a.Host, a.At.Format(time.RFC3339), dash(a.Reason))
		}
		tw.Flush()
	}
	if !s.Kept {
		fmt.Fprintln(w, "no alternates kept (the instance is ACTIVE, deleted, or was never scheduled)")
		return
	}
	fmt.Fprintf(w, "max attempts %d\n", s.MaxAttempts)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ALTERNATE\tHOST\tNODE\tCELL")
	for i, a := range s.Alternates {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", i+1, a.Host, a.Node, a.Cell)
	}
	if len(s.Alternates) == 0 {
		fmt.Fprintln(tw, "-\tnone left\t\t")
	}
	tw.Flush()
}
