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

// How create --wait waits on a Berth that serves the server watch
// (GET /v1/servers/watch, server-sent events): one streaming request for
// all the servers instead of one list per --interval, the count line
// redrawn on each change, then one list for the table (Nova's view, as
// without --wait). The stream ends at the API's request deadline; the
// wait reconnects with the last revision it saw (Last-Event-ID), missing
// nothing. An API without the watch (an older Berth: 404) is polled as
// before.
//
// A server deleted during the wait is DELETED and no longer waited for.
// The watch leaves a server that no longer exists out (api/watch.go): a
// stream's first event omits it. Mid-stream, the delete of a server in
// a cell is seen at once: its task state becomes deleting (an event),
// and a server being deleted will not settle otherwise. A server deleted
// before it reached a cell (its BuildRequest removed) sends nothing; the
// wait learns it when the stream is resumed, whose first event omits it.

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
	var from int64
	for opened := false; len(pending()) > 0 && wctx.Err() == nil; opened = true {
		got := false
		err := bc.WatchServers(wctx, ids, from, func(ev api.WatchEvent) bool {
			got = true
			from = ev.Revision
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
			pr.show(counts(), time.Since(start))
			return len(pending()) > 0
		})
		var ae *api.APIError
		refused := errors.As(err, &ae)
		switch {
		case !opened && refused && ae.Status == 404:
			return nil, errNoWatch
		case err != nil && wctx.Err() == nil && (refused || !got):
			// Refused, or broken before its first event: not worth retrying.
			return nil, fmt.Errorf("watch the servers: %w", err)
		case err != nil && wctx.Err() == nil:
			// A stream cut mid-way (a proxy, a restarted API): resume, a
			// little later so that a flapping API is not hammered (the
			// loop ends if the wait times out meanwhile).
			_ = backoff.Sleep(wctx, w.interval)
		}
		// The stream reached the API's request deadline, or was cut: go
		// on from the last revision seen.
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
		if want[sv.ID] {
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
