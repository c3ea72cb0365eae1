package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"time"

	"github.com/google/uuid"
	"github.com/gorilla/mux"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
)

// validName is what a cell or host name may be: it is a segment of etcd
// keys, so no "/" and nothing a shell or URL would mangle.
var validName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)

// CellView is a cell with the number of hosts mapped to it.
type CellView struct {
	Name      string    `json:"name"`
	UUID      string    `json:"uuid"`
	Disabled  bool      `json:"disabled"`
	Hosts     int       `json:"hosts"`
	CreatedAt time.Time `json:"created_at"`
}

// readCells lists the cell records. They sit directly under the cells
// prefix, beside each cell's instances and retries, so rather than reading
// every instance the walk reads one key at a time and jumps over each
// cell's subtree: two small reads per cell.
func (s *Server) readCells(ctx context.Context) (map[string]*etcdschema.Cell, error) {
	out := map[string]*etcdschema.Cell{}
	prefix := s.keys.CellsPrefix()
	end := clientv3.GetPrefixRangeEnd(prefix)
	from := prefix
	for {
		resp, err := s.cli.Get(ctx, from, clientv3.WithRange(end), clientv3.WithLimit(1))
		if err != nil {
			return nil, fmt.Errorf("list cells: %w", err)
		}
		if len(resp.Kvs) == 0 {
			return out, nil
		}
		key := string(resp.Kvs[0].Key)
		if name, ok := etcdschema.LastSegment(key, prefix); ok {
			var c etcdschema.Cell
			if err := etcdschema.Decode(key, resp.Kvs[0].Value, &c); err != nil {
				s.log.Warn("skipping unreadable cell record", "error", err)
			} else {
				out[name] = &c
			}
			// The next key: another cell named name+"-…" or name+".…"
			// (both sort before "/"), or this cell's subtree.
			from = key + "\x00"
			continue
		}
		// Inside a subtree (of a cell, or of cell0 which has no record):
		// "0" sorts right after "/", so this is the first key past it.
		from = prefix + etcdschema.FirstSegment(key, prefix) + "0"
	}
}

func (s *Server) listCells(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	cells, err := s.readCells(ctx)
	if err != nil {
		s.writeStoreError(w, err, "")
		return
	}
	maps, err := s.cli.Get(ctx, s.keys.HostMappings(), clientv3.WithPrefix())
	if err != nil {
		s.writeStoreError(w, err, "")
		return
	}
	count := map[string]int{}
	for _, kv := range maps.Kvs {
		var m etcdschema.HostMapping
		if etcdschema.Decode(string(kv.Key), kv.Value, &m) == nil {
			count[m.Cell]++
		}
	}
	out := make([]CellView, 0, len(cells))
	for name, c := range cells {
		out = append(out, CellView{Name: name, UUID: c.UUID, Disabled: c.Disabled, Hosts: count[name], CreatedAt: c.CreatedAt})
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Name < out[b].Name })
	writeJSON(w, http.StatusOK, map[string]any{"cells": out})
}

// createCell records a cell (Nova's `nova-manage cell_v2 create_cell`).
// Agents of the cell then map their hosts on their next provider sync, or
// at once with discover_hosts.
func (s *Server) createCell(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Name string `json:"name"`
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		writeBodyError(w, err)
		return
	}
	switch {
	case !validName.MatchString(body.Name):
		writeError(w, http.StatusBadRequest, fmt.Sprintf("Invalid input: cell name %q must be 1-63 letters, digits, '.', '_' or '-', starting with a letter or digit.", body.Name))
		return
	case body.Name == etcdschema.Cell0:
		writeError(w, http.StatusBadRequest, "Invalid input: cell0 is reserved for instances that could not be scheduled.")
		return
	}
	c := &etcdschema.Cell{Name: body.Name, UUID: uuid.NewString(), CreatedAt: time.Now().UTC()}
	key := s.keys.Cell(body.Name)
	resp, err := s.cli.Txn(r.Context()).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, etcdschema.MustEncode(c))).Commit()
	if err != nil {
		s.writeStoreError(w, err, "")
		return
	}
	if !resp.Succeeded {
		writeError(w, http.StatusConflict, fmt.Sprintf("Cell %s already exists.", body.Name))
		return
	}
	s.log.Info("cell created", "cell", body.Name, "request_id", requestID(r.Context()))
	writeJSON(w, http.StatusCreated, map[string]any{"cell": CellView{Name: c.Name, UUID: c.UUID, CreatedAt: c.CreatedAt}})
}

