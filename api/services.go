package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gorilla/mux"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/placement"
)

// DefaultTraitSyncTimeout is how long PUT /v1/services/{host} waits for an
// up agent to confirm COMPUTE_STATUS_DISABLED on its provider; Nova's
// set_host_enabled is a synchronous RPC with a similar bound.
const DefaultTraitSyncTimeout = 10 * time.Second

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

// hostRecord is what one read of the hosts prefix says of one host.
type hostRecord struct {
	svc     etcdschema.Service
	rev     int64
	alive   bool
	numInst int
}

// readHosts reads every service record and alive key in one range read.
// It reads the instance info keys too (to count them); the range is
// bounded by hosts x instances per host, acceptable for an operator call.
func (s *Server) readHosts(ctx context.Context) (map[string]*hostRecord, int64, error) {
	resp, err := s.cli.Get(ctx, s.keys.HostsPrefix(), clientv3.WithPrefix())
	if err != nil {
		return nil, 0, fmt.Errorf("read hosts: %w", err)
	}
	out := map[string]*hostRecord{}
	rec := func(h string) *hostRecord {
		if out[h] == nil {
			out[h] = &hostRecord{}
		}
		return out[h]
	}
	for _, kv := range resp.Kvs {
		host, rest, err := s.keys.ParseHostKey(string(kv.Key))
		if err != nil {
			continue
		}
		switch {
		case rest == "service":
			r := rec(host)
			if err := etcdschema.Decode(string(kv.Key), kv.Value, &r.svc); err != nil {
				s.log.Warn("skipping unreadable service record", "host", host, "error", err)
				delete(out, host)
				continue
			}
			r.rev = kv.ModRevision
		case rest == "alive":
			rec(host).alive = true
		case strings.HasPrefix(rest, "instances/"):
			rec(host).numInst++
		}
	}
	for h, r := range out {
		if r.rev == 0 { // alive or instances without a service record
			delete(out, h)
		}
	}
	return out, resp.Header.Revision, nil
}

func serviceView(r *hostRecord) ServiceView {
	v := ServiceView{Host: r.svc.Host, Cell: r.svc.Cell, State: "down", Status: "enabled",
		DisabledReason: r.svc.DisabledReason, ForcedDown: r.svc.ForcedDown, FailedBuilds: r.svc.FailedBuilds,
		AgentVersion: r.svc.AgentVersion, UpdatedAt: r.svc.UpdatedAt}
	// Nova's service_is_up: forced_down wins over any heartbeat.
	if r.alive && !r.svc.ForcedDown {
		v.State = "up"
	}
	if r.svc.Disabled {
		v.Status = "disabled"
	}
	return v
}

func (s *Server) listServices(w http.ResponseWriter, r *http.Request) {
	hosts, _, err := s.readHosts(r.Context())
	if err != nil {
		s.writeStoreError(w, err, "")
		return
	}
	out := make([]ServiceView, 0, len(hosts))
	for _, h := range hosts {
		out = append(out, serviceView(h))
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Host < out[b].Host })
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

// updateService records an operator's change to a service. When the
// disabled status changes and the host is up, it waits (bounded by
// TraitSyncTimeout) for the agent, which watches its service record, to
// set or clear COMPUTE_STATUS_DISABLED on its provider, as Nova's API calls
// set_host_enabled. A down host is only marked; its agent's provider sync
// sets the trait when it comes back. ComputeFilter sees the record at once
// either way, so the next scheduling request no longer picks the host.
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
	key := s.keys.Service(host)
	var (
		svc                etcdschema.Service
		notFound, conflict bool
	)
	// Read, change, write if unchanged; again while the record changes
	// under it (10 times at most) or etcd cannot commit (storePatience). A
	// write whose answer etcd lost is harmless to repeat: the next read
	// finds the change made and writes nothing.
	err := s.retryStore(ctx, "update service", func(ctx context.Context) error {
		for attempts := 0; attempts < 10; attempts++ {
			resp, err := s.cli.Txn(ctx).Then(clientv3.OpGet(key), clientv3.OpGet(s.keys.Alive(host))).Commit()
			if err != nil {
				return err
			}
			kvs := resp.Responses[0].GetResponseRange().Kvs
			if len(kvs) == 0 {
				notFound = true
				return nil
			}
			if err := etcdschema.Decode(key, kvs[0].Value, &svc); err != nil {
				return err
			}
			next := svc
			if u.Status != nil {
				next.Disabled = *u.Status == "disabled"
				next.DisabledReason = ""
				if next.Disabled && u.DisabledReason != nil {
					next.DisabledReason = *u.DisabledReason
				}
			}
			if u.ForcedDown != nil {
				next.ForcedDown = *u.ForcedDown
			}
			if next == svc {
				return nil
			}
			next.UpdatedAt = time.Now().UTC()
			t, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", kvs[0].ModRevision)).
				Then(clientv3.OpPut(key, etcdschema.MustEncode(&next))).Commit()
			if err != nil {
				return err
			}
			if t.Succeeded {
				svc = next
				return nil
			}
		}
		conflict = true
		return nil
	}, "host", host, "request_id", requestID(ctx))
	switch {
	case err != nil:
		s.writeStoreError(w, err, "")
		return
	case notFound:
		writeError(w, http.StatusNotFound, fmt.Sprintf("Compute host %s could not be found.", host))
		return
	case conflict:
		writeError(w, http.StatusConflict, fmt.Sprintf("Service %s kept changing; try again.", host))
		return
	}
	alive, err := s.cli.Get(ctx, s.keys.Alive(host), clientv3.WithCountOnly())
	if err != nil {
		s.writeStoreError(w, err, "")
		return
	}
	view := serviceView(&hostRecord{svc: svc, alive: alive.Count > 0})
	s.log.Info("service updated", "host", host, "status", view.Status, "reason", view.DisabledReason,
		"forced_down", view.ForcedDown, "state", view.State, "request_id", requestID(ctx))
	// Waited for on every status change request to an up host, not only
	// when the flag flipped: repeating a disable whose wait timed out waits
	// again (one read when the trait is already right).
	if u.Status != nil && view.State == "up" {
		if err := s.waitTrait(ctx, svc.ProviderUUID, svc.Disabled); err != nil {
			view.Warning = fmt.Sprintf("%s is recorded, but the agent did not confirm the %s trait: %v; "+
				"its periodic provider sync will", view.Status, placement.TraitComputeStatusDisabled, err)
			s.log.Warn("agent did not confirm the disabled trait", "host", host, "error", err)
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"service": view})
}

