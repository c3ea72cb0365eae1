package main

import (
	"context"
	"fmt"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/services"
	"github.com/spf13/cobra"
)

var serviceColumns = []string{"id", "binary", "host", "zone", "status", "state", "forced_down", "updated_at", "disabled_reason"}

func serviceRow(s services.Service) []any {
	return []any{s.ID, s.Binary, s.Host, s.Zone, s.Status, s.State, s.ForcedDown, timeOrNil(s.UpdatedAt), s.DisabledReason}
}

func (a *apiCmd) serviceCmd() *cobra.Command {
	c := a.noun("service", "compute services: list, disable, enable, force-down (admin)")

	list := &cobra.Command{Use: "list", Short: "compute services: up/down, enabled/disabled", Args: exactArgs()}
	lp := addPrinter(list, a.s, serviceColumns...)
	var host, binary string
	list.Flags().StringVar(&host, "host", "", "only this host's services")
	list.Flags().StringVar(&binary, "binary", "", "only services of this binary (nova-compute, nova-scheduler...)")
	list.RunE = func(cmd *cobra.Command, _ []string) error {
		ctx, cl, err := a.connect(cmd)
		if err != nil {
			return err
		}
		svcs, err := listServices(ctx, cl.compute, services.ListOpts{Host: host, Binary: binary})
		if err != nil {
			return err
		}
		rows := make([][]any, len(svcs))
		for i, s := range svcs {
			rows[i] = serviceRow(s)
		}
		return lp.list(rows)
	}

	// update is one PUT /os-services/{id} (2.53+) on HOST's compute
	// service, its answer printed.
	update := func(use, short string, body func(cmd *cobra.Command) map[string]any) *cobra.Command {
		u := &cobra.Command{Use: use, Short: short, Args: exactArgs("HOST")}
		p := addPrinter(u, a.s, serviceColumns...)
		u.RunE = func(cmd *cobra.Command, args []string) error {
			ctx, cl, err := a.connect(cmd)
			if err != nil {
				return err
			}
			id, err := computeServiceID(ctx, cl.compute, args[0])
			if err != nil {
				return err
			}
			var r services.UpdateResult
			_, r.Err = cl.compute.Put(ctx, cl.compute.ServiceURL("os-services", id), body(cmd), &r.Body, &gophercloud.RequestOpts{OkCodes: []int{200}})
			s, err := r.Extract()
			if err != nil {
				return err
			}
			return p.list([][]any{serviceRow(*s)})
		}
		return u
	}
	var reason string
	disable := update("disable HOST [--reason TEXT]", "keep new builds off HOST; answers once its agent has set COMPUTE_STATUS_DISABLED",
		func(*cobra.Command) map[string]any {
			b := map[string]any{"status": "disabled"}
			if reason != "" {
				b["disabled_reason"] = reason
			}
			return b
		})
	disable.Flags().StringVar(&reason, "reason", "", "why the host is disabled (shown in service list, at most 255 characters)")
	enable := update("enable HOST", "let new builds on HOST again", func(*cobra.Command) map[string]any {
		return map[string]any{"status": "enabled"}
	})
	var unset bool
	forceDown := update("force-down HOST [--unset]", "mark HOST down whatever its heartbeat says", func(*cobra.Command) map[string]any {
		return map[string]any{"forced_down": !unset}
	})
	forceDown.Flags().BoolVar(&unset, "unset", false, "clear forced_down instead of setting it")
	c.AddCommand(list, disable, enable, forceDown)
	return c
}

func listServices(ctx context.Context, sc *gophercloud.ServiceClient, opts services.ListOpts) ([]services.Service, error) {
	page, err := services.List(sc, opts).AllPages(ctx)
	if err != nil {
		return nil, fmt.Errorf("list services: %w", err)
	}
	return services.ExtractServices(page)
}

// computeServiceID is the id of host's nova-compute service.
func computeServiceID(ctx context.Context, sc *gophercloud.ServiceClient, host string) (string, error) {
	svcs, err := listServices(ctx, sc, services.ListOpts{Host: host, Binary: "nova-compute"})
	if err != nil {
		return "", err
	}
	if len(svcs) == 0 {
		return "", &notFoundError{what: "compute host", name: host}
	}
	return svcs[0].ID, nil
}
