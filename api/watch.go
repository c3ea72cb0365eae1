package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
)

// The server watch: GET /v1/servers/watch?id=A&id=B answers
// server-sent events so that a client waiting for servers to settle
// (berth server create --wait) holds one request instead of listing
// them every interval.
//
// The stream opens with one "servers" event, the servers' views at the
// revision it read them (its id), then sends one "server" event per
// change of a server's status or task state, read at the revision of the
// change, and one "gone" event ({"id": ...}) when a server the stream
// showed no longer exists: its records removed, whether it had reached
// a cell (its host freed it) or was still a BuildRequest (deleted
// before scheduling, or its request dropped). A server still recorded
// with status DELETED is not gone; "gone" is for good. It is one etcd watch from the read revision + 1 of the whole
// deployment prefix, of which only the keys that make a wanted server's
// status are looked at: its BuildRequest, its InstanceMapping and its
// instance in a cell (servers.Store derives the status from those).
//
// A reconnect with Last-Event-ID = REV reads the servers at REV and
// watches from REV+1, so every change after what the client saw arrives;
// a revision etcd has compacted (or one from the future) starts over at
// the current one. The stream ends at the request's deadline (the http
// block's request_timeout) or when the server stops. At most
// maxServerWatches streams are open per process; more get 503.
//
// Scoping is the list's: a server of another project is not in the
// stream (not even as "absent") unless an admin asks with all_projects.

// maxServerWatches bounds the open watch streams of one API process:
// each holds an etcd watcher and a goroutine.
const maxServerWatches = 256

// maxWatchIDs is how many servers one watch may name.
const maxWatchIDs = MaxCount

// watchHeartbeat is how often an idle stream sends a comment, which
// keeps proxies from closing it and moves its resume point on.
const watchHeartbeat = 5 * time.Second

func (s *Server) watchServers(w http.ResponseWriter, r *http.Request) {
	ids := r.URL.Query()["id"]
	if len(ids) == 0 {
		writeError(w, http.StatusBadRequest, "Give the servers to watch as id=UUID, one or more.")
		return
	}
	if len(ids) > maxWatchIDs {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("At most %d servers may be watched at once.", maxWatchIDs))
		return
	}
	want := map[string]bool{}
	for _, id := range ids {
		if !isUUID(id) {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("Invalid server id %q.", id))
			return
		}
		want[id] = true
	}
	all := allProjects(r)
	if all && !can(w, r, policyServerAll, caller(r).ProjectID) {
		return
	}
	select {
	case s.watches <- struct{}{}:
		defer func() { <-s.watches }()
	default:
		writeError(w, http.StatusServiceUnavailable, "Too many server watches are open; poll the server list instead.")
		return
	}
	ctx := r.Context()
	project := caller(r).ProjectID
	visible := func(v ServerView) bool { return all || v.ProjectID == project }

	from := parseRevision(r.Header.Get("Last-Event-ID"))
	cur, err := s.cli.Get(ctx, s.keys.All(), clientv3.WithCountOnly())
	if err != nil {
		s.writeStoreError(w, err, "")
		return
	}
	rev := cur.Header.Revision
	if from > 0 && from <= rev {
		rev = from
	}
	views, err := s.serversAt(ctx, want, rev)
	if err != nil && rev != cur.Header.Revision {
		// Compacted: the client missed too much to replay; start now.
		rev = cur.Header.Revision
		views, err = s.serversAt(ctx, want, rev)
	}
	if err != nil {
		s.writeStoreError(w, err, "")
		return
	}

	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	send := func(id int64, event string, data any) bool {
		b, err := json.Marshal(data)
		if err != nil {
			return false
		}
		if _, err := fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", id, event, b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	last := map[string]ServerView{}
	first := []ServerView{}
	for _, id := range ids {
		if v, ok := views[id]; ok && visible(v) {
			if _, dup := last[id]; !dup {
				first = append(first, v)
			}
			last[id] = v
		}
	}
	if !send(rev, "servers", first) {
		return
	}

	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	wch := s.cli.Watch(wctx, s.keys.All(), clientv3.WithPrefix(), clientv3.WithRev(rev+1))
	beat := time.NewTicker(watchHeartbeat)
	defer beat.Stop()
	latest := rev
	for {
		select {
		case <-ctx.Done():
			return
		case <-beat.C:
			if _, err := fmt.Fprintf(w, ": idle\nid: %d\n\n", latest); err != nil || rc.Flush() != nil {
				return
			}
		case resp, ok := <-wch:
			if !ok {
				return
			}
			if err := resp.Err(); err != nil {
				s.log.Info("server watch ended", "error", err, "request_id", requestID(ctx))
				return
			}
			changed := map[string]bool{}
			for _, ev := range resp.Events {
				if id := s.serverOfKey(string(ev.Kv.Key)); want[id] {
					changed[id] = true
				}
			}
			latest = max(latest, resp.Header.Revision)
			if len(changed) == 0 {
				continue
			}
			now, err := s.serversAt(ctx, changed, resp.Header.Revision)
			if err != nil {
				s.log.Info("server watch ended", "error", err, "request_id", requestID(ctx))
				return
			}
			for _, id := range ids {
				if !changed[id] {
					continue
				}
				delete(changed, id) // an id named twice is sent once
				v, ok := now[id]
				if !ok {
					// Vanished: say so once, to a stream that showed it
					// (which keeps another project's servers unnamed).
					if _, shown := last[id]; shown {
						delete(last, id)
						if !send(resp.Header.Revision, "gone", GoneView{ID: id}) {
							return
						}
					}
					continue
				}
				if !visible(v) {
					continue
				}
				if old, seen := last[id]; seen && old.Status == v.Status && old.TaskState == v.TaskState {
					continue
				}
				last[id] = v
				if !send(resp.Header.Revision, "server", v) {
					return
				}
			}
		}
	}
}