// waitTrait watches the provider record until COMPUTE_STATUS_DISABLED is
// present (want) or absent (!want), or the timeout passes.
func (s *Server) waitTrait(ctx context.Context, provider string, want bool) error {
	if provider == "" {
		return errors.New("the service record names no provider")
	}
	ctx, cancel := context.WithTimeout(ctx, s.TraitSyncTimeout)
	defer cancel()
	key := s.keys.Provider(provider)
	has := func(v []byte) (bool, error) {
		var p etcdschema.Provider
		if err := etcdschema.Decode(key, v, &p); err != nil {
			return false, err
		}
		return slices.Contains(p.Traits, placement.TraitComputeStatusDisabled), nil
	}
	resp, err := s.cli.Get(ctx, key)
	if err != nil {
		return fmt.Errorf("read provider %s: %w", provider, err)
	}
	if len(resp.Kvs) == 1 {
		if got, err := has(resp.Kvs[0].Value); err != nil || got == want {
			return err
		}
	}
	// One key, for at most the confirm timeout, from the revision just
	// read: a bounded wait, not a prefix followed for the process's life,
	// so not a job for internal/informer.
	wch := s.cli.Watch(clientv3.WithRequireLeader(ctx), key, clientv3.WithRev(resp.Header.Revision+1))
	for wr := range wch {
		if err := wr.Err(); err != nil {
			return fmt.Errorf("watch provider %s: %w", provider, err)
		}
		for _, ev := range wr.Events {
			if ev.Kv == nil || len(ev.Kv.Value) == 0 {
				continue
			}
			if got, err := has(ev.Kv.Value); err != nil || got == want {
				return err
			}
		}
	}
	if ctx.Err() != nil {
		return fmt.Errorf("no confirmation within %s", s.TraitSyncTimeout)
	}
	return errors.New("watch ended")
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
	hosts, rev, err := s.readHosts(ctx)
	if err != nil {
		s.writeStoreError(w, err, "")
		return
	}
	// Providers and mappings at the same revision as the hosts.
	resp, err := s.cli.Txn(ctx).Then(
		clientv3.OpGet(s.keys.Providers(), clientv3.WithPrefix(), clientv3.WithRev(rev)),
		clientv3.OpGet(s.keys.HostMappings(), clientv3.WithPrefix(), clientv3.WithRev(rev)),
	).Commit()
	if err != nil {
		s.writeStoreError(w, err, "")
		return
	}
	provs := map[string]*etcdschema.Provider{}
	for _, kv := range resp.Responses[0].GetResponseRange().Kvs {
		var p etcdschema.Provider
		if err := etcdschema.Decode(string(kv.Key), kv.Value, &p); err != nil {
			s.log.Warn("skipping unreadable provider", "error", err)
			continue
		}
		provs[p.UUID] = &p
	}
	mapped := map[string]string{}
	for _, kv := range resp.Responses[1].GetResponseRange().Kvs {
		var m etcdschema.HostMapping
		if etcdschema.Decode(string(kv.Key), kv.Value, &m) == nil {
			mapped[m.Host] = m.Cell
		}
	}
	out := make([]HostView, 0, len(hosts))
	for _, h := range hosts {
		sv := serviceView(h)
		hv := HostView{Host: sv.Host, Cell: sv.Cell, State: sv.State, Status: sv.Status,
			Instances: h.numInst, Provider: h.svc.ProviderUUID, Resources: map[string]ResourceUsage{}}
		if c, ok := mapped[sv.Host]; ok {
			hv.Cell, hv.Mapped = c, true
		}
		if p := provs[h.svc.ProviderUUID]; p != nil {
			for rc, inv := range p.Inventories {
				hv.Resources[rc] = ResourceUsage{Used: p.Usages[rc],
					Capacity: int64(float64(inv.Total-inv.Reserved) * inv.AllocationRatio)}
			}
		}
		out = append(out, hv)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Host < out[b].Host })
	writeJSON(w, http.StatusOK, map[string]any{"hosts": out})
}
