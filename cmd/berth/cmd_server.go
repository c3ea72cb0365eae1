package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	"github.com/gophercloud/gophercloud/v2/pagination"
	"github.com/spf13/cobra"

	"github.com/berth-project/berth/api"
	"github.com/berth-project/berth/images"
)

// serverColumns are `server list`'s and `server create`'s columns; the
// fault is last, as it has spaces.
var serverColumns = []string{"id", "name", "status", "host", "zone", "flavor", "fault"}

// serverFields are `server show`'s.
// cell and attempts are Berth's, from /v1 (Nova's server has neither).
var serverFields = []string{"id", "name", "status", "task_state", "vm_state", "power_state", "host",
	"hypervisor_hostname", "zone", "flavor", "image", "project_id", "user_id", "created", "updated", "fault", "fault_details",
	"cell", "attempts"}

func serverRow(s servers.Server) []any {
	return []any{s.ID, s.Name, s.Status, s.Host, s.AvailabilityZone, flavorName(s), s.Fault.Message}
}

// serverRecord is show's fields; berth is Berth's view of the server,
// nil when /v1 could not be read.
func serverRecord(s servers.Server, berth *api.ServerView) []any {
	img, _ := s.Image["id"].(string)
	var cell, attempts any
	if berth != nil {
		cell, attempts = berth.Cell, berth.Attempts
	}
	return []any{s.ID, s.Name, s.Status, s.TaskState, s.VmState, powerState(s.PowerState), s.Host, s.HypervisorHostname,
		s.AvailabilityZone, flavorName(s), img, s.TenantID, s.UserID, timeOrNil(s.Created), timeOrNil(s.Updated),
		s.Fault.Message, s.Fault.Details, cell, attempts}
}

// flavorName is the embedded flavor's name (2.47+).
func flavorName(s servers.Server) string {
	if n, ok := s.Flavor["original_name"].(string); ok {
		return n
	}
	id, _ := s.Flavor["id"].(string)
	return id
}

func powerState(p servers.PowerState) string {
	switch p {
	case servers.NOSTATE:
		return "NOSTATE"
	case servers.RUNNING:
		return "Running"
	case servers.PAUSED:
		return "Paused"
	case servers.SHUTDOWN:
		return "Shutdown"
	case servers.CRASHED:
		return "Crashed"
	case servers.SUSPENDED:
		return "Suspended"
	}
	return fmt.Sprint(int(p))
}

func timeOrNil(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC().Format(time.RFC3339)
}

func (a *apiCmd) serverCmd() *cobra.Command {
	c := a.noun("server", "servers: create, list, show, delete, resize, migrate, evacuate, shelve, unshelve")
	c.AddCommand(a.serverCreate(), a.serverList(), a.serverShow(), a.serverDelete())
	c.AddCommand(a.serverMoveCmds()...)
	c.AddCommand(a.serverEvacuate())
	c.AddCommand(a.serverShelveCmds()...)
	names := a.completeNames(func(ctx context.Context, cl *cloud) ([]string, error) {
		list, err := listServers(ctx, cl.compute, nil)
		out := make([]string, len(list))
		for i, s := range list {
			out[i] = s.Name
		}
		return out, err
	})
	for _, sub := range c.Commands() {
		if sub.Name() == "show" || sub.Name() == "delete" || sub.Name() == "resize" || sub.Name() == "migrate" ||
			sub.Name() == "evacuate" || sub.Name() == "shelve" || sub.Name() == "unshelve" {
			sub.ValidArgsFunction = names
		}
	}
	return c
}

