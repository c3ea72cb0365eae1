package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/gorilla/mux"

	"github.com/berth-project/berth/aggregates"
	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/audit"
)

// The /v1 aggregates routes: Berth's words over package aggregates, which
// Nova's /os-aggregates (package compute) shares. Here an aggregate's id
// is its uuid.

// ProviderAggregates is what the aggregates API needs of placement (see
// aggregates.ProviderAggregates).
type ProviderAggregates = aggregates.ProviderAggregates

// AggregateView is an aggregate as the API shows it (Nova's shape; id is
// the uuid).
type AggregateView struct {
	ID               string            `json:"id"`
	UUID             string            `json:"uuid"`
	Name             string            `json:"name"`
	AvailabilityZone *string           `json:"availability_zone"`
	Hosts            []string          `json:"hosts"`
	Metadata         map[string]string `json:"metadata"`
	Created          time.Time         `json:"created_at"`
	Updated          time.Time         `json:"updated_at"`
}

func aggregateView(a *etcdschema.Aggregate) AggregateView {
	v := AggregateView{ID: a.UUID, UUID: a.UUID, Name: a.Name, Hosts: a.Hosts, Metadata: a.Metadata,
		Created: a.CreatedAt, Updated: a.UpdatedAt}
	if v.Updated.IsZero() {
		v.Updated = a.CreatedAt // /v1 always showed a time
	}
	if z := a.AvailabilityZone(); z != "" {
		v.AvailabilityZone = &z
	}
	if v.Hosts == nil {
		v.Hosts = []string{}
	}
	if v.Metadata == nil {
		v.Metadata = map[string]string{}
	}
	return v
}

// aggregateError words an error of package aggregates for /v1; id and
// host are the request's.
func (s *Server) aggregateError(w http.ResponseWriter, err error, id, host string) {
	var (
		exists   *aggregates.NameExistsError
		notEmpty *aggregates.NotEmptyError
		conflict *aggregates.ZoneConflictError
		servers  *aggregates.ServersInZoneError
		mirror   *aggregates.MirrorError
	)
	switch {
	case errors.Is(err, aggregates.ErrNotFound):
		writeError(w, http.StatusNotFound, fmt.Sprintf("Aggregate %s could not be found.", id))
	case errors.Is(err, aggregates.ErrHostNotFound):
		writeError(w, http.StatusNotFound, fmt.Sprintf("Compute host %s could not be found.", host))
	case errors.Is(err, aggregates.ErrHostExists):
		writeError(w, http.StatusConflict, fmt.Sprintf("Host %s is already in aggregate %s.", host, id))
	case errors.Is(err, aggregates.ErrHostNotInAggregate):
		writeError(w, http.StatusNotFound, fmt.Sprintf("Host %s is not in aggregate %s.", host, id))
	case errors.Is(err, aggregates.ErrContention):
		writeError(w, http.StatusConflict, "Aggregates kept changing; try again.")
	case errors.As(err, &exists):
		writeError(w, http.StatusConflict, fmt.Sprintf("Aggregate %s already exists.", exists.Name))
	case errors.As(err, &notEmpty):
		writeError(w, http.StatusBadRequest, fmt.Sprintf("Cannot delete aggregate %s: it still has hosts %s; remove them first.",
			id, strings.Join(notEmpty.Hosts, ", ")))
	case errors.As(err, &conflict) && host != "":
		writeError(w, http.StatusConflict, fmt.Sprintf(
			"Cannot add host %s to aggregate %s: it is already in availability zone(s) %s, and a host is in one zone at most.",
			host, id, strings.Join(conflict.Others, ", ")))
	case errors.As(err, &conflict):
		writeError(w, http.StatusConflict, fmt.Sprintf(
			"Cannot put aggregate %s in availability zone %s: its host %s is already in %s, and a host is in one zone at most.",
			id, conflict.Zone, conflict.Host, strings.Join(conflict.Others, ", ")))
	case errors.As(err, &servers):
		writeError(w, http.StatusConflict, fmt.Sprintf(
			"Cannot change the availability zone of aggregate %s: its host %s runs %d server(s) in the current zone.",
			id, servers.Host, servers.Servers))
	case errors.As(err, &mirror):
		writeError(w, http.StatusServiceUnavailable, fmt.Sprintf(
			"Aggregate %s was changed but placement could not be updated for host %s: %v. Add the host again (or sync) to retry.",
			id, mirror.Host, mirror.Err))
	default:
		s.writeStoreError(w, err, "")
	}
}

