package scheduler

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/gorilla/mux"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/httpserve"
	"github.com/berth-project/berth/internal/metrics"
)

// SelectPath is the scheduler's one HTTP route.
const SelectPath = "/v1/select_destinations"

// maxSpecBytes bounds a request body: a RequestSpec is a few KiB even for
// a multi-create of hundreds of instances.
const maxSpecBytes = 4 << 20

// SelectResponse is the body of a 200 answer: per instance, in the order
// of the spec's instance_uuids, the chosen Selection (claimed) followed by
// its alternates (unclaimed).
type SelectResponse struct {
	Selections [][]etcdschema.Selection `json:"selections"`
}

// ErrorBody is the body of every non-200 answer. Type is "NoValidHost"
// (409, with Reason, Filters and RequestedHost), "BadRequest" (400) or
// "SchedulerError" (500).
type ErrorBody struct {
	Error struct {
		Type          string         `json:"type"`
		Message       string         `json:"message"`
		Reason        string         `json:"reason,omitempty"`
		Filters       []FilterCount  `json:"filters,omitempty"`
		RequestedHost *HostRejection `json:"requested_host,omitempty"`
	} `json:"error"`
}

// Handler serves select_destinations over HTTP (JSON). The request's
// context is the scheduling context: a caller that gives up (timeout,
// disconnect) cancels the claims in flight, and any claim already made is
// rolled back guarded by its revision (see rollback).
func (s *Scheduler) Handler() http.Handler {
	r := mux.NewRouter()
	r.Use(metrics.RouteLabel) // the route template for berth_http_requests_total
	r.HandleFunc(SelectPath, s.serveSelect).Methods(http.MethodPost)
	r.NotFoundHandler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusNotFound, "NotFound", "the scheduler serves only POST "+SelectPath)
	})
	r.MethodNotAllowedHandler = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		writeError(w, http.StatusMethodNotAllowed, "MethodNotAllowed", req.Method+" "+req.URL.Path+" is not allowed; use POST")
	})
	return r
}

func (s *Scheduler) serveSelect(w http.ResponseWriter, r *http.Request) {
	var spec RequestSpec
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxSpecBytes))
	if err := dec.Decode(&spec); err != nil {
		if limit, tooLarge := httpserve.BodyTooLarge(err); tooLarge {
			writeError(w, http.StatusRequestEntityTooLarge, "RequestTooLarge", fmt.Sprintf("a RequestSpec is at most %d bytes", limit))
			return
		}
		writeError(w, http.StatusBadRequest, "BadRequest", fmt.Sprintf("request body is not a RequestSpec: %v", err))
		return
	}
	if err := spec.validate(); err != nil {
		writeError(w, http.StatusBadRequest, "BadRequest", err.Error())
		return
	}
	sels, err := s.SelectDestinations(r.Context(), &spec)
	var nvh *NoValidHostError
	switch {
	case errors.As(err, &nvh):
		var body ErrorBody
		body.Error.Type, body.Error.Message = "NoValidHost", nvh.Error()
		body.Error.Reason, body.Error.Filters, body.Error.RequestedHost = nvh.Reason, nvh.Removed, nvh.RequestedHost
		writeJSON(w, http.StatusConflict, body)
	case err != nil:
		s.log.Warn("select_destinations failed", "request_id", spec.RequestID, "error", err)
		writeError(w, http.StatusInternalServerError, "SchedulerError", err.Error())
	default:
		writeJSON(w, http.StatusOK, SelectResponse{Selections: sels})
	}
}

// validate rejects a spec that could never be scheduled, naming the field.
func (spec *RequestSpec) validate() error {
	if len(spec.InstanceUUIDs) == 0 {
		return errors.New("instance_uuids: at least one instance uuid is required")
	}
	seen := make(map[string]bool, len(spec.InstanceUUIDs))
	for i, u := range spec.InstanceUUIDs {
		if etcdschema.CheckSegment(u) != nil {
			return fmt.Errorf("instance_uuids[%d]: %q is not an instance uuid", i, u)
		}
		if seen[u] {
			return fmt.Errorf("instance_uuids[%d]: %q is listed twice", i, u)
		}
		seen[u] = true
	}
	// Ids the claim puts in keys (a group's members and slots): the API
	// checked them as UUIDs; a caller of this endpoint may not have.
	if h := spec.Hints.Group; h != "" && etcdschema.CheckSegment(h) != nil {
		return fmt.Errorf("scheduler_hints.group: %q is not a server group uuid", h)
	}
	for _, ids := range [][]string{spec.Hints.SameHost, spec.Hints.DifferentHost} {
		for _, u := range ids {
			if etcdschema.CheckSegment(u) != nil {
				return fmt.Errorf("scheduler_hints: %q is not an instance uuid", u)
			}
		}
	}
	return nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, typ, msg string) {
	var body ErrorBody
	body.Error.Type, body.Error.Message = typ, msg
	writeJSON(w, status, body)
}

// Remote is a client of one scheduler's HTTP endpoint.
type Remote struct {
	// URL is the scheduler's base URL, e.g. "http://10.0.0.5:8775".
	URL    string
	Client *http.Client
}

// SelectDestinations asks the remote scheduler. NoValidHost comes back as
// *NoValidHostError, exactly as from an in-process scheduler; any other
// failure is an error the caller may fail over on.
func (r *Remote) SelectDestinations(ctx context.Context, spec *RequestSpec) ([][]etcdschema.Selection, error) {
	body, err := json.Marshal(spec)
	if err != nil {
		return nil, fmt.Errorf("encode request spec: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(r.URL, "/")+SelectPath, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("scheduler %s: %w", r.URL, err)
	}
	req.Header.Set("Content-Type", "application/json")
	cli := r.Client
	if cli == nil {
		cli = http.DefaultClient
	}
	resp, err := cli.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scheduler %s: %w", r.URL, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("scheduler %s: read answer: %w", r.URL, err)
	}
	if resp.StatusCode == http.StatusOK {
		var out SelectResponse
		if err := json.Unmarshal(data, &out); err != nil {
			return nil, fmt.Errorf("scheduler %s: decode answer: %w", r.URL, err)
		}
		if len(out.Selections) != len(spec.InstanceUUIDs) {
			return nil, fmt.Errorf("scheduler %s: answered %d selection lists for %d instances", r.URL, len(out.Selections), len(spec.InstanceUUIDs))
		}
		for i, l := range out.Selections {
			if len(l) == 0 {
				return nil, fmt.Errorf("scheduler %s: no selection for instance %s", r.URL, spec.InstanceUUIDs[i])
			}
		}
		return out.Selections, nil
	}
	var eb ErrorBody
	if err := json.Unmarshal(data, &eb); err != nil || eb.Error.Type == "" {
		return nil, fmt.Errorf("scheduler %s: HTTP %d: %.200s", r.URL, resp.StatusCode, data)
	}
	if resp.StatusCode == http.StatusConflict && eb.Error.Type == "NoValidHost" {
		return nil, &NoValidHostError{Reason: eb.Error.Reason, Removed: eb.Error.Filters, RequestedHost: eb.Error.RequestedHost}
	}
	return nil, fmt.Errorf("scheduler %s: HTTP %d %s: %s", r.URL, resp.StatusCode, eb.Error.Type, eb.Error.Message)
}
