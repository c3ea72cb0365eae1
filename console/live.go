package console

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Live updates. A page carries the etcd revision its data was read
// after (data-rev); console.js opens /console/events?from=REV and, on
// each "change" event, fetches the page again and swaps in its data-live
// parts. The stream is one etcd watch of the deployment's prefix from
// REV+1, so nothing between the page's read and the stream's start is
// missed; events on keys no page shows (work-queue leases and holders,
// elections, members) are dropped, and changes are coalesced to one
// event per coalesce interval, so a burst of builds costs each browser a
// few refreshes, not one per key.
//
// The stream ends when its request's deadline does (the http block's
// request_timeout) or the server stops; the browser reconnects after
// retryMillis, sending the last id it saw (Last-Event-ID, the revision
// it had seen up to), and the watch resumes there. A compacted revision
// becomes one "change" (the page re-reads everything anyway).

const (
	coalesce = 500 * time.Millisecond
	// maxReplay is how many revisions a resumed stream replays at most.
	maxReplay   = 10000
	heartbeat   = 5 * time.Second
	retryMillis = 1000
)

// events is the live stream of one browser tab.
func (c *Console) events(w http.ResponseWriter, r *http.Request, cl *caller) {
	select {
	case c.streams <- struct{}{}:
		defer func() { <-c.streams }()
	default:
		// Too many tabs: the pages still work, without live updates. The
		// browser gives up on a 503 (EventSource does not retry it).
		http.Error(w, "too many live consoles open; reload later", http.StatusServiceUnavailable)
		return
	}
	from := parseRev(r.Header.Get("Last-Event-ID"))
	if from == 0 {
		from = parseRev(r.URL.Query().Get("from"))
	}
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	ctx := r.Context()
	send := func(format string, args ...any) bool {
		if _, err := fmt.Fprintf(w, format, args...); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if !send("retry: %d\n\n", retryMillis) {
		return
	}
	// A revision from the future (a confused client) or from long ago
	// (a tab left open for a day) is not replayed: the page re-reads.
	cur, err := c.revision(ctx)
	if err != nil {
		return
	}
	if from > cur || (from > 0 && cur-from > maxReplay) {
		if !send("id: %d\nevent: change\ndata: %d\n\n", cur, cur) {
			return
		}
		from = cur
	}
	opts := []clientv3.OpOption{clientv3.WithPrefix()}
	if from > 0 {
		opts = append(opts, clientv3.WithRev(from+1))
	}
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	wch := c.cfg.Client.Watch(wctx, c.cfg.Keys.All(), opts...)
	// latest is the newest revision the watch has reported: every event
	// up to it is either of no page's concern or in a pending change.
	latest := from
	pending := false
	flush := time.NewTimer(coalesce)
	flush.Stop()
	defer flush.Stop()
	beat := time.NewTicker(heartbeat)
	defer beat.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case resp, ok := <-wch:
			if !ok {
				return
			}
			if err := resp.Err(); err != nil {
				if resp.CompactRevision > 0 {
					// Missed events: the page re-reads; resume at now.
					send("id: %d\nevent: change\ndata: compacted\n\n", resp.Header.Revision)
				}
				return
			}
			for _, ev := range resp.Events {
				if !pending && c.shown(string(ev.Kv.Key)) {
					pending = true
					flush.Reset(coalesce)
				}
			}
			latest = max(latest, resp.Header.Revision)
		case <-flush.C:
			pending = false
			if !send("id: %d\nevent: change\ndata: %d\n\n", latest, latest) {
				return
			}
		case <-beat.C:
			// A comment keeps proxies from closing an idle stream, and the
			// id moves the resume point past events no page shows.
			if !pending && latest > 0 && !send(": idle\nid: %d\n\n", latest) {
				return
			}
		}
	}
}

// shown says whether a key is one a page shows: hosts (services,
// liveness, instances, builds), host mappings, providers (capacity),
// build requests, cells' instances and retries, alternates, drains, the
// leader's server counts.
func (c *Console) shown(key string) bool {
	k := c.cfg.Keys
	switch {
	case strings.HasPrefix(key, k.HostsPrefix()), strings.HasPrefix(key, k.HostMappings()),
		strings.HasPrefix(key, k.Providers()), strings.HasPrefix(key, k.BuildRequests()),
		strings.HasPrefix(key, k.AlternatesPrefix()), strings.HasPrefix(key, k.HostDrains()),
		key == k.ServerCounts():
		return true
	case strings.HasPrefix(key, k.CellsPrefix()):
		return !strings.Contains(key, "/leases/") && !strings.Contains(key, "/holders/")
	}
	return false
}

// parseRev is a revision from a query or header, 0 when absent or bad.
func parseRev(s string) int64 {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0
	}
	return n
}