type aggregateBody struct {
	Aggregate *struct {
		Name             string  `json:"name"`
		AvailabilityZone *string `json:"availability_zone"`
	} `json:"aggregate"`
}

func (s *Server) createAggregate(w http.ResponseWriter, r *http.Request) {
	var body aggregateBody
	if err := decodeBody(w, r, &body); err != nil {
		writeBodyError(w, err)
		return
	}
	b := body.Aggregate
	if b == nil || strings.TrimSpace(b.Name) == "" || len(b.Name) > 255 {
		writeError(w, http.StatusBadRequest, "Invalid input: 'aggregate' with a 'name' of 1 to 255 characters is required.")
		return
	}
	if msg := checkDisplayName("name", b.Name); msg != "" {
		writeError(w, http.StatusBadRequest, msg)
		return
	}
	zone := ""
	if b.AvailabilityZone != nil {
		if msg := validZone(*b.AvailabilityZone); msg != "" {
			writeError(w, http.StatusBadRequest, msg)
			return
		}
		zone = *b.AvailabilityZone
	}
	a, err := s.aggs.Create(r.Context(), b.Name, zone)
	if err != nil {
		s.aggregateError(w, err, "", "")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"aggregate": aggregateView(a)})
}

// validZone applies Nova's rule that an AZ name is not empty and has no
// colon (the API's "az:host" syntax uses it): "" if z passes, else the
// answer's message.
func validZone(z string) string {
	if strings.TrimSpace(z) == "" || len(z) > 255 || strings.Contains(z, ":") {
		return fmt.Sprintf("Invalid input: availability zone %q must be 1 to 255 characters without ':'.", z)
	}
	return ""
}

func (s *Server) listAggregates(w http.ResponseWriter, r *http.Request) {
	set, err := s.aggs.List(r.Context())
	if err != nil {
		s.writeStoreError(w, err, "")
		return
	}
	out := []AggregateView{}
	for _, a := range set.All() {
		out = append(out, aggregateView(a))
	}
	writeJSON(w, http.StatusOK, map[string]any{"aggregates": out})
}

func (s *Server) showAggregate(w http.ResponseWriter, r *http.Request) {
	id := mux.Vars(r)["id"]
	a, err := s.aggs.Find(r.Context(), aggregates.ByUUID(id))
	if err != nil {
		s.aggregateError(w, err, id, "")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"aggregate": aggregateView(a)})
}