func (a *apiCmd) serverList() *cobra.Command {
	var all bool
	var status, host, name string
	c := &cobra.Command{Use: "list", Short: "servers, with Nova's filters", Args: exactArgs()}
	p := addPrinter(c, a.s, serverColumns...)
	c.Flags().BoolVar(&all, "all-projects", false, "every project's servers (admin)")
	c.Flags().StringVar(&status, "status", "", "only servers in this status (ACTIVE, BUILD, ERROR...)")
	c.Flags().StringVar(&host, "host", "", "only servers on this compute host (admin)")
	c.Flags().StringVar(&name, "name", "", "only servers whose name matches this regular expression")
	c.RunE = func(cmd *cobra.Command, _ []string) error {
		ctx, cl, err := a.connect(cmd)
		if err != nil {
			return err
		}
		q := url.Values{}
		for k, v := range map[string]string{"status": status, "host": host, "name": name} {
			if v != "" {
				q.Set(k, v)
			}
		}
		if all {
			q.Set("all_tenants", "1")
		}
		list, err := listServers(ctx, cl.compute, q)
		if err != nil {
			return err
		}
		fillFaults(ctx, cl.compute, list)
		rows := make([][]any, len(list))
		for i, s := range list {
			rows[i] = serverRow(s)
		}
		return p.list(rows)
	}
	return c
}

// listServers is GET /servers/detail with query q, every page.
func listServers(ctx context.Context, sc *gophercloud.ServiceClient, q url.Values) ([]servers.Server, error) {
	u := sc.ServiceURL("servers", "detail")
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	pager := pagination.NewPager(sc, u, func(r pagination.PageResult) pagination.Page {
		return servers.ServerPage{LinkedPageBase: pagination.LinkedPageBase{PageResult: r}}
	})
	page, err := pager.AllPages(ctx)
	if err != nil {
		return nil, fmt.Errorf("list servers: %w", err)
	}
	return servers.ExtractServers(page)
}

func (a *apiCmd) serverShow() *cobra.Command {
	c := &cobra.Command{Use: "show SERVER", Short: "one server, by name or id", Args: exactArgs("SERVER")}
	p := addPrinter(c, a.s, serverFields...)
	c.RunE = func(cmd *cobra.Command, args []string) error {
		ctx, cl, err := a.connect(cmd)
		if err != nil {
			return err
		}
		s, err := findServer(ctx, cl.compute, args[0])
		if err != nil {
			return err
		}
		// Best effort: the cell and attempts are worth a second request,
		// not a failure when /v1 is refused or gone.
		berth, err := cl.berth().GetServer(ctx, s.ID)
		if err != nil {
			berth = nil
		}
		return p.record(serverRecord(*s, berth)...)
	}
	return c
}

// uuidRE is what Nova's server ids look like.
var uuidRE = regexp.MustCompile(`^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$`)

// findServer is the server named or with the id arg: an id is fetched,
// a name is looked up with Nova's name filter (a regular expression,
// anchored and quoted here).
func findServer(ctx context.Context, sc *gophercloud.ServiceClient, arg string) (*servers.Server, error) {
	if uuidRE.MatchString(arg) {
		s, err := servers.Get(ctx, sc, arg).Extract()
		if err == nil {
			return s, nil
		}
		if !gophercloud.ResponseCodeIs(err, 404) {
			return nil, err
		}
	}
	list, err := listServers(ctx, sc, url.Values{"name": {"^" + regexp.QuoteMeta(arg) + "$"}})
	if err != nil {
		return nil, err
	}
	all := make([]named, len(list))
	for i, s := range list {
		all[i] = named{s.ID, s.Name}
	}
	id, err := pick("server", arg, all)
	if err != nil {
		return nil, err
	}
	for i := range list {
		if list[i].ID == id {
			return &list[i], nil
		}
	}
	return nil, &notFoundError{what: "server", name: arg}
}

