package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/migrations"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	"github.com/spf13/cobra"

	"github.com/berth-project/berth/internal/backoff"
)

// The cold moves in the openstack CLI's grammar: `server resize --flavor
// F SERVER`, `server resize confirm|revert SERVER`, `server migrate
// [--host H] SERVER`, and `migration list`. Each action prints the server
// as `server list` does; --wait polls it once per --interval until the
// move reaches the status it leads to (VERIFY_RESIZE for resize and
// migrate, ACTIVE for confirm and revert).

// migrationColumns are `migration list`'s (os-migrations' members).
var migrationColumns = []string{"id", "uuid", "server", "type", "status", "source_host", "source_node",
	"dest_host", "dest_node", "old_flavor", "new_flavor", "project_id", "user_id", "created", "updated"}

// serverMoveCmds are `server resize` (with confirm and revert) and
// `server migrate`.
func (a *apiCmd) serverMoveCmds() []*cobra.Command {
	resize := a.serverMove(moveVerb{
		use: "resize --flavor FLAVOR SERVER [--wait]", short: "resize a server to another flavor (it then waits in VERIFY_RESIZE)",
		long: "Resize SERVER (name or id) to --flavor: POST /servers/{id}/action resize.\n" +
			"The server goes VERIFY_RESIZE on its new host; `berth server resize confirm`\n" +
			"keeps it there, `berth server resize revert` takes it back. With --wait,\n" +
			"one GET of the server per --interval until it is VERIFY_RESIZE; exits 1 if\n" +
			"it ends in ERROR or back in ACTIVE (the move failed: see `berth migration\n" +
			"list --server SERVER`).",
		want: "VERIFY_RESIZE", flavor: true,
		act: func(ctx context.Context, sc *gophercloud.ServiceClient, id string, f *moveFlags) error {
			flavorID, err := findFlavorID(ctx, sc, f.flavor)
			if err != nil {
				return err
			}
			return servers.Resize(ctx, sc, id, servers.ResizeOpts{FlavorRef: flavorID}).ExtractErr()
		}})
	resize.AddCommand(
		a.serverMove(moveVerb{use: "confirm SERVER [--wait]", short: "confirm a resize or migration: the server stays on its new host",
			want: "ACTIVE", act: func(ctx context.Context, sc *gophercloud.ServiceClient, id string, _ *moveFlags) error {
				return servers.ConfirmResize(ctx, sc, id).ExtractErr()
			}}),
		a.serverMove(moveVerb{use: "revert SERVER [--wait]", short: "revert a resize or migration: the server goes back to its source",
			want: "ACTIVE", act: func(ctx context.Context, sc *gophercloud.ServiceClient, id string, _ *moveFlags) error {
				return servers.RevertResize(ctx, sc, id).ExtractErr()
			}}))
	migrate := a.serverMove(moveVerb{
		use: "migrate [--host HOST] SERVER [--wait]", short: "cold-migrate a server to another host (admin)",
		long: "Cold-migrate SERVER (name or id): POST /servers/{id}/action migrate, to\n" +
			"--host when given. The server goes VERIFY_RESIZE on its new host; confirm or\n" +
			"revert it with `berth server resize confirm|revert`. With --wait, as resize.",
		want: "VERIFY_RESIZE", host: true,
		act: func(ctx context.Context, sc *gophercloud.ServiceClient, id string, f *moveFlags) error {
			var body any // Nova's migrate takes null, or a host from 2.56
			if f.host != "" {
				body = map[string]any{"host": f.host}
			}
			resp, err := sc.Post(ctx, sc.ServiceURL("servers", id, "action"), map[string]any{"migrate": body}, nil, nil)
			_, _, err = gophercloud.ParseResponse(resp, err)
			return err
		}})
	return []*cobra.Command{resize, a.withLiveMigrate(migrate)}
}

// moveVerb is one move command: its help, the status --wait waits for,
// its flags and its action on the server's id.
type moveVerb struct {
	use, short, long string
	want             string
	flavor, host     bool
	act              func(ctx context.Context, sc *gophercloud.ServiceClient, id string, f *moveFlags) error
}

type moveFlags struct {
	flavor, host string
	wait         waitFlags
}

func (a *apiCmd) serverMove(v moveVerb) *cobra.Command {
	f := &moveFlags{}
	c := &cobra.Command{Use: v.use, Short: v.short, Long: v.long, Args: exactArgs("SERVER")}
	p := addPrinter(c, a.s, serverColumns...)
	if v.flavor {
		c.Flags().StringVar(&f.flavor, "flavor", "", "the new flavor, name or id (required)")
	}
	if v.host {
		c.Flags().StringVar(&f.host, "host", "", "the destination host (default: the scheduler's pick)")
	}
	f.wait.add(c, "wait until the server is "+v.want)
	c.Flags().Lookup("interval").Usage = "how often --wait reads the server (one GET)"
	c.RunE = func(cmd *cobra.Command, args []string) error {
		if v.flavor && f.flavor == "" {
			return usageErrorf("--flavor is required")
		}
		ctx, cl, err := a.connect(cmd)
		if err != nil {
			return err
		}
		s, err := findServer(ctx, cl.compute, args[0])
		if err != nil {
			return err
		}
		if err := v.act(ctx, cl.compute, s.ID, f); err != nil {
			return err
		}
		if !f.wait.wait {
			if s, err = servers.Get(ctx, cl.compute, s.ID).Extract(); err != nil {
				return err
			}
			return printServers(p, []servers.Server{*s})
		}
		got, werr := waitMoved(ctx, a.s, cl.compute, s.ID, v.want, f.wait)
		if got != nil {
			if err := printServers(p, []servers.Server{*got}); err != nil {
				return err
			}
		}
		return werr
	}
	return c
}