// DiscoveredHost is one host discover_hosts looked at.
type DiscoveredHost struct {
	Host   string `json:"host"`
	Cell   string `json:"cell"`
	Reason string `json:"reason,omitempty"` // why it stays unmapped
}

// discoverHosts maps every registered host whose cell exists and that has
// no host mapping yet (Nova's `nova-manage cell_v2 discover_hosts`): hosts
// whose agents registered before their cell was created.
func (s *Server) discoverHosts(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	hosts, _, err := s.hosts.Read(ctx)
	if err != nil {
		s.writeStoreError(w, err, "")
		return
	}
	cells, err := s.readCells(ctx)
	if err != nil {
		s.writeStoreError(w, err, "")
		return
	}
	mapped, unmapped := []DiscoveredHost{}, []DiscoveredHost{}
	names := make([]string, 0, len(hosts))
	for h := range hosts {
		names = append(names, h)
	}
	sort.Strings(names)
	for _, h := range names {
		cell := hosts[h].Service.Cell
		if cells[cell] == nil {
			unmapped = append(unmapped, DiscoveredHost{Host: h, Cell: cell, Reason: fmt.Sprintf("cell %s does not exist", cell)})
			continue
		}
		m := &etcdschema.HostMapping{Host: h, Cell: cell, CreatedAt: time.Now().UTC()}
		resp, err := s.cli.Txn(ctx).If(
			clientv3.Compare(clientv3.CreateRevision(s.keys.Cell(cell)), ">", 0),
			clientv3.Compare(clientv3.CreateRevision(s.keys.HostMapping(h)), "=", 0),
		).Then(clientv3.OpPut(s.keys.HostMapping(h), etcdschema.MustEncode(m))).Commit()
		if err != nil {
			s.writeStoreError(w, err, "")
			return
		}
		if resp.Succeeded {
			mapped = append(mapped, DiscoveredHost{Host: h, Cell: cell})
		}
	}
	s.log.Info("hosts discovered", "mapped", len(mapped), "unmapped", len(unmapped), "request_id", requestID(ctx))
	writeJSON(w, http.StatusOK, map[string]any{"mapped": mapped, "unmapped": unmapped})
}

// SelectionView is what the cell conductors have left to retry a build on
// and what was tried (seed return-alternate-hosts).
type SelectionView struct {
	Instance string `json:"instance"`
	// AttemptsMade is the instance's build count; it outlives the record.
	AttemptsMade int                 `json:"attempts_made"`
	Status       string              `json:"status"`
	Host         string              `json:"host,omitempty"`
	Cell         string              `json:"cell,omitempty"`
	MaxAttempts  int                 `json:"max_attempts"`
	Attempts     []AttemptView       `json:"attempts"`
	Alternates   []AlternateHostView `json:"alternates"`
	// Kept is false once the alternates record is gone: the instance went
	// ACTIVE (the record is deleted then) or was never scheduled.
	Kept bool `json:"kept"`
}

// AttemptView is one build try.
type AttemptView struct {
	Host   string    `json:"host"`
	Reason string    `json:"reason,omitempty"`
	At     time.Time `json:"at"`
}

// AlternateHostView is one alternate left.
type AlternateHostView struct {
	Host string `json:"host"`
	Node string `json:"node"`
	Cell string `json:"cell"`
}

func (s *Server) showSelection(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	id := mux.Vars(r)["id"]
	v, err := s.servers.Lookup(ctx, id)
	if err != nil {
		s.writeStoreError(w, err, fmt.Sprintf("Instance %s could not be found.", id))
		return
	}
	sel, err := s.servers.SelectionOf(ctx, v)
	if err != nil {
		s.writeStoreError(w, err, "")
		return
	}
	out := SelectionView{Instance: sel.Instance, AttemptsMade: sel.AttemptsMade, Status: sel.Status, Host: sel.Host,
		Cell: sel.Cell, MaxAttempts: sel.MaxAttempts, Kept: sel.Kept,
		Attempts: make([]AttemptView, 0, len(sel.Attempts)), Alternates: make([]AlternateHostView, 0, len(sel.Alternates))}
	for _, a := range sel.Attempts {
		out.Attempts = append(out.Attempts, AttemptView{Host: a.Host, Reason: a.Reason, At: a.At})
	}
	for _, a := range sel.Alternates {
		out.Alternates = append(out.Alternates, AlternateHostView{Host: a.Host, Node: a.Node, Cell: a.Cell})
	}
	writeJSON(w, http.StatusOK, map[string]any{"selection": out})
}
