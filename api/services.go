package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/gorilla/mux"

	"github.com/berth-project/berth/hosts"
	"github.com/berth-project/berth/placement"
)

// DefaultTraitSyncTimeout is how long PUT /v1/services/{host} waits for an
// up agent to confirm COMPUTE_STATUS_DISABLED on its provider.
const DefaultTraitSyncTimeout = hosts.DefaultTraitSyncTimeout

// ServiceView is a compute service in Nova's os-services words.
type ServiceView struct {
	Host           string    `json:"host"`
	Cell           string    `json:"cell"`
	State          string    `json:"state"`  // "up" or "down"
	Status         string    `json:"status"` // "enabled" or "disabled"
	DisabledReason string    `json:"disabled_reason"`
	ForcedDown     bool      `json:"forced_down"`
	FailedBuilds   int       `json:"failed_builds"`
	AgentVersion   string    `json:"agent_version,omitempty"`
	UpdatedAt      time.Time `json:"updated_at"`
	// Warning is set when a change was recorded but the agent did not
	// confirm the disabled trait in time (PUT only).
	Warning string `json:"warning,omitempty"`
}

func serviceView(h *hosts.Host) ServiceView {
	v := ServiceView{Host: h.Service.Host, Cell: h.Service.Cell, State: "down", Status: "enabled",
		DisabledReason: h.Service.DisabledReason, ForcedDown: h.Service.ForcedDown, FailedBuilds: h.Service.FailedBuilds,
		AgentVersion: h.Service.AgentVersion, UpdatedAt: h.Service.UpdatedAt}
	if h.Up() {
		v.State = "up"
	}
	if h.Service.Disabled {
		v.Status = "disabled"
	}
	return v
}

func (s *Server) listServices(w http.ResponseWriter, r *http.Request) {
	all, _, err := s.hosts.Read(r.Context())
	if err != nil {
		s.writeStoreError(w, err, "")
		return
	}
	out := make([]ServiceView, 0, len(all))
	for _, h := range hosts.Sorted(all) {
		out = append(out, serviceView(h))
	}
	writeJSON(w, http.StatusOK, map[string]any{"services": out})
}

// serviceUpdate is the body of PUT /v1/services/{host}; absent fields are
// left as they are.
type serviceUpdate struct {
	Status         *string `json:"status"`
	DisabledReason *string `json:"disabled_reason"`
	ForcedDown     *bool   `json:"forced_down"`
}

func (u *serviceUpdate) validate() error {
	if u.Status == nil && u.ForcedDown == nil {
		return errors.New("give at least one of 'status' (\"enabled\" or \"disabled\") and 'forced_down'")
	}
	if u.Status != nil && *u.Status != "enabled" && *u.Status != "disabled" {
		return fmt.Errorf("'status' must be \"enabled\" or \"disabled\", not %q", *u.Status)
	}
	if u.DisabledReason != nil {
		if u.Status == nil || *u.Status != "disabled" {
			return errors.New("'disabled_reason' is only accepted with \"status\": \"disabled\"")
		}
		if len(*u.DisabledReason) > 255 {
			return errors.New("'disabled_reason' must be at most 255 characters")
		}
	}
	return nil
}

// updateService records an operator's change to a service and, for a
// status change of an up host, waits for its agent's trait
// (hosts.Store.Update); a wait that timed out is a warning in the answer.
func (s *Server) updateService(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	host := mux.Vars(r)["host"]
	var u serviceUpdate
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&u); err != nil {
		writeBodyError(w, err)
		return
	}
	if err := u.validate(); err != nil {
		writeError(w, http.StatusBadRequest, "Invalid input: "+err.Error())
		return
	}
	ch := hosts.Change{DisabledReason: u.DisabledReason, ForcedDown: u.ForcedDown}
	if u.Status != nil {
		ch.Disabled = new(bool)
		*ch.Disabled = *u.Status == "disabled"
	}
	res, err := s.hosts.Update(ctx, host, ch, s.TraitSyncTimeout)
	switch {
	case errors.Is(err, hosts.ErrNotFound):
		writeError(w, http.StatusNotFound, fmt.Sprintf("Compute host %s could not be found.", host))
		return
	case errors.Is(err, hosts.ErrKeptChanging):
		writeError(w, http.StatusConflict, fmt.Sprintf("Service %s kept changing; try again.", host))
		return
	case err != nil:
		s.writeStoreError(w, err, "")
		return
	}
	view := serviceView(res.Host)
	s.log.Info("service updated", "host", host, "status", view.Status, "reason", view.DisabledReason,
		"forced_down", view.ForcedDown, "state", view.State, "request_id", requestID(ctx))
	if res.Unconfirmed != nil {
		view.Warning = fmt.Sprintf("%s is recorded, but the agent did not confirm the %s trait: %v; "+
			"its periodic provider sync will", view.Status, placement.TraitComputeStatusDisabled, res.Unconfirmed)
	}
	writeJSON(w, http.StatusOK, map[string]any{"service": view})
}

// HostView is a compute host with its capacity and usage from placement.
type HostView struct {
	Host      string                   `json:"host"`
	Cell      string                   `json:"cell"`
	Mapped    bool                     `json:"mapped"` // a host mapping to Cell exists
	State     string                   `json:"state"`
	Status    string                   `json:"status"`
	Instances int                      `json:"instances"`
	Provider  string                   `json:"provider_uuid"`
	Resources map[string]ResourceUsage `json:"resources"`
}

// ResourceUsage is one resource class of a host's compute node provider.
type ResourceUsage struct {
	Used     int64 `json:"used"`
	Capacity int64 `json:"capacity"`
}

func (s *Server) listHosts(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	all, rev, err := s.hosts.Read(ctx)
	if err != nil {
		s.writeStoreError(w, err, "")
		return
	}
	// Providers and mappings at the same revision as the hosts.
	provs, err := s.hosts.Providers(ctx, rev)
	if err != nil {
		s.writeStoreError(w, err, "")
		return
	}
	mapped, err := s.hosts.Mappings(ctx, rev)
	if err != nil {
		s.writeStoreError(w, err, "")
		return
	}
	out := make([]HostView, 0, len(all))
	for _, h := range hosts.Sorted(all) {
		sv := serviceView(h)
		hv := HostView{Host: sv.Host, Cell: sv.Cell, State: sv.State, Status: sv.Status,
			Instances: len(h.Instances), Provider: h.Service.ProviderUUID, Resources: map[string]ResourceUsage{}}
		if c, ok := mapped[sv.Host]; ok {
			hv.Cell, hv.Mapped = c, true
		}
		if p := provs[h.Service.ProviderUUID]; p != nil {
			for rc, inv := range p.Inventories {
				hv.Resources[rc] = ResourceUsage{Used: p.Usages[rc],
					Capacity: int64(float64(inv.Total-inv.Reserved) * inv.AllocationRatio)}
			}
		}
		out = append(out, hv)
	}
	writeJSON(w, http.StatusOK, map[string]any{"hosts": out})
}
