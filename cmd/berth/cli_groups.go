package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/berth-project/berth/api"
)

// hintFlag collects repeated --hint KEY=VALUE into Nova's scheduler hints:
// group takes one value, same_host and different_host accumulate.
type hintFlag map[string]any

func (h hintFlag) String() string { return fmt.Sprint(map[string]any(h)) }

func (h hintFlag) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || val == "" {
		return fmt.Errorf("want KEY=VALUE, got %q", v)
	}
	switch k {
	case "group":
		h[k] = val
	case "same_host", "different_host":
		list, _ := h[k].([]string)
		h[k] = append(list, val)
	default:
		return fmt.Errorf("unknown hint %q (known: group, same_host, different_host)", k)
	}
	return nil
}

func cliContext() context.Context { return context.Background() }

func cmdServerGroupCLI(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: berth server-group create|list|show|delete ...")
		return 2
	}
	verb, rest := args[0], args[1:]
	fs := flag.NewFlagSet("berth server-group "+verb, flag.ContinueOnError)
	fs.SetOutput(stderr)
	apiURL := apiFlag(fs)
	policy := fs.String("policy", "", "affinity, anti-affinity, soft-affinity or soft-anti-affinity (create)")
	maxPerHost := fs.Int("max-per-host", 0, "anti-affinity rule max_server_per_host (create; default 1)")
	all := fs.Bool("all-projects", false, "list every project's groups (list)")
	pos, err := parseInterspersed(fs, rest)
	if err != nil {
		return 2
	}
	c, ctx := api.NewClient(*apiURL), cliContext()
	fail := func(err error) int {
		fmt.Fprintf(stderr, "berth server-group %s: %v\n", verb, err)
		return 1
	}
	switch verb {
	case "create":
		if len(pos) != 1 || *policy == "" {
			fmt.Fprintln(stderr, "usage: berth server-group create NAME --policy POLICY [--max-per-host N]")
			return 2
		}
		g, err := c.CreateServerGroup(ctx, pos[0], *policy, *maxPerHost)
		if err != nil {
			return fail(err)
		}
		fmt.Fprintf(stdout, "%s %s\n", g.ID, g.Name)
	case "list":
		gs, err := c.ListServerGroups(ctx, *all)
		if err != nil {
			return fail(err)
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tNAME\tPOLICY\tRULES\tMEMBERS")
		for _, g := range gs {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\n", g.ID, g.Name, g.Policy, rules(g.Rules), len(g.Members))
		}
		tw.Flush()
	case "show":
		if len(pos) != 1 {
			fmt.Fprintln(stderr, "usage: berth server-group show ID")
			return 2
		}
		g, err := c.GetServerGroup(ctx, pos[0])
		if err != nil {
			return fail(err)
		}
		fmt.Fprintf(stdout, "id:      %s\nname:    %s\npolicy:  %s\nrules:   %s\nproject: %s\nmembers: %s\n",
			g.ID, g.Name, g.Policy, rules(g.Rules), g.ProjectID, strings.Join(g.Members, " "))
	case "delete":
		if len(pos) < 1 {
			fmt.Fprintln(stderr, "usage: berth server-group delete ID...")
			return 2
		}
		for _, id := range pos {
			if err := c.DeleteServerGroup(ctx, id); err != nil {
				return fail(err)
			}
		}
	default:
		fmt.Fprintf(stderr, "berth server-group: unknown verb %q\n", verb)
		return 2
	}
	return 0
}

func rules(r map[string]int) string {
	var out []string
	for k, v := range r {
		out = append(out, fmt.Sprintf("%s=%d", k, v))
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

func cmdAggregateCLI(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: berth aggregate create|list|show|delete|add-host|remove-host|set|unset|sync ...")
		return 2
	}
	verb, rest := args[0], args[1:]
	fs := flag.NewFlagSet("berth aggregate "+verb, flag.ContinueOnError)
	fs.SetOutput(stderr)
	apiURL := apiFlag(fs)
	az := fs.String("az", "", "availability zone (create)")
	pos, err := parseInterspersed(fs, rest)
	if err != nil {
		return 2
	}
	c, ctx := api.NewClient(*apiURL), cliContext()
	fail := func(err error) int {
		fmt.Fprintf(stderr, "berth aggregate %s: %v\n", verb, err)
		return 1
	}
	need := func(n int, use string) bool {
		if len(pos) < n {
			fmt.Fprintln(stderr, "usage: berth aggregate "+use)
			return false
		}
		return true
	}
	var a *api.AggregateView
	switch verb {
	case "create":
		if !need(1, "create NAME [--az ZONE]") {
			return 2
		}
		a, err = c.CreateAggregate(ctx, pos[0], *az)
	case "list":
		as, err := c.ListAggregates(ctx)
		if err != nil {
			return fail(err)
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tNAME\tZONE\tHOSTS\tMETADATA")
		for _, a := range as {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", a.ID, a.Name, zone(a), strings.Join(a.Hosts, ","), meta(a.Metadata))
		}
		tw.Flush()
		return 0
	case "show":
		if !need(1, "show ID") {
			return 2
		}
		a, err = c.GetAggregate(ctx, pos[0])
	case "delete":
		if !need(1, "delete ID...") {
			return 2
		}
		for _, id := range pos {
			if err := c.DeleteAggregate(ctx, id); err != nil {
				return fail(err)
			}
		}
		return 0
	case "sync":
		res, err := c.SyncAggregates(ctx)
		if err != nil {
			return fail(err)
		}
		fmt.Fprintf(stdout, "hosts: %d, added to placement: %d, missing: %s\n", res.Hosts, res.Added, strings.Join(res.Missing, " "))
		for what, why := range res.Failed {
			fmt.Fprintf(stdout, "failed: %s: %s\n", what, why)
		}
		if len(res.Failed) > 0 {
			return 1
		}
		return 0
	case "add-host", "remove-host":
		if !need(2, verb+" ID HOST") {
			return 2
		}
		if verb == "add-host" {
			a, err = c.AggregateAddHost(ctx, pos[0], pos[1])
		} else {
			a, err = c.AggregateRemoveHost(ctx, pos[0], pos[1])
		}
	case "set", "unset":
		if !need(2, verb+" ID KEY=VALUE... (set) | KEY... (unset)") {
			return 2
		}
		m := map[string]*string{}
		for _, kv := range pos[1:] {
			k, v, ok := strings.Cut(kv, "=")
			switch {
			case verb == "unset":
				m[kv] = nil
			case !ok || k == "":
				fmt.Fprintf(stderr, "berth aggregate set: want KEY=VALUE, got %q\n", kv)
				return 2
			default:
				m[k] = &v
			}
		}
		a, err = c.AggregateSetMetadata(ctx, pos[0], m)
	default:
		fmt.Fprintf(stderr, "berth aggregate: unknown verb %q\n", verb)
		return 2
	}
	if err != nil {
		return fail(err)
	}
	fmt.Fprintf(stdout, "id:       %s\nname:     %s\nzone:     %s\nhosts:    %s\nmetadata: %s\n",
		a.ID, a.Name, zone(*a), strings.Join(a.Hosts, " "), meta(a.Metadata))
	return 0
}

func zone(a api.AggregateView) string {
	if a.AvailabilityZone == nil {
		return ""
	}
	return *a.AvailabilityZone
}

func meta(m map[string]string) string {
	var out []string
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}
