package api

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// WatchEvent is one event of a server watch: the first carries every
// watched server the caller may see (Servers), each later one a server
// whose status changed (Server) or the id of one that no longer exists
// (Gone). Revision is the event's id, which a reconnect sends as
// Last-Event-ID.
type WatchEvent struct {
	Revision int64
	Servers  []ServerView
	Server   *ServerView
	Gone     string
}

// WatchServers opens GET /v1/servers/watch for ids and calls fn with
// each event until fn returns false (then nil), the stream ends (the
// server's request deadline: nil) or ctx does. from, when not 0, resumes
// after that revision (Last-Event-ID). An API without the watch answers
// an *APIError with Status 404.
//
// The client's HTTP timeout would cut the stream, so the request runs
// with the client's transport alone; ctx bounds it.
func (c *Client) WatchServers(ctx context.Context, ids []string, from int64, fn func(WatchEvent) bool) error {
	return c.watchServers(ctx, url.Values{"id": ids}, from, fn)
}

// WatchAllServers is WatchServers with all_projects: an admin sees the
// servers of every project (others are refused: *APIError 403).
func (c *Client) WatchAllServers(ctx context.Context, ids []string, from int64, fn func(WatchEvent) bool) error {
	return c.watchServers(ctx, url.Values{"id": ids, "all_projects": {"1"}}, from, fn)
}

func (c *Client) watchServers(ctx context.Context, q url.Values, from int64, fn func(WatchEvent) bool) error {
	path := "/v1/servers/watch?" + q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.BaseURL+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "text/event-stream")
	if c.Token != "" {
		req.Header.Set("X-Auth-Token", c.Token)
	}
	if from > 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(from, 10))
	}
	hc := &http.Client{Transport: c.HTTP.Transport, CheckRedirect: c.HTTP.CheckRedirect, Jar: c.HTTP.Jar}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("GET /v1/servers/watch: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return apiError(resp.StatusCode, data)
	}
	if err := readServerEvents(resp.Body, fn); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return err
	}
	return nil
}

// readServerEvents parses a text/event-stream of a server watch.
func readServerEvents(body io.Reader, fn func(WatchEvent) bool) error {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	var id int64
	var event, data string
	for sc.Scan() {
		line := sc.Text()
		if line != "" {
			field, value, _ := strings.Cut(line, ":")
			value = strings.TrimPrefix(value, " ")
			switch field {
			case "id":
				if n, err := strconv.ParseInt(value, 10, 64); err == nil {
					id = n
				}
			case "event":
				event = value
			case "data":
				data += value
			}
			continue
		}
		ev := WatchEvent{Revision: id}
		switch event {
		case "servers":
			if err := json.Unmarshal([]byte(data), &ev.Servers); err != nil {
				return fmt.Errorf("server watch: decode %q: %w", data, err)
			}
		case "server":
			ev.Server = &ServerView{}
			if err := json.Unmarshal([]byte(data), ev.Server); err != nil {
				return fmt.Errorf("server watch: decode %q: %w", data, err)
			}
		case "gone":
			var g GoneView
			if err := json.Unmarshal([]byte(data), &g); err != nil {
				return fmt.Errorf("server watch: decode %q: %w", data, err)
			}
			if g.ID == "" {
				return fmt.Errorf("server watch: a gone event without an id: %q", data)
			}
			ev.Gone = g.ID
		default:
			event, data = "", ""
			continue // a heartbeat, a retry hint
		}
		event, data = "", ""
		if !fn(ev) {
			return nil
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("server watch: %w", err)
	}
	return nil
}