// waitMoved gets server id once per interval until it is want. A server
// in ERROR, or back in ACTIVE with no task while a move was waited for
// (the move failed and left it on its source), ends the wait with exit
// 1, as does the timeout.
func waitMoved(ctx context.Context, s *streams, sc *gophercloud.ServiceClient, id, want string, w waitFlags) (*servers.Server, error) {
	return pollServer(ctx, s, sc, id, w, "not "+want, func(sv *servers.Server) (bool, error) {
		switch {
		case sv.Status == want && sv.TaskState == "":
			return true, nil
		case sv.Status == "ERROR":
			return true, fmt.Errorf("%s is ERROR: %s", id, sv.Fault.Message)
		case want != "ACTIVE" && sv.Status == "ACTIVE" && sv.TaskState == "":
			return true, fmt.Errorf("%s is ACTIVE on %s: the move failed (berth migration list --server %s)", id, sv.Host, id)
		}
		return false, nil
	})
}

// pollServer gets server id once per interval, showing its status, until
// settled says it is done; an error from settled, or the timeout (the
// message ends with ", <what>"), is exit 1.
func pollServer(ctx context.Context, s *streams, sc *gophercloud.ServiceClient, id string, w waitFlags, what string,
	settled func(*servers.Server) (bool, error)) (*servers.Server, error) {
	pr := newProgress(s)
	defer pr.done()
	start := time.Now()
	deadline := start.Add(w.timeout)
	for {
		sv, err := servers.Get(ctx, sc, id).Extract()
		if err != nil {
			return nil, err
		}
		pr.show(map[string]int{sv.Status: 1}, time.Since(start))
		if done, err := settled(sv); done {
			if err != nil {
				return sv, &exitError{code: exitFailure, err: err}
			}
			return sv, nil
		}
		if time.Now().After(deadline) {
			msg := fmt.Sprintf("timed out after %s: %s is %s", w.timeout, id, sv.Status)
			if what != "" {
				msg += ", " + what
			}
			return sv, &exitError{code: exitFailure, err: errors.New(msg)}
		}
		if !backoff.Sleep(ctx, w.interval) {
			return sv, ctx.Err()
		}
	}
}

func (a *apiCmd) migrationCmd() *cobra.Command {
	c := a.noun("migration", "migrations of servers (os-migrations): list")
	c.AddCommand(a.migrationList())
	return c
}

func (a *apiCmd) migrationList() *cobra.Command {
	var server, host, status, mtype string
	c := &cobra.Command{Use: "list [--server SERVER] [--host HOST] [--status STATUS] [--type TYPE]",
		Short: "migrations, newest first (GET /os-migrations, admin)", Args: exactArgs()}
	p := addPrinter(c, a.s, migrationColumns...)
	fs := c.Flags()
	fs.StringVar(&server, "server", "", "only this server's, name or id")
	fs.StringVar(&host, "host", "", "only those from or to this host")
	fs.StringVar(&status, "status", "", "only those in this status (pre-migrating, finished, confirmed, error...)")
	fs.StringVar(&mtype, "type", "", "only this type: resize, migration, live-migration, evacuation")
	c.RunE = func(cmd *cobra.Command, _ []string) error {
		ctx, cl, err := a.connect(cmd)
		if err != nil {
			return err
		}
		var opts migrations.ListOpts
		if server != "" {
			s, err := findServer(ctx, cl.compute, server)
			if err != nil {
				return err
			}
			opts.InstanceID = &s.ID
		}
		if host != "" {
			opts.Host = &host
		}
		if status != "" {
			opts.Status = &status
		}
		if mtype != "" {
			opts.MigrationType = &mtype
		}
		list, err := listMigrations(ctx, cl.compute, opts)
		if err != nil {
			return err
		}
		rows := make([][]any, len(list))
		for i, m := range list {
			rows[i] = []any{m.ID, m.UUID, m.InstanceID, m.MigrationType, m.Status, m.SourceCompute, m.SourceNode,
				m.DestCompute, m.DestNode, m.OldInstanceTypeID, m.NewInstanceTypeID, m.ProjectID, m.UserID,
				timeOrNil(m.CreatedAt), timeOrNil(m.UpdatedAt)}
		}
		return p.list(rows)
	}
	return c
}

// listMigrations reads every page of os-migrations.
func listMigrations(ctx context.Context, sc *gophercloud.ServiceClient, opts migrations.ListOpts) ([]migrations.Migration, error) {
	pages, err := migrations.List(sc, opts).AllPages(ctx)
	if err != nil {
		return nil, err
	}
	return migrations.ExtractMigrations(pages)
}
