package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/aggregates"
	"github.com/spf13/cobra"
)

var aggregateColumns = []string{"id", "name", "zone", "hosts", "metadata", "uuid"}

func aggregateRow(ag aggregates.Aggregate) []any {
	hosts := ag.Hosts
	if hosts == nil {
		hosts = []string{}
	}
	return []any{ag.ID, ag.Name, ag.AvailabilityZone, hosts, ag.Metadata, ag.UUID}
}

func (a *apiCmd) aggregateCmd() *cobra.Command {
	c := a.noun("aggregate", "host aggregates (admin)")

	list := &cobra.Command{Use: "list", Short: "host aggregates", Args: exactArgs()}
	lp := addPrinter(list, a.s, aggregateColumns...)
	list.RunE = func(cmd *cobra.Command, _ []string) error {
		ctx, cl, err := a.connect(cmd)
		if err != nil {
			return err
		}
		ags, err := listAggregates(ctx, cl.compute)
		if err != nil {
			return err
		}
		rows := make([][]any, len(ags))
		for i, ag := range ags {
			rows[i] = aggregateRow(ag)
		}
		return lp.list(rows)
	}

	// one is a verb on one aggregate named by name or id, whose answer
	// is the aggregate.
	one := func(use, short string, args cobra.PositionalArgs, do func(ctx context.Context, sc *gophercloud.ServiceClient, id int, rest []string) (*aggregates.Aggregate, error)) *cobra.Command {
		v := &cobra.Command{Use: use, Short: short, Args: args}
		p := addPrinter(v, a.s, aggregateColumns...)
		v.RunE = func(cmd *cobra.Command, args []string) error {
			ctx, cl, err := a.connect(cmd)
			if err != nil {
				return err
			}
			id, err := findAggregateID(ctx, cl.compute, args[0])
			if err != nil {
				return err
			}
			ag, err := do(ctx, cl.compute, id, args[1:])
			if err != nil {
				return err
			}
			return p.record(aggregateRow(*ag)...)
		}
		return v
	}
	show := one("show AGGREGATE", "one aggregate, by name or id", exactArgs("AGGREGATE"),
		func(ctx context.Context, sc *gophercloud.ServiceClient, id int, _ []string) (*aggregates.Aggregate, error) {
			return aggregates.Get(ctx, sc, id).Extract()
		})
	addHost := one("add-host AGGREGATE HOST", "add a compute host to an aggregate", exactArgs("AGGREGATE", "HOST"),
		func(ctx context.Context, sc *gophercloud.ServiceClient, id int, rest []string) (*aggregates.Aggregate, error) {
			return aggregates.AddHost(ctx, sc, id, aggregates.AddHostOpts{Host: rest[0]}).Extract()
		})
	removeHost := one("remove-host AGGREGATE HOST", "remove a compute host from an aggregate", exactArgs("AGGREGATE", "HOST"),
		func(ctx context.Context, sc *gophercloud.ServiceClient, id int, rest []string) (*aggregates.Aggregate, error) {
			return aggregates.RemoveHost(ctx, sc, id, aggregates.RemoveHostOpts{Host: rest[0]}).Extract()
		})
	setMeta := func(ctx context.Context, sc *gophercloud.ServiceClient, id int, m map[string]any) (*aggregates.Aggregate, error) {
		var r aggregates.ActionResult
		_, r.Err = sc.Post(ctx, sc.ServiceURL("os-aggregates", strconv.Itoa(id), "action"),
			map[string]any{"set_metadata": map[string]any{"metadata": m}}, &r.Body, &gophercloud.RequestOpts{OkCodes: []int{200}})
		return r.Extract()
	}
	set := one("set AGGREGATE KEY=VALUE...", "set metadata (availability_zone=ZONE moves the aggregate's hosts to ZONE)", func(cmd *cobra.Command, args []string) error {
		if len(args) < 2 {
			return usageErrorf("want AGGREGATE KEY=VALUE...")
		}
		for _, kv := range args[1:] {
			if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
				return usageErrorf("want KEY=VALUE, got %q", kv)
			}
		}
		return nil
	}, func(ctx context.Context, sc *gophercloud.ServiceClient, id int, rest []string) (*aggregates.Aggregate, error) {
		m := map[string]any{}
		for _, kv := range rest {
			k, v, _ := strings.Cut(kv, "=")
			m[k] = v
		}
		return setMeta(ctx, sc, id, m)
	})
	unset := one("unset AGGREGATE KEY...", "remove metadata keys", func(cmd *cobra.Command, args []string) error {
		if len(args) < 2 {
			return usageErrorf("want AGGREGATE KEY...")
		}
		return nil
	}, func(ctx context.Context, sc *gophercloud.ServiceClient, id int, rest []string) (*aggregates.Aggregate, error) {
		m := map[string]any{}
		for _, k := range rest {
			m[k] = nil
		}
		return setMeta(ctx, sc, id, m)
	})

	var zone string
	create := &cobra.Command{Use: "create NAME [--az ZONE]", Short: "create an aggregate, in a zone of its own with --az", Args: exactArgs("NAME")}
	cp := addPrinter(create, a.s, aggregateColumns...)
	create.Flags().StringVar(&zone, "az", "", "availability zone of the aggregate's hosts")
	create.RunE = func(cmd *cobra.Command, args []string) error {
		ctx, cl, err := a.connect(cmd)
		if err != nil {
			return err
		}
		ag, err := aggregates.Create(ctx, cl.compute, aggregates.CreateOpts{Name: args[0], AvailabilityZone: zone}).Extract()
		if err != nil {
			return err
		}
		return cp.record(aggregateRow(*ag)...)
	}

	del := &cobra.Command{Use: "delete AGGREGATE...", Short: "delete aggregates by name or id; every one is tried", Args: minArgs("AGGREGATE")}
	del.RunE = func(cmd *cobra.Command, args []string) error {
		ctx, cl, err := a.connect(cmd)
		if err != nil {
			return err
		}
		return each(a.s, "delete", args, func(arg string) error {
			id, err := findAggregateID(ctx, cl.compute, arg)
			if err != nil {
				return err
			}
			return aggregates.Delete(ctx, cl.compute, id).ExtractErr()
		})
	}
	c.AddCommand(list, show, create, del, addHost, removeHost, set, unset, a.aggregateSync())
	return c
}

func listAggregates(ctx context.Context, sc *gophercloud.ServiceClient) ([]aggregates.Aggregate, error) {
	page, err := aggregates.List(sc).AllPages(ctx)
	if err != nil {
		return nil, fmt.Errorf("list aggregates: %w", err)
	}
	return aggregates.ExtractAggregates(page)
}

// findAggregateID is the aggregate with the id (integer or uuid) or the
// name arg.
func findAggregateID(ctx context.Context, sc *gophercloud.ServiceClient, arg string) (int, error) {
	ags, err := listAggregates(ctx, sc)
	if err != nil {
		return 0, err
	}
	var all []named
	for _, ag := range ags {
		if ag.UUID == arg {
			return ag.ID, nil
		}
		all = append(all, named{strconv.Itoa(ag.ID), ag.Name})
	}
	id, err := pick("aggregate", arg, all)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(id)
}
