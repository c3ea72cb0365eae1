package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"

	"github.com/berth-project/berth/api"
	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/backoff"
)

// How --wait waits on a Berth that serves the server watch
// (GET /v1/servers/watch, server-sent events): one streaming request for
// all the servers instead of one list per --interval, the count line
// redrawn on each change. The stream ends at the API's request deadline;
// the wait reconnects with the last revision it saw (Last-Event-ID),
// missing nothing. An API without the watch (an older Berth: 404) is
// polled as before (wait.go).
//
// A create's wait then lists the servers once for the table (Nova's
// view, as without --wait). A server deleted during it is DELETED and no
// longer waited for: a stream's first event omits a server that no
// longer exists, and the stream says "gone" when one it showed stops
// existing (api/watch.go). The delete of a server in a cell is seen at
// once besides: its task state becomes deleting, and a server being
// deleted will not settle otherwise.
//
// A delete's wait waits for each server's "gone" (or its absence from a
// stream's first event): its records removed, its host's resources
// freed. An admin may delete other projects' servers by id, so it
// watches with all_projects, or without when the caller may not (403).

// watchedStatus is how the wait counts a server of the watch: DELETED
// once its delete was accepted (task state deleting), else its status.
func watchedStatus(v api.ServerView) string {
	if v.TaskState == etcdschema.TaskDeleting {
		return statusDeleted
	}
	return v.Status
}

// errNoWatch says the API does not serve the server watch.
var errNoWatch = errors.New("the API has no server watch")

// followWatch watches ids, resuming each stream that ends, and calls fn
// with every event until fn returns false or ctx ends (then nil; the
// caller tells a timeout by its own state). It returns errNoWatch when
// the API answers the first request 404. With all, it asks for every
// project's servers, and for the caller's own when refused that (403).
func followWatch(ctx context.Context, bc *api.Client, ids []string, all bool, interval time.Duration, fn func(api.WatchEvent) bool) error {
	var from int64
	done := false
	for opened := false; !done && ctx.Err() == nil; opened = true {
		got := false
		watch := bc.WatchServers
		if all {
			watch = bc.WatchAllServers
		}
		err := watch(ctx, ids, from, func(ev api.WatchEvent) bool {
			got = true
			from = ev.Revision
			done = !fn(ev)
			return !done
		})
		var ae *api.APIError
		refused := errors.As(err, &ae)
		switch {
		case !opened && refused && ae.Status == 404:
			return errNoWatch
		case !got && refused && ae.Status == 403 && all:
			all = false // not an admin: its own servers
			continue
		case err != nil && ctx.Err() == nil && (refused || !got):
			// Refused, or broken before its first event: not worth retrying.
			return fmt.Errorf("watch the servers: %w", err)
		case err != nil && ctx.Err() == nil:
			// A stream cut mid-way (a proxy, a restarted API): resume, a
			// little later so that a flapping API is not hammered (the
			// loop ends if the wait times out meanwhile).
			_ = backoff.Sleep(ctx, interval)
		}
		// The stream reached the API's request deadline, or was cut: go
		// on from the last revision seen.
	}
	return nil
}

// waitSettledWatching waits for ids through the server watch; it returns
// errNoWatch, having printed nothing, when the API has none.
func waitSettledWatching(ctx context.Context, s *streams, bc *api.Client, sc *gophercloud.ServiceClient, reservation string, ids []string, w waitFlags) ([]servers.Server, error) {
	status := map[string]string{}
	for _, id := range ids {
		status[id] = "BUILD" // what a create answers; the first event says
	}
	pending := func() []string {
		var out []string
		for _, id := range ids {
			if !serverSettled(status[id]) {
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
	pr := newProgress(s)
	defer pr.done()
	start := time.Now()
	wctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	err := followWatch(wctx, bc, ids, false, w.interval, func(ev api.WatchEvent) bool {
		if ev.Servers != nil {
			// The first event of a stream: a waited-for server it
			// omits no longer exists.
			in := map[string]bool{}
			for _, v := range ev.Servers {
				in[v.ID] = true
				status[v.ID] = watchedStatus(v)
			}
			for _, id := range ids {
				if !in[id] {
					status[id] = statusDeleted
				}
			}
		}
		if ev.Server != nil {
			status[ev.Server.ID] = watchedStatus(*ev.Server)
		}
		if ev.Gone != "" {
			status[ev.Gone] = statusDeleted
		}
		pr.show(counts(), time.Since(start))
		return len(pending()) > 0
	})
	if err != nil {
		return nil, err
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	list, err := listServers(ctx, sc, url.Values{"reservation_id": {reservation}})
	if err != nil {
		return nil, err
	}
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	var mine []servers.Server
	for _, sv := range list {
		// A server the wait saw deleted is left out even while the list
		// still shows it: its delete was accepted (task state deleting)
		// and its host has not finished yet, so it shows its old status.
		if want[sv.ID] && status[sv.ID] != statusDeleted {
			mine = append(mine, sv)
		}
	}
	if left := pending(); len(left) > 0 {
		pr.done()
		fmt.Fprintf(s.err, "not ACTIVE or ERROR after %s: %s\n", w.timeout, joinIDs(left))
		return mine, &exitError{code: exitFailure, err: fmt.Errorf("timed out after %s with %d of %d server(s) not settled", w.timeout, len(left), len(ids))}
	}
	return mine, nil
}

// waitGoneWatching waits through the server watch until none of ids
// exists; it returns errNoWatch, having printed nothing, when the API
// has no watch. The count line is waitGone's: gone=N beside the
// statuses of those left.
func waitGoneWatching(ctx context.Context, s *streams, bc *api.Client, ids []string, w waitFlags) error {
	status := map[string]string{}
	for _, id := range ids {
		status[id] = "" // unknown until the first event
	}
	left := func() []string {
		var out []string
		for _, id := range ids {
			if status[id] != statusGone {
				out = append(out, id)
			}
		}
		return out
	}
	pr := newProgress(s)
	defer pr.done()
	start := time.Now()
	wctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	err := followWatch(wctx, bc, ids, true, w.interval, func(ev api.WatchEvent) bool {
		if ev.Servers != nil {
			// The first event of a stream: a server it omits is gone.
			in := map[string]bool{}
			for _, v := range ev.Servers {
				in[v.ID] = true
				status[v.ID] = v.Status
			}
			for _, id := range ids {
				if !in[id] {
					status[id] = statusGone
				}
			}
		}
		if ev.Server != nil && status[ev.Server.ID] != statusGone {
			status[ev.Server.ID] = ev.Server.Status
		}
		if ev.Gone != "" {
			status[ev.Gone] = statusGone
		}
		counts := map[string]int{statusGone: 0}
		for _, id := range ids {
			counts[status[id]]++
		}
		pr.show(counts, time.Since(start))
		return len(left()) > 0
	})
	if err != nil {
		return err
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if l := left(); len(l) > 0 {
		pr.done()
		fmt.Fprintf(s.err, "still there after %s: %s\n", w.timeout, joinIDs(l))
		return &exitError{code: exitFailure, err: fmt.Errorf("timed out after %s with %d of %d server(s) not deleted", w.timeout, len(l), len(ids))}
	}
	return nil
}
