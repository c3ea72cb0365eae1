package main

import (
	"context"
	"fmt"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servergroups"
	"github.com/spf13/cobra"
)

var serverGroupColumns = []string{"id", "name", "policy", "max_server_per_host", "members", "project_id"}

func serverGroupRow(g servergroups.ServerGroup) []any {
	var maxPerHost any
	if g.Rules != nil && g.Rules.MaxServerPerHost > 0 {
		maxPerHost = g.Rules.MaxServerPerHost
	}
	members := g.Members
	if members == nil {
		members = []string{}
	}
	return []any{g.ID, g.Name, str(g.Policy), maxPerHost, members, g.ProjectID}
}

func (a *apiCmd) serverGroupCmd() *cobra.Command {
	c := a.noun("server-group", "server groups: create, list, show, delete")

	var policy string
	var maxPerHost int
	create := &cobra.Command{Use: "create NAME --policy POLICY [--max-per-host N]", Short: "create a server group", Args: exactArgs("NAME")}
	cp := addPrinter(create, a.s, serverGroupColumns...)
	create.Flags().StringVar(&policy, "policy", "", "affinity, anti-affinity, soft-affinity or soft-anti-affinity (required)")
	create.Flags().IntVar(&maxPerHost, "max-per-host", 0, "anti-affinity rule max_server_per_host (default 1)")
	_ = create.RegisterFlagCompletionFunc("policy", cobra.FixedCompletions(
		[]string{"affinity", "anti-affinity", "soft-affinity", "soft-anti-affinity"}, cobra.ShellCompDirectiveNoFileComp))
	create.RunE = func(cmd *cobra.Command, args []string) error {
		if policy == "" {
			return usageErrorf("--policy is required")
		}
		ctx, cl, err := a.connect(cmd)
		if err != nil {
			return err
		}
		opts := servergroups.CreateOpts{Name: args[0], Policy: policy}
		if maxPerHost > 0 {
			opts.Rules = &servergroups.Rules{MaxServerPerHost: maxPerHost}
		}
		g, err := servergroups.Create(ctx, cl.compute, opts).Extract()
		if err != nil {
			return err
		}
		return cp.record(serverGroupRow(*g)...)
	}

	var all bool
	list := &cobra.Command{Use: "list [--all-projects]", Short: "server groups", Args: exactArgs()}
	lp := addPrinter(list, a.s, serverGroupColumns...)
	list.Flags().BoolVar(&all, "all-projects", false, "every project's groups (admin)")
	list.RunE = func(cmd *cobra.Command, _ []string) error {
		ctx, cl, err := a.connect(cmd)
		if err != nil {
			return err
		}
		gs, err := listServerGroups(ctx, cl.compute, all)
		if err != nil {
			return err
		}
		rows := make([][]any, len(gs))
		for i, g := range gs {
			rows[i] = serverGroupRow(g)
		}
		return lp.list(rows)
	}

	show := &cobra.Command{Use: "show GROUP", Short: "one server group, by name or id", Args: exactArgs("GROUP")}
	sp := addPrinter(show, a.s, serverGroupColumns...)
	show.RunE = func(cmd *cobra.Command, args []string) error {
		ctx, cl, err := a.connect(cmd)
		if err != nil {
			return err
		}
		id, err := findServerGroupID(ctx, cl.compute, args[0])
		if err != nil {
			return err
		}
		g, err := servergroups.Get(ctx, cl.compute, id).Extract()
		if err != nil {
			return err
		}
		return sp.record(serverGroupRow(*g)...)
	}

	del := &cobra.Command{Use: "delete GROUP...", Short: "delete server groups by name or id; every one is tried", Args: minArgs("GROUP")}
	del.RunE = func(cmd *cobra.Command, args []string) error {
		ctx, cl, err := a.connect(cmd)
		if err != nil {
			return err
		}
		return each(a.s, "delete", args, func(arg string) error {
			id, err := findServerGroupID(ctx, cl.compute, arg)
			if err != nil {
				return err
			}
			return servergroups.Delete(ctx, cl.compute, id).ExtractErr()
		})
	}
	c.AddCommand(create, list, show, del)
	return c
}

func listServerGroups(ctx context.Context, sc *gophercloud.ServiceClient, all bool) ([]servergroups.ServerGroup, error) {
	page, err := servergroups.List(sc, servergroups.ListOpts{AllProjects: all}).AllPages(ctx)
	if err != nil {
		return nil, fmt.Errorf("list server groups: %w", err)
	}
	return servergroups.ExtractServerGroups(page)
}

// findServerGroupID is the group with the id arg, else the one of the
// caller's project named arg.
func findServerGroupID(ctx context.Context, sc *gophercloud.ServiceClient, arg string) (string, error) {
	if uuidRE.MatchString(arg) {
		g, err := servergroups.Get(ctx, sc, arg).Extract()
		if err == nil {
			return g.ID, nil
		}
		if !gophercloud.ResponseCodeIs(err, 404) {
			return "", err
		}
	}
	gs, err := listServerGroups(ctx, sc, false)
	if err != nil {
		return "", err
	}
	all := make([]named, len(gs))
	for i, g := range gs {
		all[i] = named{g.ID, g.Name}
	}
	return pick("server group", arg, all)
}