func (a *apiCmd) serverDelete() *cobra.Command {
	var w waitFlags
	c := &cobra.Command{Use: "delete SERVER... [--wait]", Short: "delete servers by name or id; every one is tried",
		Long: "Delete servers by name or id; every one is tried and the failures summed up.\n" +
			"With --wait, one watch request for all of them (server-sent events of\n" +
			"/v1/servers/watch; one list per --interval from a Berth without it), until\n" +
			"each is gone for good (its host freed its resources): a line of counts by\n" +
			"status (live on a terminal); on timeout the ids still there.",
		Args: minArgs("SERVER")}
	w.add(c, "wait until every server is gone")
	c.RunE = func(cmd *cobra.Command, args []string) error {
		ctx, cl, err := a.connect(cmd)
		if err != nil {
			return err
		}
		var ids []string
		start := time.Now()
		err = each(a.s, "delete", args, func(arg string) error {
			s, err := findServer(ctx, cl.compute, arg)
			if err != nil {
				return err
			}
			if err := servers.Delete(ctx, cl.compute, s.ID).ExtractErr(); err != nil {
				return err
			}
			ids = append(ids, s.ID)
			return nil
		})
		if w.wait && len(ids) > 0 {
			werr := waitGoneWatching(ctx, a.s, cl.berth(), ids, w)
			if errors.Is(werr, errNoWatch) {
				fmt.Fprintf(a.s.err, "debug: GET /v1/servers/watch answered 404 (a Berth without it): listing the servers every %s\n", w.interval)
				werr = waitGone(ctx, a.s, cl.compute, ids, start, w)
			}
			if werr != nil && err == nil {
				err = werr
			}
		}
		return err
	}
	return c
}

// createFlags are `server create`'s.
type createFlags struct {
	flavor, image, name, az, host string
	count                         int
	hints                         hintFlag
	wait                          waitFlags
}

func (a *apiCmd) serverCreate() *cobra.Command {
	f := &createFlags{hints: hintFlag{}}
	c := &cobra.Command{
		Use:   "create --flavor FLAVOR [--image IMAGE] [--count N] [--name NAME] [--az ZONE] [--host HOST] [--hint K=V]... [--wait]",
		Short: "create servers (POST /servers with min_count = max_count = --count)",
		Long: "Create servers: POST /servers with min_count = max_count = --count and\n" +
			"return_reservation_id, then one GET /servers/detail?reservation_id=... for\n" +
			"their ids. With --wait, one watch request for all of them (server-sent events\n" +
			"of /v1/servers/watch; one list per --interval from a Berth without it),\n" +
			"until each is ACTIVE or ERROR: their ids at once on stderr, a line of counts\n" +
			"by status (live on a terminal), then the table; on timeout the ids not\n" +
			"settled. Exits 1 if any server ended in ERROR.",
		Args: exactArgs(),
	}
	p := addPrinter(c, a.s, serverColumns...)
	fs := c.Flags()
	fs.StringVar(&f.flavor, "flavor", "", "flavor name or id (required)")
	fs.StringVar(&f.image, "image", "", "image name or id (default: "+images.DefaultFakeImage+", which the fake driver boots)")
	fs.IntVar(&f.count, "count", 1, "how many servers (Nova names them NAME-1..NAME-N)")
	fs.StringVar(&f.name, "name", "", "server name (default: berth-<random>)")
	fs.StringVar(&f.az, "az", "", "availability zone")
	fs.StringVar(&f.host, "host", "", "compute host to build on (admin)")
	fs.Var(f.hints, "hint", "scheduler hint KEY=VALUE, repeatable: group=GROUP (name or id), same_host=SERVER, different_host=SERVER")
	f.wait.add(c, "wait until every server is ACTIVE or ERROR")
	c.RunE = func(cmd *cobra.Command, _ []string) error {
		if f.flavor == "" {
			return usageErrorf("--flavor is required")
		}
		if f.count < 1 {
			return usageErrorf("--count %d: must be at least 1", f.count)
		}
		ctx, cl, err := a.connect(cmd)
		if err != nil {
			return err
		}
		list, reservation, err := createServers(ctx, cl, f)
		if err != nil {
			return err
		}
		if !f.wait.wait {
			return printServers(p, list)
		}
		ids := make([]string, len(list))
		for i, s := range list {
			ids[i] = s.ID
		}
		fmt.Fprintf(a.s.err, "created %d server(s): %s\n", len(ids), joinIDs(ids))
		settled, werr := waitSettledWatching(ctx, a.s, cl.berth(), cl.compute, reservation, ids, f.wait)
		if errors.Is(werr, errNoWatch) {
			fmt.Fprintf(a.s.err, "debug: GET /v1/servers/watch answered 404 (a Berth without it): listing the servers every %s\n", f.wait.interval)
			settled, werr = waitSettled(ctx, a.s, cl.compute, reservation, ids, f.wait)
		}
		fillFaults(ctx, cl.compute, settled)
		if err := printServers(p, settled); err != nil {
			return err
		}
		if werr != nil {
			return werr
		}
		for _, s := range settled {
			if s.Status != "ACTIVE" {
				return &exitError{code: exitFailure, err: fmt.Errorf("%s is %s: %s", s.ID, s.Status, s.Fault.Message)}
			}
		}
		return nil
	}
	return c
}

