package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/gorilla/mux"

	"github.com/berth-project/berth/drain"
	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/hosts"
	"github.com/berth-project/berth/placement"
)

// Host drains (package drain): POST starts one, GET shows its progress,
// DELETE cancels it. Admin only, as services are.

// DrainView is a host's drain as /v1 shows it.
type DrainView struct {
	Host        string            `json:"host"`
	Live        bool              `json:"live"`
	Parallel    int               `json:"parallel"`
	Deadline    *time.Time        `json:"deadline"`
	State       string            `json:"state"`
	Error       string            `json:"error,omitempty"`
	RequestID   string            `json:"request_id"`
	Counts      map[string]int    `json:"counts"`
	Instances   []DrainServerView `json:"instances"`
	RequestedAt time.Time         `json:"requested_at"`
	UpdatedAt   time.Time         `json:"updated_at"`
	FinishedAt  *time.Time        `json:"finished_at"`
	// Warning is set when the host's disable was recorded but its agent
	// did not confirm the disabled trait in time (POST only).
	Warning string `json:"warning,omitempty"`
}

// DrainServerView is one server's progress in a drain.
type DrainServerView struct {
	UUID          string     `json:"uuid"`
	State         string     `json:"state"`
	MigrationUUID string     `json:"migration_uuid,omitempty"`
	DestHost      string     `json:"dest_host,omitempty"`
	Reason        string     `json:"reason,omitempty"`
	StartedAt     *time.Time `json:"started_at,omitempty"`
	FinishedAt    *time.Time `json:"finished_at,omitempty"`
}

// NewDrainView is d as /v1 shows it.
func NewDrainView(d *etcdschema.HostDrain) DrainView {
	v := DrainView{Host: d.Host, Live: d.Live, Parallel: d.Parallel, Deadline: d.Deadline, State: d.State, Error: d.Error,
		RequestID: d.RequestID, Counts: d.Counts(), Instances: make([]DrainServerView, 0, len(d.Instances)),
		RequestedAt: d.RequestedAt, UpdatedAt: d.UpdatedAt, FinishedAt: d.FinishedAt}
	for _, s := range d.Instances {
		v.Instances = append(v.Instances, DrainServerView{UUID: s.UUID, State: s.State, MigrationUUID: s.MigrationUUID,
			DestHost: s.DestHost, Reason: s.Reason, StartedAt: s.StartedAt, FinishedAt: s.FinishedAt})
	}
	return v
}

// DrainRequest is the body of POST /v1/hosts/{host}/drain; every field
// is optional.
type DrainRequest struct {
	Live bool `json:"live,omitempty"`
	// Deadline is a duration ("90m", "2h"); empty: none.
	Deadline string `json:"deadline,omitempty"`
	// Parallel is how many moves at once (0: drain.DefaultParallel).
	Parallel int `json:"parallel,omitempty"`
}

func (s *Server) startDrain(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	host := mux.Vars(r)["host"]
	var body DrainRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		writeBodyError(w, err)
		return
	}
	req := drain.Request{Live: body.Live, Parallel: body.Parallel, RequestID: requestID(ctx)}
	if body.Deadline != "" {
		d, err := time.ParseDuration(body.Deadline)
		if err != nil || d <= 0 {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("Invalid input: 'deadline' must be a positive duration such as \"90m\", not %q", body.Deadline))
			return
		}
		req.Deadline = d
	}
	if err := req.Validate(); err != nil {
		writeError(w, http.StatusBadRequest, "Invalid input: "+err.Error())
		return
	}
	st, err := s.drains.Start(ctx, host, req, s.TraitSyncTimeout)
	if err != nil {
		s.writeDrainError(w, host, err)
		return
	}
	view := NewDrainView(st.Drain)
	if st.Unconfirmed != nil {
		view.Warning = fmt.Sprintf("the host is disabled, but its agent did not confirm the %s trait: %v; "+
			"its periodic provider sync will", placement.TraitComputeStatusDisabled, st.Unconfirmed)
	}
	s.log.Info("host drain requested", "host", host, "servers", len(view.Instances), "live", req.Live,
		"parallel", view.Parallel, "deadline", req.Deadline, "request_id", requestID(ctx))
	writeJSON(w, http.StatusAccepted, map[string]any{"drain": view})
}

func (s *Server) showDrain(w http.ResponseWriter, r *http.Request) {
	host := mux.Vars(r)["host"]
	d, err := s.drains.Get(r.Context(), host)
	if err != nil {
		s.writeDrainError(w, host, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"drain": NewDrainView(d)})
}

func (s *Server) cancelDrain(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	host := mux.Vars(r)["host"]
	d, err := s.drains.Cancel(ctx, host)
	if err != nil {
		s.writeDrainError(w, host, err)
		return
	}
	s.log.Info("host drain cancelled", "host", host, "counts", d.Counts(), "request_id", requestID(ctx))
	writeJSON(w, http.StatusOK, map[string]any{"drain": NewDrainView(d)})
}

// writeDrainError answers a drain operation's error with its status.
func (s *Server) writeDrainError(w http.ResponseWriter, host string, err error) {
	switch {
	case errors.Is(err, hosts.ErrNotFound):
		writeError(w, http.StatusNotFound, fmt.Sprintf("Compute host %s could not be found.", host))
	case errors.Is(err, drain.ErrNoDrain):
		writeError(w, http.StatusNotFound, fmt.Sprintf("Host %s has no drain.", host))
	case errors.Is(err, drain.ErrAlreadyDraining):
		writeError(w, http.StatusConflict, fmt.Sprintf("Host %s is already draining; cancel that drain first.", host))
	case errors.Is(err, drain.ErrNotDraining):
		writeError(w, http.StatusConflict, fmt.Sprintf("The drain of host %s has already ended.", host))
	case errors.Is(err, drain.ErrLiveUnavailable):
		writeError(w, http.StatusBadRequest, "Invalid input: "+err.Error()+"; drain without --live for cold migrations")
	case errors.Is(err, hosts.ErrKeptChanging), errors.Is(err, drain.ErrKeptChanging):
		writeError(w, http.StatusConflict, fmt.Sprintf("Host %s kept changing; try again.", host))
	default:
		s.writeStoreError(w, err, "")
	}
}
