package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	"github.com/spf13/cobra"

	"github.com/berth-project/berth/api"
	"github.com/berth-project/berth/internal/backoff"
)

// `server shelve SERVER...` and `server unshelve SERVER...`, each over
// every server named (every one is tried, as delete): POST
// /servers/{id}/action shelve or unshelve, then the servers printed as
// `server list` does. --wait follows them through the server watch (one
// stream for all, as create's wait; a poll per --interval where the API
// has none) until each has arrived with no task: SHELVED or
// SHELVED_OFFLOADED for shelve, ACTIVE for unshelve.

func (a *apiCmd) serverShelveCmds() []*cobra.Command {
	shelve := a.serverShelveVerb(shelveVerb{
		use:   "shelve SERVER... [--wait]",
		short: "shelve servers: stopped, then offloaded (host and allocation freed)",
		long: "Shelve each SERVER (name or id): POST /servers/{id}/action shelve. The\n" +
			"guest stops; the server is SHELVED on its host, or SHELVED_OFFLOADED (no\n" +
			"host, its allocation freed) once the API's shelved_offload_time has passed\n" +
			"(0, the default: at once). With --wait, until each is SHELVED or\n" +
			"SHELVED_OFFLOADED with no task; exits 1 if one ends in ERROR or ACTIVE.",
		done:   func(status string) bool { return status == "SHELVED" || status == "SHELVED_OFFLOADED" },
		failed: func(status string) bool { return status == "ERROR" || status == "ACTIVE" },
		want:   "SHELVED or SHELVED_OFFLOADED",
		act: func(ctx context.Context, sc *gophercloud.ServiceClient, id string, _ *shelveFlags) error {
			return serverAction(ctx, sc, id, map[string]any{"shelve": nil})
		}})
	unshelve := a.serverShelveVerb(shelveVerb{
		use:   "unshelve SERVER... [--az ZONE] [--host HOST] [--wait]",
		short: "unshelve servers: started again, scheduled anew when offloaded",
		long: "Unshelve each SERVER (name or id): POST /servers/{id}/action unshelve. A\n" +
			"SHELVED server starts on its host; a SHELVED_OFFLOADED one is scheduled\n" +
			"again (into --az, onto --host: an admin's; both only for offloaded\n" +
			"servers). With --wait, until each is ACTIVE; exits 1 if one ends in ERROR\n" +
			"or back in SHELVED_OFFLOADED (no host could take it: see `berth server\n" +
			"show` and the server's instance actions).",
		done:   func(status string) bool { return status == "ACTIVE" },
		failed: func(status string) bool { return status == "ERROR" || status == "SHELVED_OFFLOADED" },
		want:   "ACTIVE", placement: true,
		act: func(ctx context.Context, sc *gophercloud.ServiceClient, id string, f *shelveFlags) error {
			var body any // null, or (2.91) a zone and a host
			if f.az != "" || f.host != "" {
				b := map[string]any{}
				if f.az != "" {
					b["availability_zone"] = f.az
				}
				if f.host != "" {
					b["host"] = f.host
				}
				body = b
			}
			return serverAction(ctx, sc, id, map[string]any{"unshelve": body})
		}})
	return []*cobra.Command{shelve, unshelve}
}

// serverAction posts body to server id's action.
func serverAction(ctx context.Context, sc *gophercloud.ServiceClient, id string, body map[string]any) error {
	resp, err := sc.Post(ctx, sc.ServiceURL("servers", id, "action"), body, nil, &gophercloud.RequestOpts{OkCodes: []int{202}})
	_, _, err = gophercloud.ParseResponse(resp, err)
	return err
}

// shelveVerb is shelve or unshelve: its help, when its wait is over for
// a server with no task (done, or failed: exit 1), and its action.
type shelveVerb struct {
	use, short, long string
	want             string
	done, failed     func(status string) bool
	placement        bool // --az and --host
	act              func(ctx context.Context, sc *gophercloud.ServiceClient, id string, f *shelveFlags) error
}

type shelveFlags struct {
	az, host string
	wait     waitFlags
}

