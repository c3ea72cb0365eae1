package main

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	"github.com/spf13/cobra"

	"github.com/berth-project/berth/internal/backoff"
)

// How --wait waits: one list request per interval for all the servers
// waited for (GET /servers/detail?reservation_id=R for a create, one
// list for a delete), never one GET per server: 30 servers cost one
// request a second, not 30 every 200 ms. Where the API serves the server
// watch, both waits watch instead (wait_watch.go): this is the fallback
// for a Berth without it.

type waitFlags struct {
	wait              bool
	timeout, interval time.Duration
}

func (w *waitFlags) add(c *cobra.Command, what string) {
	c.Flags().BoolVar(&w.wait, "wait", false, what)
	c.Flags().DurationVar(&w.timeout, "timeout", 5*time.Minute, "how long --wait waits")
	c.Flags().DurationVar(&w.interval, "interval", time.Second, "how often --wait lists the servers where the API has no watch (one request for all of them)")
}

// progress shows counts by status: rewritten in place on a terminal, a
// plain line each time they change otherwise (a log, a CI job).
type progress struct {
	s    *streams
	tty  bool
	last string
}

func newProgress(s *streams) *progress {
	f, ok := s.err.(*os.File)
	tty := false
	if ok {
		if st, err := f.Stat(); err == nil {
			tty = st.Mode()&os.ModeCharDevice != 0
		}
	}
	return &progress{s: s, tty: tty}
}

func (p *progress) show(counts map[string]int, elapsed time.Duration) {
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, counts[k])
	}
	line := "waiting: " + strings.Join(parts, " ")
	if line == p.last && !p.tty {
		return
	}
	p.last = line
	if p.tty {
		fmt.Fprintf(p.s.err, "\r\033[K%s (%s)", line, elapsed.Round(time.Second))
		return
	}
	fmt.Fprintln(p.s.err, line)
}

func (p *progress) done() {
	if p.tty && p.last != "" {
		fmt.Fprintln(p.s.err)
	}
}

// waitSettled lists reservation's servers every interval until each of
// ids is ACTIVE or ERROR or deleted, and returns the last list. On timeout it says
// which ids are not settled and returns them too, with an error.
func waitSettled(ctx context.Context, s *streams, sc *gophercloud.ServiceClient, reservation string, ids []string, w waitFlags) ([]servers.Server, error) {
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	pr := newProgress(s)
	defer pr.done()
	start := time.Now()
	deadline := start.Add(w.timeout)
	for {
		list, err := listServers(ctx, sc, url.Values{"reservation_id": {reservation}})
		if err != nil {
			return nil, err
		}
		counts := map[string]int{}
		var mine []servers.Server
		var pending []string
		for _, sv := range list {
			if !want[sv.ID] {
				continue
			}
			mine = append(mine, sv)
			counts[sv.Status]++
			if !serverSettled(sv.Status) {
				pending = append(pending, sv.ID)
			}
		}
		// A server deleted meanwhile has left the list: count it so,
		// and wait no more for it.
		if gone := len(ids) - len(mine); gone > 0 {
			counts[statusDeleted] += gone
		}
		pr.show(counts, time.Since(start))
		if len(pending) == 0 {
			return mine, nil
		}
		if time.Now().After(deadline) {
			pr.done()
			fmt.Fprintf(s.err, "not ACTIVE or ERROR after %s: %s\n", w.timeout, joinIDs(pending))
			return mine, &exitError{code: exitFailure, err: fmt.Errorf("timed out after %s with %d of %d server(s) not settled", w.timeout, len(pending), len(ids))}
		}
		if !backoff.Sleep(ctx, w.interval) {
			return mine, ctx.Err()
		}
	}
}

// statusDeleted is how a wait counts a server deleted while it waited.
const statusDeleted = "DELETED"

// serverSettled says a create's wait is over for a server in status st: it
// built (ACTIVE), failed (ERROR) or was deleted meanwhile.
func serverSettled(st string) bool {
	return st == "ACTIVE" || st == "ERROR" || st == statusDeleted
}

// waitGone lists the servers every interval until none of ids is left.
//
// A deleted server leaves the default list at once (vm_state deleted)
// while its host still frees its resources; Berth removes its record
// only then. A list with changes-since includes deleted servers (as in
// Nova, and it is allowed to non-admins), so the wait lists every server
// changed since shortly before the deletes and waits until none of ids
// is in it: gone for good, allocations freed. The margin covers a client
// clock ahead of the API's.
func waitGone(ctx context.Context, s *streams, sc *gophercloud.ServiceClient, ids []string, since time.Time, w waitFlags) error {
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	pr := newProgress(s)
	defer pr.done()
	start := time.Now()
	deadline := start.Add(w.timeout)
	// An admin may delete other projects' servers by id: list them all,
	// unless the caller may not (Nova's 403), then its own.
	allTenants := true
	for {
		q := url.Values{"changes-since": {since.Add(-changesSinceMargin).UTC().Format(time.RFC3339)}}
		if allTenants {
			q.Set("all_tenants", "1")
		}
		list, err := listServers(ctx, sc, q)
		if allTenants && gophercloud.ResponseCodeIs(err, 403) {
			allTenants = false
			continue
		}
		if err != nil {
			return err
		}
		counts := map[string]int{statusGone: len(ids)}
		var left []string
		for _, sv := range list {
			if want[sv.ID] {
				counts[sv.Status]++
				counts[statusGone]--
				left = append(left, sv.ID)
			}
		}
		pr.show(counts, time.Since(start))
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			pr.done()
			fmt.Fprintf(s.err, "still there after %s: %s\n", w.timeout, joinIDs(left))
			return &exitError{code: exitFailure, err: fmt.Errorf("timed out after %s with %d of %d server(s) not deleted", w.timeout, len(left), len(ids))}
		}
		if !backoff.Sleep(ctx, w.interval) {
			return ctx.Err()
		}
	}
}

// statusGone is how a delete's wait counts a server whose records are
// removed.
const statusGone = "gone"

// changesSinceMargin is how far before its deletes waitGone lists.
const changesSinceMargin = 5 * time.Minute

func joinIDs(ids []string) string { return strings.Join(ids, " ") }
