package main

import (
	"context"
	"fmt"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/flavors"
	"github.com/spf13/cobra"
)

var flavorColumns = []string{"id", "name", "vcpus", "ram", "disk", "ephemeral", "is_public", "description", "extra_specs"}

func flavorRow(f flavors.Flavor) []any {
	return []any{f.ID, f.Name, f.VCPUs, f.RAM, f.Disk, f.Ephemeral, f.IsPublic, f.Description, f.ExtraSpecs}
}

func (a *apiCmd) flavorCmd() *cobra.Command {
	c := a.noun("flavor", "flavors: list, show, create, delete")

	list := &cobra.Command{Use: "list", Short: "flavors (GET /flavors/detail)", Args: exactArgs()}
	lp := addPrinter(list, a.s, flavorColumns...)
	var all bool
	list.Flags().BoolVar(&all, "all", false, "private flavors too (admin)")
	list.RunE = func(cmd *cobra.Command, _ []string) error {
		ctx, cl, err := a.connect(cmd)
		if err != nil {
			return err
		}
		opts := flavors.ListOpts{}
		if all {
			opts.AccessType = flavors.AllAccess
		}
		fs, err := listFlavors(ctx, cl.compute, opts)
		if err != nil {
			return err
		}
		rows := make([][]any, len(fs))
		for i, f := range fs {
			rows[i] = flavorRow(f)
		}
		return lp.list(rows)
	}

	show := &cobra.Command{Use: "show FLAVOR", Short: "one flavor, by name or id", Args: exactArgs("FLAVOR")}
	sp := addPrinter(show, a.s, flavorColumns...)
	show.RunE = func(cmd *cobra.Command, args []string) error {
		ctx, cl, err := a.connect(cmd)
		if err != nil {
			return err
		}
		id, err := findFlavorID(ctx, cl.compute, args[0])
		if err != nil {
			return err
		}
		f, err := flavors.Get(ctx, cl.compute, id).Extract()
		if err != nil {
			return err
		}
		return sp.record(flavorRow(*f)...)
	}

	var cf struct {
		id, description  string
		vcpus, ram, disk int
		ephemeral        int
		private          bool
		properties       varFlags
	}
	cf.properties = varFlags{}
	create := &cobra.Command{Use: "create NAME --vcpus N --ram MB [--disk GB] [--property K=V]...", Short: "create a flavor (admin)", Args: exactArgs("NAME")}
	cp := addPrinter(create, a.s, flavorColumns...)
	create.Flags().StringVar(&cf.id, "id", "", "flavor id (default: a UUID the API makes)")
	create.Flags().IntVar(&cf.vcpus, "vcpus", 1, "virtual CPUs")
	create.Flags().IntVar(&cf.ram, "ram", 256, "memory in MB")
	create.Flags().IntVar(&cf.disk, "disk", 0, "root disk in GB")
	create.Flags().IntVar(&cf.ephemeral, "ephemeral", 0, "ephemeral disk in GB")
	create.Flags().BoolVar(&cf.private, "private", false, "a private flavor (only projects given access see it)")
	create.Flags().StringVar(&cf.description, "description", "", "free text")
	create.Flags().Var(cf.properties, "property", "extra spec KEY=VALUE, repeatable")
	create.RunE = func(cmd *cobra.Command, args []string) error {
		ctx, cl, err := a.connect(cmd)
		if err != nil {
			return err
		}
		public := !cf.private
		f, err := flavors.Create(ctx, cl.compute, flavors.CreateOpts{Name: args[0], ID: cf.id, VCPUs: cf.vcpus, RAM: cf.ram,
			Disk: &cf.disk, Ephemeral: &cf.ephemeral, IsPublic: &public, Description: cf.description}).Extract()
		if err != nil {
			return err
		}
		if len(cf.properties) > 0 {
			specs, err := flavors.CreateExtraSpecs(ctx, cl.compute, f.ID, flavors.ExtraSpecsOpts(cf.properties)).Extract()
			if err != nil {
				return fmt.Errorf("flavor %s created; its properties: %w", f.ID, err)
			}
			f.ExtraSpecs = specs
		}
		return cp.record(flavorRow(*f)...)
	}

	del := &cobra.Command{Use: "delete FLAVOR...", Short: "delete flavors by name or id (admin); every one is tried", Args: minArgs("FLAVOR")}
	del.RunE = func(cmd *cobra.Command, args []string) error {
		ctx, cl, err := a.connect(cmd)
		if err != nil {
			return err
		}
		return each(a.s, "delete", args, func(arg string) error {
			id, err := findFlavorID(ctx, cl.compute, arg)
			if err != nil {
				return err
			}
			return flavors.Delete(ctx, cl.compute, id).ExtractErr()
		})
	}
	names := a.completeNames(func(ctx context.Context, cl *cloud) ([]string, error) {
		fs, err := listFlavors(ctx, cl.compute, flavors.ListOpts{})
		out := make([]string, len(fs))
		for i, f := range fs {
			out[i] = f.Name
		}
		return out, err
	})
	show.ValidArgsFunction, del.ValidArgsFunction = names, names
	_ = create.RegisterFlagCompletionFunc("property", cobra.NoFileCompletions)
	c.AddCommand(list, show, create, del)
	return c
}

func listFlavors(ctx context.Context, sc *gophercloud.ServiceClient, opts flavors.ListOpts) ([]flavors.Flavor, error) {
	page, err := flavors.ListDetail(sc, opts).AllPages(ctx)
	if err != nil {
		return nil, fmt.Errorf("list flavors: %w", err)
	}
	return flavors.ExtractFlavors(page)
}

// findFlavorID is the flavor with the id arg, else the one named arg.
func findFlavorID(ctx context.Context, sc *gophercloud.ServiceClient, arg string) (string, error) {
	f, err := flavors.Get(ctx, sc, arg).Extract()
	if err == nil {
		return f.ID, nil
	}
	if !gophercloud.ResponseCodeIs(err, 404) {
		return "", err
	}
	fs, err := listFlavors(ctx, sc, flavors.ListOpts{AccessType: flavors.AllAccess})
	if err != nil {
		return "", err
	}
	all := make([]named, len(fs))
	for i, f := range fs {
		all[i] = named{f.ID, f.Name}
	}
	return pick("flavor", arg, all)
}