func (a *apiCmd) serverShelveVerb(v shelveVerb) *cobra.Command {
	f := &shelveFlags{}
	c := &cobra.Command{Use: v.use, Short: v.short, Long: v.long, Args: minArgs("SERVER")}
	p := addPrinter(c, a.s, serverColumns...)
	if v.placement {
		c.Flags().StringVar(&f.az, "az", "", "the availability zone to schedule an offloaded server into")
		c.Flags().StringVar(&f.host, "host", "", "the host to schedule an offloaded server onto (admin)")
	}
	f.wait.add(c, "wait until every server is "+v.want)
	c.RunE = func(cmd *cobra.Command, args []string) error {
		ctx, cl, err := a.connect(cmd)
		if err != nil {
			return err
		}
		verb := cmd.Name()
		var ids []string
		err = each(a.s, verb, args, func(arg string) error {
			s, err := findServer(ctx, cl.compute, arg)
			if err != nil {
				return err
			}
			if err := v.act(ctx, cl.compute, s.ID, f); err != nil {
				return err
			}
			ids = append(ids, s.ID)
			return nil
		})
		if len(ids) == 0 {
			return err
		}
		var werr error
		if f.wait.wait {
			werr = waitShelve(ctx, a.s, cl.berth(), cl.compute, ids, v, f.wait)
		}
		list := make([]servers.Server, 0, len(ids))
		for _, id := range ids {
			s, gerr := servers.Get(ctx, cl.compute, id).Extract()
			if gerr != nil {
				return gerr
			}
			list = append(list, *s)
		}
		if perr := printServers(p, list); perr != nil {
			return perr
		}
		if err == nil {
			err = werr
		}
		return err
	}
	return c
}

// waitShelve waits until every server of ids is v's done or failed
// status with no task: through the server watch, or (an API without it)
// one GET of each pending server per interval. A failed or deleted
// server, or the timeout, exits 1.
func waitShelve(ctx context.Context, s *streams, bc *api.Client, sc *gophercloud.ServiceClient, ids []string, v shelveVerb, w waitFlags) error {
	status := map[string]string{}
	settled := func(st, task string) string {
		switch {
		case st == statusDeleted:
			return statusDeleted
		case task != "":
			return "" // on its way
		case v.done(st), v.failed(st):
			return st
		}
		return ""
	}
	final := map[string]string{}
	pending := func() []string {
		var out []string
		for _, id := range ids {
			if final[id] == "" {
				out = append(out, id)
			}
		}
		return out
	}
	counts := func() map[string]int {
		c := map[string]int{}
		for _, id := range ids {
			c[status[id]]++
		}
		return c
	}
	note := func(id, st, task string) {
		status[id] = st
		if task != "" {
			status[id] = st + "/" + task
		}
		final[id] = settled(st, task)
	}
	pr := newProgress(s)
	defer pr.done()
	start := time.Now()
	wctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	var from int64
	watching := true
	for opened := false; watching && len(pending()) > 0 && wctx.Err() == nil; opened = true {
		err := bc.WatchServers(wctx, ids, from, func(ev api.WatchEvent) bool {
			from = ev.Revision
			if ev.Servers != nil {
				in := map[string]bool{}
				for _, sv := range ev.Servers {
					in[sv.ID] = true
					note(sv.ID, watchedStatus(sv), sv.TaskState)
				}
				for _, id := range ids {
					if !in[id] {
						note(id, statusDeleted, "")
					}
				}
			}
			if ev.Server != nil {
				note(ev.Server.ID, watchedStatus(*ev.Server), ev.Server.TaskState)
			}
			pr.show(counts(), time.Since(start))
			return len(pending()) > 0
		})
		var ae *api.APIError
		switch {
		case !opened && errors.As(err, &ae) && ae.Status == 404:
			watching = false // an older Berth: poll below
		case err != nil && wctx.Err() == nil:
			_ = backoff.Sleep(wctx, w.interval)
		}
	}
	for !watching && len(pending()) > 0 && wctx.Err() == nil {
		for _, id := range pending() {
			sv, err := servers.Get(wctx, sc, id).Extract()
			switch {
			case gophercloud.ResponseCodeIs(err, 404):
				note(id, statusDeleted, "")
			case err != nil:
				return err
			default:
				note(id, sv.Status, sv.TaskState)
			}
		}
		pr.show(counts(), time.Since(start))
		if len(pending()) > 0 {
			_ = backoff.Sleep(wctx, w.interval)
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	pr.done()
	if left := pending(); len(left) > 0 {
		fmt.Fprintf(s.err, "not %s after %s: %s\n", v.want, w.timeout, joinIDs(left))
		return &exitError{code: exitFailure, err: fmt.Errorf("timed out after %s with %d of %d server(s) not %s", w.timeout, len(left), len(ids), v.want)}
	}
	var bad []string
	for _, id := range ids {
		if !v.done(final[id]) {
			bad = append(bad, id+" "+final[id])
		}
	}
	if len(bad) > 0 {
		return &exitError{code: exitFailure, err: fmt.Errorf("%d of %d server(s) not %s: %v", len(bad), len(ids), v.want, bad)}
	}
	return nil
}
