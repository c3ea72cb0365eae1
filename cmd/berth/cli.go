package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/berth-project/berth/api"
)

func isServerVerb(s string) bool {
	switch s {
	case "create", "list", "show", "delete":
		return true
	}
	return false
}

func apiFlag(fs *flag.FlagSet) *string {
	def := os.Getenv("BERTH_API")
	if def == "" {
		def = "http://127.0.0.1:8774"
	}
	return fs.String("api", def, "compute API URL (env BERTH_API)")
}

// parseInterspersed lets flags follow positional arguments
// (`berth server show ID --api URL`), as operators type them.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

func cmdServerCLI(args []string, stdout, stderr io.Writer) int {
	verb, rest := args[0], args[1:]
	fs := flag.NewFlagSet("berth server "+verb, flag.ContinueOnError)
	fs.SetOutput(stderr)
	apiURL := apiFlag(fs)
	var (
		flavor  = fs.String("flavor", "", "flavor name or id")
		count   = fs.Int("count", 1, "how many servers")
		name    = fs.String("name", "", "server name (default: berth-<time>)")
		wait    = fs.Bool("wait", false, "wait until every server is ACTIVE or ERROR (create) or gone (delete)")
		timeout = fs.Duration("timeout", 5*time.Minute, "how long --wait waits")
		az      = fs.String("az", "", "availability zone (create)")
		host    = fs.String("host", "", "compute host to build on (create)")
		hints   = hintFlag{}
	)
	fs.Var(hints, "hint", "scheduler hint KEY=VALUE: group=ID, same_host=ID, different_host=ID (create; repeatable)")
	pos, err := parseInterspersed(fs, rest)
	if err != nil {
		return 2
	}
	c := api.NewClient(*apiURL)
	ctx := context.Background()
	fail := func(err error) int {
		fmt.Fprintf(stderr, "berth server %s: %v\n", verb, err)
		return 1
	}
	switch verb {
	case "create":
		if *flavor == "" {
			fmt.Fprintln(stderr, "berth server create: --flavor is required")
			return 2
		}
		if *name == "" {
			*name = "berth-" + time.Now().Format("150405")
		}
		req := api.CreateRequest{Name: *name, Flavor: *flavor, Count: *count, AvailabilityZone: *az, Host: *host}
		if len(hints) > 0 {
			req.Hints = hints
		}
		resp, err := c.CreateServers(ctx, req)
		if err != nil {
			return fail(err)
		}
		ids := make([]string, len(resp.Servers))
		for i, s := range resp.Servers {
			ids[i] = s.ID
		}
		if !*wait {
			for _, s := range resp.Servers {
				fmt.Fprintf(stdout, "%s %s\n", s.ID, s.Name)
			}
			return 0
		}
		views, err := waitSettled(ctx, c, ids, *timeout)
		if err != nil {
			return fail(err)
		}
		printServers(stdout, views)
		for _, v := range views {
			if v.Status != "ACTIVE" {
				return 1
			}
		}
		return 0
	case "list":
		views, err := c.ListServers(ctx)
		if err != nil {
			return fail(err)
		}
		printServers(stdout, views)
		return 0
	case "show":
		if len(pos) != 1 {
			fmt.Fprintln(stderr, "usage: berth server show ID")
			return 2
		}
		v, err := c.GetServer(ctx, pos[0])
		if err != nil {
			return fail(err)
		}
		printServer(stdout, v)
		return 0
	case "delete":
		if len(pos) < 1 {
			fmt.Fprintln(stderr, "usage: berth server delete ID...")
			return 2
		}
		for _, id := range pos {
			if err := c.DeleteServer(ctx, id); err != nil {
				return fail(err)
			}
		}
		if *wait {
			if err := waitGone(ctx, c, pos, *timeout); err != nil {
				return fail(err)
			}
		}
		return 0
	}
	return 2
}

// waitSettled polls until every server is ACTIVE or ERROR.
func waitSettled(ctx context.Context, c *api.Client, ids []string, timeout time.Duration) ([]api.ServerView, error) {
	deadline := time.Now().Add(timeout)
	for {
		views := make([]api.ServerView, 0, len(ids))
		settled := true
		for _, id := range ids {
			v, err := c.GetServer(ctx, id)
			if err != nil {
				return nil, err
			}
			views = append(views, *v)
			if v.Status != "ACTIVE" && v.Status != "ERROR" {
				settled = false
			}
		}
		if settled {
			return views, nil
		}
		if time.Now().After(deadline) {
			return views, fmt.Errorf("servers not ACTIVE or ERROR after %s", timeout)
		}
		time.Sleep(200 * time.Millisecond) // polling interval, bounded by the deadline
	}
}

func waitGone(ctx context.Context, c *api.Client, ids []string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		left := 0
		for _, id := range ids {
			_, err := c.GetServer(ctx, id)
			var ae *api.APIError
			if errors.As(err, &ae) && ae.Status == 404 {
				continue
			}
			if err != nil {
				return err
			}
			left++
		}
		if left == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d server(s) still there after %s", left, timeout)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func printServers(w io.Writer, views []api.ServerView) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tSTATUS\tHOST\tCELL\tFLAVOR\tFAULT")
	for _, v := range views {
		fault := ""
		if v.Fault != nil {
			fault = v.Fault.Message
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", v.ID, v.Name, v.Status, dash(v.Host), dash(v.Cell), v.Flavor.Name, fault)
	}
	tw.Flush()
}

func printServer(w io.Writer, v *api.ServerView) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k, val string) { fmt.Fprintf(tw, "%s\t%s\n", k, val) }
	row("id", v.ID)
	row("name", v.Name)
	row("status", v.Status)
	row("task_state", dash(v.TaskState))
	row("host", dash(v.Host))
	row("cell", dash(v.Cell))
	row("availability_zone", dash(v.AZ))
	row("flavor", fmt.Sprintf("%s (%d vCPU, %d MB RAM, %d GB disk)", v.Flavor.Name, v.Flavor.VCPUs, v.Flavor.RAM, v.Flavor.Disk))
	row("attempts", fmt.Sprint(v.Attempts))
	if v.Fault != nil {
		row("fault", v.Fault.Message)
		if v.Fault.Details != "" {
			row("fault details", strings.ReplaceAll(v.Fault.Details, "\n", " "))
		}
	}
	row("created", v.Created.Format(time.RFC3339))
	tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
