package main

import (
	"context"
	"fmt"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/availabilityzones"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/hypervisors"
	"github.com/spf13/cobra"
)

var hypervisorColumns = []string{"id", "hypervisor_hostname", "hypervisor_type", "host_ip", "state", "status", "service_host", "disabled_reason"}

func hypervisorRow(h hypervisors.Hypervisor) []any {
	return []any{h.ID, h.HypervisorHostname, h.HypervisorType, h.HostIP, h.State, h.Status, h.Service.Host, h.Service.DisabledReason}
}

func (a *apiCmd) hypervisorCmd() *cobra.Command {
	c := a.noun("hypervisor", "hypervisors: list, show (admin)")
	list := &cobra.Command{Use: "list", Short: "hypervisors (GET /os-hypervisors/detail)", Args: exactArgs()}
	lp := addPrinter(list, a.s, hypervisorColumns...)
	list.RunE = func(cmd *cobra.Command, _ []string) error {
		ctx, cl, err := a.connect(cmd)
		if err != nil {
			return err
		}
		hs, err := listHypervisors(ctx, cl.compute)
		if err != nil {
			return err
		}
		rows := make([][]any, len(hs))
		for i, h := range hs {
			rows[i] = hypervisorRow(h)
		}
		return lp.list(rows)
	}
	show := &cobra.Command{Use: "show HYPERVISOR", Short: "one hypervisor, by hostname or id", Args: exactArgs("HYPERVISOR")}
	sp := addPrinter(show, a.s, hypervisorColumns...)
	show.RunE = func(cmd *cobra.Command, args []string) error {
		ctx, cl, err := a.connect(cmd)
		if err != nil {
			return err
		}
		hs, err := listHypervisors(ctx, cl.compute)
		if err != nil {
			return err
		}
		all := make([]named, len(hs))
		for i, h := range hs {
			all[i] = named{h.ID, h.HypervisorHostname}
		}
		id, err := pick("hypervisor", args[0], all)
		if err != nil {
			return err
		}
		h, err := hypervisors.Get(ctx, cl.compute, id).Extract()
		if err != nil {
			return err
		}
		return sp.record(hypervisorRow(*h)...)
	}
	c.AddCommand(list, show)
	return c
}

func listHypervisors(ctx context.Context, sc *gophercloud.ServiceClient) ([]hypervisors.Hypervisor, error) {
	page, err := hypervisors.List(sc, nil).AllPages(ctx)
	if err != nil {
		return nil, fmt.Errorf("list hypervisors: %w", err)
	}
	return hypervisors.ExtractHypervisors(page)
}

var zoneColumns = []string{"name", "available"}

func (a *apiCmd) zoneCmd() *cobra.Command {
	c := a.noun("zone", "availability zones: list")
	list := &cobra.Command{Use: "list", Short: "availability zones and whether each is available", Args: exactArgs()}
	p := addPrinter(list, a.s, zoneColumns...)
	list.RunE = func(cmd *cobra.Command, _ []string) error {
		ctx, cl, err := a.connect(cmd)
		if err != nil {
			return err
		}
		page, err := availabilityzones.List(cl.compute).AllPages(ctx)
		if err != nil {
			return fmt.Errorf("list zones: %w", err)
		}
		zs, err := availabilityzones.ExtractAvailabilityZones(page)
		if err != nil {
			return err
		}
		rows := make([][]any, len(zs))
		for i, z := range zs {
			rows[i] = []any{z.ZoneName, z.ZoneState.Available}
		}
		return p.list(rows)
	}
	c.AddCommand(list)
	return c
}