func (s *Server) deleteAggregate(w http.ResponseWriter, r *http.Request) {
	id := mux.Vars(r)["id"]
	if err := s.aggs.Delete(r.Context(), aggregates.ByUUID(id)); err != nil {
		s.aggregateError(w, err, id, "")
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

type aggregateAction struct {
	AddHost *struct {
		Host string `json:"host"`
	} `json:"add_host"`
	RemoveHost *struct {
		Host string `json:"host"`
	} `json:"remove_host"`
	SetMetadata *struct {
		Metadata map[string]*string `json:"metadata"`
	} `json:"set_metadata"`
}

// aggregateAction is Nova's POST /os-aggregates/{id}/action: add_host,
// remove_host or set_metadata (a null value deletes a key).
func (s *Server) aggregateAction(w http.ResponseWriter, r *http.Request) {
	id := mux.Vars(r)["id"]
	var act aggregateAction
	if err := decodeBody(w, r, &act); err != nil {
		writeBodyError(w, err)
		return
	}
	n := 0
	for i, set := range []bool{act.AddHost != nil, act.RemoveHost != nil, act.SetMetadata != nil} {
		if set {
			n++
			audit.Action(r.Context(), []string{"add_host", "remove_host", "set_metadata"}[i])
		}
	}
	if n != 1 {
		writeError(w, http.StatusBadRequest, "Invalid input: give exactly one of add_host, remove_host, set_metadata.")
		return
	}
	for _, h := range []*struct {
		Host string `json:"host"`
	}{act.AddHost, act.RemoveHost} {
		if h == nil {
			continue
		}
		if msg := checkHostName("host", h.Host); msg != "" {
			writeError(w, http.StatusBadRequest, msg)
			return
		}
	}
	var (
		out  *etcdschema.Aggregate
		err  error
		host string
		ref  = aggregates.ByUUID(id)
	)
	switch {
	case act.AddHost != nil:
		host = act.AddHost.Host
		out, err = s.aggs.AddHost(r.Context(), ref, host)
	case act.RemoveHost != nil:
		host = act.RemoveHost.Host
		out, err = s.aggs.RemoveHost(r.Context(), ref, host)
	default:
		if msg := checkMetadata(act.SetMetadata.Metadata); msg != "" {
			writeError(w, http.StatusBadRequest, msg)
			return
		}
		out, err = s.aggs.SetMetadata(r.Context(), ref, act.SetMetadata.Metadata)
	}
	if err != nil {
		s.aggregateError(w, err, id, host)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"aggregate": aggregateView(out)})
}

// checkMetadata is /v1's check of set_metadata's keys and values.
func checkMetadata(meta map[string]*string) string {
	for k, v := range meta {
		if k == "" || len(k) > 255 || (v != nil && len(*v) > 255) {
			return fmt.Sprintf("Invalid input: metadata keys and values must be 1 to 255 characters (key %q).", k)
		}
		if k == etcdschema.AggregateAZKey && v != nil {
			if msg := validZone(*v); msg != "" {
				return msg
			}
		}
	}
	return ""
}

// syncAggregates is nova-manage placement sync_aggregates (see
// aggregates.Store.Sync).
func (s *Server) syncAggregates(w http.ResponseWriter, r *http.Request) {
	res, err := s.aggs.Sync(r.Context())
	if err != nil {
		s.writeStoreError(w, err, "")
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// SyncResult is what an aggregate sync did.
type SyncResult = aggregates.SyncResult

// updateAggregate is Nova's PUT /os-aggregates/{id}: a new name and/or
// availability zone ("" or null removes the zone).
func (s *Server) updateAggregate(w http.ResponseWriter, r *http.Request) {
	id := mux.Vars(r)["id"]
	var body struct {
		Aggregate *struct {
			Name             *string         `json:"name"`
			AvailabilityZone json.RawMessage `json:"availability_zone"`
		} `json:"aggregate"`
	}
	if err := decodeBody(w, r, &body); err != nil {
		writeBodyError(w, err)
		return
	}
	b := body.Aggregate
	if b == nil || (b.Name == nil && b.AvailabilityZone == nil) {
		writeError(w, http.StatusBadRequest, "Invalid input: 'aggregate' with a 'name' or an 'availability_zone' is required.")
		return
	}
	if b.Name != nil && (strings.TrimSpace(*b.Name) == "" || len(*b.Name) > 255) {
		writeError(w, http.StatusBadRequest, "Invalid input: 'name' must be 1 to 255 characters.")
		return
	}
	if b.Name != nil {
		if msg := checkDisplayName("name", *b.Name); msg != "" {
			writeError(w, http.StatusBadRequest, msg)
			return
		}
	}
	var zone *string // nil: unchanged; "": remove
	if b.AvailabilityZone != nil {
		var z *string
		if err := json.Unmarshal(b.AvailabilityZone, &z); err != nil {
			writeError(w, http.StatusBadRequest, "Invalid input: 'availability_zone' must be a string or null.")
			return
		}
		if z == nil {
			z = new(string)
		}
		if *z != "" {
			if msg := validZone(*z); msg != "" {
				writeError(w, http.StatusBadRequest, msg)
				return
			}
		}
		zone = z
	}
	out, err := s.aggs.Update(r.Context(), aggregates.ByUUID(id), b.Name, zone)
	if err != nil {
		s.aggregateError(w, err, id, "")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"aggregate": aggregateView(out)})
}
