package main

import (
	"context"
	"fmt"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	"github.com/spf13/cobra"
)

// `berth server migrate --live [--host HOST] SERVER... [--wait]`: the live
// migration in the openstack CLI's grammar (`openstack server migrate
// --live-migration`), added to the cold `server migrate` so one verb
// moves servers either way. Each server is asked in turn (POST
// /servers/{id}/action os-migrateLive, block_migration auto); every one
// is tried. With --wait, each is read once per --interval until it is
// ACTIVE with no task again: on another host (moved) or still on its
// source (the migration failed or was rolled back: exit 1).

// withLiveMigrate adds --live to the cold migrate command c.
func (a *apiCmd) withLiveMigrate(c *cobra.Command) *cobra.Command {
	var live bool
	c.Use = "migrate [--live] [--host HOST] SERVER... [--wait]"
	c.Long += "\n\nWith --live, live-migrate instead (admin): POST /servers/{id}/action\n" +
		"os-migrateLive for each SERVER, the guest running throughout. With --wait, until\n" +
		"each is ACTIVE again; exits 1 for one still on its source (the migration\n" +
		"failed: see `berth migration list --server SERVER --type live-migration`)."
	c.Flags().BoolVar(&live, "live", false, "live-migrate: the server keeps running (several SERVERs may be given)")
	c.Flags().Lookup("wait").Usage = "wait until the server is VERIFY_RESIZE (with --live: ACTIVE again)"
	c.Args = minArgs("SERVER")
	cold := c.RunE
	c.RunE = func(cmd *cobra.Command, args []string) error {
		if !live {
			if len(args) != 1 {
				return usageErrorf("a cold migration takes one SERVER; --live takes several")
			}
			return cold(cmd, args)
		}
		return a.liveMigrate(cmd, args)
	}
	return c
}

func (a *apiCmd) liveMigrate(cmd *cobra.Command, args []string) error {
	fs := cmd.Flags()
	host, _ := fs.GetString("host")
	var w waitFlags
	w.wait, _ = fs.GetBool("wait")
	w.interval, _ = fs.GetDuration("interval")
	w.timeout, _ = fs.GetDuration("timeout")
	p := &printer{s: a.s, known: serverColumns}
	p.format, _ = fs.GetString("output")
	p.columns, _ = fs.GetStringArray("column")
	ctx, cl, err := a.connect(cmd)
	if err != nil {
		return err
	}
	type asked struct{ id, from string }
	var started []asked
	err = each(a.s, "live-migrate", args, func(arg string) error {
		s, err := findServer(ctx, cl.compute, arg)
		if err != nil {
			return err
		}
		var to any // null: the scheduler's pick
		if host != "" {
			to = host
		}
		body := map[string]any{"os-migrateLive": map[string]any{"host": to, "block_migration": "auto"}}
		resp, err := cl.compute.Post(ctx, cl.compute.ServiceURL("servers", s.ID, "action"), body, nil, nil)
		if _, _, err = gophercloud.ParseResponse(resp, err); err != nil {
			return err
		}
		started = append(started, asked{s.ID, s.Host})
		return nil
	})
	var list []servers.Server
	for _, s := range started {
		var got *servers.Server
		var gerr error
		if w.wait {
			got, gerr = waitLive(ctx, a.s, cl.compute, s.id, s.from, w)
		} else {
			got, gerr = servers.Get(ctx, cl.compute, s.id).Extract()
		}
		if got != nil {
			list = append(list, *got)
		}
		if gerr != nil && err == nil {
			err = gerr
		}
	}
	if len(list) > 0 {
		if perr := printServers(p, list); perr != nil {
			return perr
		}
	}
	return err
}

// waitLive gets server id once per interval until it is ACTIVE with no
// task: done if on another host than from, failed (exit 1) if still
// there; ERROR and the timeout are failures too.
func waitLive(ctx context.Context, s *streams, sc *gophercloud.ServiceClient, id, from string, w waitFlags) (*servers.Server, error) {
	return pollServer(ctx, s, sc, id, w, "", func(sv *servers.Server) (bool, error) {
		switch {
		case sv.Status == "ERROR":
			return true, fmt.Errorf("%s is ERROR: %s", id, sv.Fault.Message)
		case sv.Status == "ACTIVE" && sv.TaskState == "" && sv.Host != from:
			return true, nil
		case sv.Status == "ACTIVE" && sv.TaskState == "":
			return true, fmt.Errorf("%s is still on %s: the live migration failed (berth migration list --server %s --type live-migration)", id, from, id)
		}
		return false, nil
	})
}