// GoneView is the data of a "gone" event: the server that no longer
// exists.
type GoneView struct {
	ID string `json:"id"`
}

// serverOfKey is the server id a key makes the status of: its
// BuildRequest, its InstanceMapping or its instance in a cell; "" for
// any other key.
func (s *Server) serverOfKey(key string) string {
	k := s.keys
	for _, p := range []string{k.BuildRequests(), k.InstanceMappings()} {
		if id, ok := strings.CutPrefix(key, p); ok {
			return id
		}
	}
	if rest, ok := strings.CutPrefix(key, k.CellsPrefix()); ok {
		if parts := strings.Split(rest, "/"); len(parts) == 3 && parts[1] == "instances" {
			return parts[2]
		}
	}
	return ""
}

// serversAt reads the views of ids at rev, as servers.Store.Lookup
// derives them: a BuildRequest until the mapping names a cell, the
// cell's instance after. A server that does not exist at rev is absent.
func (s *Server) serversAt(ctx context.Context, ids map[string]bool, rev int64) (map[string]ServerView, error) {
	k := s.keys
	order := make([]string, 0, len(ids))
	ops := make([]clientv3.Op, 0, 2*len(ids))
	for id := range ids {
		order = append(order, id)
		ops = append(ops, clientv3.OpGet(k.InstanceMapping(id), clientv3.WithRev(rev)),
			clientv3.OpGet(k.BuildRequest(id), clientv3.WithRev(rev)))
	}
	out := map[string]ServerView{}
	var cellOps []clientv3.Op
	var cellIDs []string
	for start := 0; start < len(ops); start += 2 * watchReadBatch {
		resp, err := s.cli.Txn(ctx).Then(ops[start:min(start+2*watchReadBatch, len(ops))]...).Commit()
		if err != nil {
			return nil, fmt.Errorf("read watched servers at %d: %w", rev, err)
		}
		for i := 0; i+1 < len(resp.Responses); i += 2 {
			id := order[(start+i)/2]
			mkv := resp.Responses[i].GetResponseRange().Kvs
			bkv := resp.Responses[i+1].GetResponseRange().Kvs
			if len(mkv) == 0 {
				continue
			}
			var m etcdschema.InstanceMapping
			if err := etcdschema.Decode(string(mkv[0].Key), mkv[0].Value, &m); err != nil {
				return nil, err
			}
			if m.Cell != "" {
				cellOps = append(cellOps, clientv3.OpGet(k.CellInstance(m.Cell, id), clientv3.WithRev(rev)))
				cellIDs = append(cellIDs, id)
				continue
			}
			if len(bkv) == 0 {
				continue
			}
			var br etcdschema.BuildRequest
			if err := etcdschema.Decode(string(bkv[0].Key), bkv[0].Value, &br); err != nil {
				return nil, err
			}
			out[id] = viewFromBuildRequest(&br)
		}
	}
	for start := 0; start < len(cellOps); start += watchReadBatch {
		resp, err := s.cli.Txn(ctx).Then(cellOps[start:min(start+watchReadBatch, len(cellOps))]...).Commit()
		if err != nil {
			return nil, fmt.Errorf("read watched instances at %d: %w", rev, err)
		}
		for i, r := range resp.Responses {
			kvs := r.GetResponseRange().Kvs
			if len(kvs) == 0 {
				continue
			}
			var in etcdschema.Instance
			if err := etcdschema.Decode(string(kvs[0].Key), kvs[0].Value, &in); err != nil {
				return nil, err
			}
			out[cellIDs[start+i]] = viewFromInstance(&in)
		}
	}
	return out, nil
}

// watchReadBatch is how many servers one read transaction covers (two
// gets each), under etcd's default of 128 operations per transaction.
const watchReadBatch = 50

// parseRevision is a revision from Last-Event-ID, 0 when absent or bad.
func parseRevision(s string) int64 {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0
	}
	return n
}