// fillFaults fetches the fault of each server in ERROR without one: a
// server buried in cell0 (no host fit) shows its fault in GET
// /servers/{id} but not in /servers/detail, as in Nova
// (InstanceList.fill_faults reads the default cell only). One GET per
// failed server, none for the others.
func fillFaults(ctx context.Context, sc *gophercloud.ServiceClient, list []servers.Server) {
	for i := range list {
		if list[i].Status != "ERROR" || list[i].Fault.Message != "" {
			continue
		}
		if s, err := servers.Get(ctx, sc, list[i].ID).Extract(); err == nil {
			list[i].Fault = s.Fault
		}
	}
}

func printServers(p *printer, list []servers.Server) error {
	rows := make([][]any, len(list))
	for i, s := range list {
		rows[i] = serverRow(s)
	}
	return p.list(rows)
}

// createServers posts the create and lists what it made, by its
// reservation id.
func createServers(ctx context.Context, cl *cloud, f *createFlags) ([]servers.Server, string, error) {
	flavorID, err := findFlavorID(ctx, cl.compute, f.flavor)
	if err != nil {
		return nil, "", err
	}
	imageID := images.DefaultID(images.DefaultFakeImage)
	if f.image != "" {
		if imageID, err = findImageID(ctx, cl, f.image); err != nil {
			return nil, "", err
		}
	}
	name := f.name
	if name == "" {
		var b [4]byte
		_, _ = rand.Read(b[:])
		name = "berth-" + hex.EncodeToString(b[:])
	}
	server := map[string]any{"name": name, "flavorRef": flavorID, "imageRef": imageID,
		"min_count": f.count, "max_count": f.count, "networks": "none", "return_reservation_id": true}
	if f.az != "" {
		server["availability_zone"] = f.az
	}
	if f.host != "" {
		server["host"] = f.host
	}
	body := map[string]any{"server": server}
	if len(f.hints) > 0 {
		hints, err := resolveHints(ctx, cl, f.hints)
		if err != nil {
			return nil, "", err
		}
		body["os:scheduler_hints"] = hints
	}
	var resp struct {
		ReservationID string `json:"reservation_id"`
	}
	if _, err := cl.compute.Post(ctx, cl.compute.ServiceURL("servers"), body, &resp, &gophercloud.RequestOpts{OkCodes: []int{202}}); err != nil {
		return nil, "", fmt.Errorf("create: %w", err)
	}
	if resp.ReservationID == "" {
		return nil, "", fmt.Errorf("create: the API returned no reservation_id")
	}
	list, err := listServers(ctx, cl.compute, url.Values{"reservation_id": {resp.ReservationID}})
	if err != nil {
		return nil, "", fmt.Errorf("created reservation %s: %w", resp.ReservationID, err)
	}
	if len(list) == 0 {
		return nil, "", fmt.Errorf("created reservation %s, but no server of it is listed", resp.ReservationID)
	}
	return list, resp.ReservationID, nil
}

// resolveHints turns names in hints into ids: a group by name, servers
// of same_host/different_host by name.
func resolveHints(ctx context.Context, cl *cloud, h hintFlag) (map[string]any, error) {
	out := map[string]any{}
	for k, v := range h {
		switch k {
		case "group":
			id, err := findServerGroupID(ctx, cl.compute, v.(string))
			if err != nil {
				return nil, fmt.Errorf("--hint group: %w", err)
			}
			out[k] = id
		default:
			var ids []string
			for _, s := range v.([]string) {
				srv, err := findServer(ctx, cl.compute, s)
				if err != nil {
					return nil, fmt.Errorf("--hint %s: %w", k, err)
				}
				ids = append(ids, srv.ID)
			}
			out[k] = ids
		}
	}
	return out, nil
}
