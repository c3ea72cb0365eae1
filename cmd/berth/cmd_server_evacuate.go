package main

import (
	"context"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	"github.com/spf13/cobra"
)

// `server evacuate SERVER... [--host HOST] [--wait]`: rebuild servers
// whose host is down on other hosts (POST /servers/{id}/action evacuate,
// admin). Every server is tried, as `server delete` does; the accepted
// ones are printed as `server list` does, after --wait has seen each
// ACTIVE again.

func (a *apiCmd) serverEvacuate() *cobra.Command {
	var host string
	var w waitFlags
	c := &cobra.Command{Use: "evacuate SERVER... [--host HOST] [--wait]",
		Short: "rebuild servers of a down host on other hosts (admin)",
		Long: "Evacuate each SERVER (name or id): POST /servers/{id}/action evacuate, to\n" +
			"--host when given, else where the scheduler picks. Nova refuses while the\n" +
			"server's host is up: stop it or force it down first (`berth service\n" +
			"force-down HOST`, or `openstack compute service set --down`). The host's\n" +
			"agent destroys its stale copies when it comes back. With --wait, one GET\n" +
			"of each server per --interval until it is ACTIVE again; exits 1 if one\n" +
			"ends in ERROR (see `berth migration list --type evacuation`).",
		Args: minArgs("SERVER")}
	p := addPrinter(c, a.s, serverColumns...)
	c.Flags().StringVar(&host, "host", "", "the destination host (default: the scheduler's pick)")
	w.add(c, "wait until every server is ACTIVE again")
	c.Flags().Lookup("interval").Usage = "how often --wait reads each server (one GET)"
	c.RunE = func(cmd *cobra.Command, args []string) error {
		ctx, cl, err := a.connect(cmd)
		if err != nil {
			return err
		}
		var ids []string
		err = each(a.s, "evacuate", args, func(arg string) error {
			s, err := findServer(ctx, cl.compute, arg)
			if err != nil {
				return err
			}
			if err := evacuate(ctx, cl.compute, s.ID, host); err != nil {
				return err
			}
			ids = append(ids, s.ID)
			return nil
		})
		var shown []servers.Server
		for _, id := range ids {
			var s *servers.Server
			var gerr error
			if w.wait {
				s, gerr = waitMoved(ctx, a.s, cl.compute, id, "ACTIVE", w)
			} else {
				s, gerr = servers.Get(ctx, cl.compute, id).Extract()
			}
			if s != nil {
				shown = append(shown, *s)
			}
			if gerr != nil && err == nil {
				err = gerr
			}
		}
		if len(shown) > 0 {
			if perr := printServers(p, shown); perr != nil && err == nil {
				err = perr
			}
		}
		return err
	}
	return c
}

// evacuate posts one evacuate action: {} for the scheduler's pick, or
// the host.
func evacuate(ctx context.Context, sc *gophercloud.ServiceClient, id, host string) error {
	body := map[string]any{}
	if host != "" {
		body["host"] = host
	}
	resp, err := sc.Post(ctx, sc.ServiceURL("servers", id, "action"), map[string]any{"evacuate": body}, nil,
		&gophercloud.RequestOpts{OkCodes: []int{200}})
	_, _, err = gophercloud.ParseResponse(resp, err)
	return err
}
