// Package api is Berth's compute API: servers and flavors over HTTP+JSON,
// shaped after Nova's, writing BuildRequests for the superconductors and
// reading instances from their cells.
package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/gorilla/mux"
	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/aggregates"
	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/hosts"
	"github.com/berth-project/berth/internal/etcdretry"
	"github.com/berth-project/berth/internal/metrics"
	"github.com/berth-project/berth/servergroups"
)

// MaxCount is the most servers one request may ask for.
const MaxCount = 1000

// Allocations is what the API needs of placement: freeing an instance that
// never reached a host.
type Allocations interface {
	DeleteAllocations(ctx context.Context, consumer string) error
}

// Server is the compute API.
type Server struct {
	cli       *clientv3.Client
	keys      etcdschema.Keys
	placement Allocations
	aggs      *aggregates.Store
	groups    *servergroups.Store
	log       hclog.Logger
	router    *mux.Router
	// hosts reads and changes compute hosts (services, liveness, zones).
	hosts *hosts.Store
	// TraitSyncTimeout bounds how long a service enable/disable waits for
	// an up agent to confirm its COMPUTE_STATUS_DISABLED trait.
	TraitSyncTimeout time.Duration
}

// New builds the API handler.
func New(cli *clientv3.Client, keys etcdschema.Keys, p Allocations, log hclog.Logger) *Server {
	s := &Server{cli: cli, keys: keys, placement: p, log: log, router: mux.NewRouter(),
		TraitSyncTimeout: DefaultTraitSyncTimeout}
	var mirror aggregates.ProviderAggregates
	if pa, ok := p.(aggregates.ProviderAggregates); ok {
		mirror = pa
	}
	s.aggs = aggregates.New(cli, keys, mirror, log.Named("aggregates"))
	s.groups = servergroups.New(cli, keys, storePatience, log.Named("server_groups"))
	s.hosts = hosts.New(cli, keys, log)
	r := s.router
	r.Use(metrics.RouteLabel) // the route template for berth_http_requests_total
	r.HandleFunc("/", s.versions).Methods(http.MethodGet)
	r.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	s.schedulingRoutes(r)
	r.HandleFunc("/v1/servers", s.createServers).Methods(http.MethodPost)
	r.HandleFunc("/v1/servers", s.listServers).Methods(http.MethodGet)
	r.HandleFunc("/v1/servers/detail", s.listServers).Methods(http.MethodGet)
	r.HandleFunc("/v1/servers/{id}", s.showServer).Methods(http.MethodGet)
	r.HandleFunc("/v1/servers/{id}", s.deleteServer).Methods(http.MethodDelete)
	r.HandleFunc("/v1/flavors", s.listFlavors).Methods(http.MethodGet)
	r.HandleFunc("/v1/flavors/{name}", s.showFlavor).Methods(http.MethodGet)
	s.operatorRoutes(r)
	r.NotFoundHandler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusNotFound, "The resource could not be found.")
	})
	r.MethodNotAllowedHandler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusMethodNotAllowed, "The method is not allowed for this resource.")
	})
	return s
}

// SetDefaultAvailabilityZone sets the zone of hosts in no AZ aggregate
// (default "nova"); requests may name it or an aggregate's zone.
func (s *Server) SetDefaultAvailabilityZone(az string) {
	s.hosts.DefaultZone = az
}

// schedulingRoutes are the server groups and host aggregates (issue 4).
func (s *Server) schedulingRoutes(r *mux.Router) {
	r.HandleFunc("/v1/server-groups", s.createServerGroup).Methods(http.MethodPost)
	r.HandleFunc("/v1/server-groups", s.listServerGroups).Methods(http.MethodGet)
	r.HandleFunc("/v1/server-groups/{id}", s.showServerGroup).Methods(http.MethodGet)
	r.HandleFunc("/v1/server-groups/{id}", s.deleteServerGroup).Methods(http.MethodDelete)
	r.HandleFunc("/v1/os-aggregates", s.createAggregate).Methods(http.MethodPost)
	r.HandleFunc("/v1/os-aggregates", s.listAggregates).Methods(http.MethodGet)
	r.HandleFunc("/v1/os-aggregates/sync", s.syncAggregates).Methods(http.MethodPost)
	r.HandleFunc("/v1/os-aggregates/{id}", s.showAggregate).Methods(http.MethodGet)
	r.HandleFunc("/v1/os-aggregates/{id}", s.updateAggregate).Methods(http.MethodPut)
	r.HandleFunc("/v1/os-aggregates/{id}", s.deleteAggregate).Methods(http.MethodDelete)
	r.HandleFunc("/v1/os-aggregates/{id}/action", s.aggregateAction).Methods(http.MethodPost)
}

// ServeHTTP stamps each request with an id, as OpenStack services do.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rid := "req-" + uuid.NewString()
	w.Header().Set("X-Openstack-Request-Id", rid)
	r = r.WithContext(context.WithValue(r.Context(), requestIDKey{}, rid))
	start := time.Now()
	sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
	s.router.ServeHTTP(sw, r)
	s.log.Debug("request", "method", r.Method, "path", r.URL.Path, "status", sw.status,
		"request_id", rid, "elapsed", time.Since(start))
}

type requestIDKey struct{}

func requestID(ctx context.Context) string {
	v, _ := ctx.Value(requestIDKey{}).(string)
	return v
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

func (s *Server) versions(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"versions": []map[string]any{{
		"id": "v1", "status": "CURRENT", "links": []map[string]string{{"rel": "self", "href": "/v1/"}},
	}}})
}

// createRequest accepts Nova's wrapped form ({"server": {...},
// "os:scheduler_hints": {...}}) and the flat form the Berth CLI sends.
type createRequest struct {
	Server *createBody `json:"server"`
	createBody
	OSHints *rawHints `json:"os:scheduler_hints"`
}

type createBody struct {
	Name             string    `json:"name"`
	Flavor           string    `json:"flavor"`
	FlavorRef        string    `json:"flavorRef"`
	Count            *int      `json:"count"`
	MinCount         *int      `json:"min_count"`
	MaxCount         *int      `json:"max_count"`
	AvailabilityZone string    `json:"availability_zone"`
	Hints            *rawHints `json:"scheduler_hints"`
	// Host and HypervisorHostname ask for a particular compute host, as
	// Nova's microversion 2.74 does (requested_destination).
	Host               string `json:"host"`
	HypervisorHostname string `json:"hypervisor_hostname"`
}

func (s *Server) createServers(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	var req createRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err := dec.Decode(&req); err != nil {
		writeBodyError(w, err)
		return
	}
	body := req.createBody
	if req.Server != nil {
		body = *req.Server
	}
	hints := etcdschema.SchedulerHints{}
	if body.Hints != nil {
		hints = body.Hints.hints()
	}
	if req.OSHints != nil {
		hints = req.OSHints.hints()
	}
	flavorName := body.Flavor
	if flavorName == "" {
		flavorName = body.FlavorRef
	}
	count := 1
	switch {
	case body.Count != nil:
		count = *body.Count
	case body.MaxCount != nil:
		count = *body.MaxCount
	case body.MinCount != nil:
		count = *body.MinCount
	}
	switch {
	case body.Name == "" || len(body.Name) > 255:
		writeError(w, http.StatusBadRequest, "Invalid input: 'name' must be 1 to 255 characters.")
		return
	case flavorName == "":
		writeError(w, http.StatusBadRequest, "Invalid input: 'flavor' (or 'flavorRef') is required.")
		return
	case count < 1 || count > MaxCount:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("Invalid input: 'count' must be between 1 and %d.", MaxCount))
		return
	}
	flavor, err := s.findFlavor(ctx, flavorName)
	if err != nil {
		s.writeStoreError(w, err, fmt.Sprintf("Flavor %s could not be found.", flavorName))
		return
	}
	if msg, status := s.checkPlacementRequest(ctx, body.AvailabilityZone, hints); msg != "" {
		writeError(w, status, msg)
		return
	}
	if msg, status := s.checkRequestedHost(ctx, body.Host, body.HypervisorHostname); msg != "" {
		writeError(w, status, msg)
		return
	}
	project, user := identity(r)
	rid := requestID(ctx)
	resID := "r-" + uuid.NewString()[:8]
	now := time.Now().UTC()
	brs := make([]*etcdschema.BuildRequest, count)
	for i := range brs {
		name := body.Name
		if count > 1 {
			name = fmt.Sprintf("%s-%d", body.Name, i+1) // Nova's multi-create naming
		}
		brs[i] = &etcdschema.BuildRequest{InstanceUUID: uuid.NewString(), Name: name, ReservationID: resID,
			Index: i, Count: count, Flavor: flavor.Embedded(), ProjectID: project, UserID: user,
			AvailabilityZone: body.AvailabilityZone, Hints: hints, RequestID: rid, CreatedAt: now,
			Host: body.Host, Node: body.HypervisorHostname}
	}
	// Two keys a server (three in a group); a reservation goes in as few transactions as etcd
	// allows, so the superconductor sees whole multi-instance requests.
	perTxn := 64
	if hints.Group != "" {
		perTxn = 42 // three keys a server, within etcd's 128 operations
	}
	for start := 0; start < count; start += perTxn {
		end := min(start+perTxn, count)
		var ops []clientv3.Op
		var cmps []clientv3.Cmp
		for _, br := range brs[start:end] {
			m := &etcdschema.InstanceMapping{InstanceUUID: br.InstanceUUID, ProjectID: project, CreatedAt: now}
			ops = append(ops,
				clientv3.OpPut(s.keys.InstanceMapping(br.InstanceUUID), etcdschema.MustEncode(m)),
				clientv3.OpPut(s.keys.BuildRequest(br.InstanceUUID), etcdschema.MustEncode(br)))
			if hints.Group != "" {
				// Nova adds the instance to its group at create; the
				// scheduler later records its host on the same key.
				ops = append(ops, clientv3.OpPut(s.keys.ServerGroupMember(hints.Group, br.InstanceUUID),
					etcdschema.MustEncode(&etcdschema.ServerGroupMember{InstanceUUID: br.InstanceUUID, CreatedAt: now})))
			}
		}
		if hints.Group != "" {
			cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(s.keys.ServerGroup(hints.Group)), ">", 0))
		}
		stored, err := s.storeOnce(ctx, rid, s.keys.InstanceMapping(brs[start].InstanceUUID), cmps, ops)
		if err != nil {
			s.log.Error("store build requests", "request_id", rid, "error", err)
			writeError(w, http.StatusServiceUnavailable, "Could not store the build requests; try again.")
			return
		}
		if !stored {
			writeError(w, http.StatusConflict, fmt.Sprintf("Server group %s was deleted while the servers were being requested.", hints.Group))
			return
		}
	}
	out := make([]map[string]string, count)
	for i, br := range brs {
		out[i] = map[string]string{"id": br.InstanceUUID, "name": br.Name}
	}
	s.log.Info("servers requested", "request_id", rid, "count", count, "flavor", flavor.Name, "reservation", resID)
	writeJSON(w, http.StatusAccepted, map[string]any{"reservation_id": resID, "server": out[0], "servers": out})
}

// storePatience is how long a create keeps asking etcd to store its build
// requests while etcd cannot commit (a leader election after a member
// died, a proposal timed out on a loaded disk): about two of etcd's 7 s
// proposal timeouts. Past it the client gets 503 and may ask again.
const storePatience = 15 * time.Second

// retryStore runs op, again while etcd cannot commit, for storePatience
// (etcdretry.Do), logging each retry as "<what>: etcd cannot commit for
// now, retrying" with kv and the attempt. op must be safe to repeat after
// an attempt whose answer etcd lost.
func (s *Server) retryStore(ctx context.Context, what string, op func(context.Context) error, kv ...any) error {
	return etcdretry.Do(ctx, storePatience, op, func(attempt int, err error) {
		s.log.Warn(what+": etcd cannot commit for now, retrying", append(slices.Clip(kv), "attempt", attempt, "error", err)...)
	})
}

// storeOnce commits ops if cmps hold, exactly once however often etcd's
// answer is lost (see storeAttempt). Transient etcd errors are retried
// for storePatience. stored is false only when cmps failed.
func (s *Server) storeOnce(ctx context.Context, rid, guard string, cmps []clientv3.Cmp, ops []clientv3.Op) (stored bool, err error) {
	retry := false
	err = s.retryStore(ctx, "store build requests", func(ctx context.Context) error {
		var err error
		stored, err = s.storeAttempt(ctx, retry, guard, cmps, ops)
		retry = true
		return err
	}, "request_id", rid)
	return stored, err
}

// storeAttempt is one transaction of storeOnce. guard is a key among ops,
// of a fresh uuid: it cannot exist before the first attempt, which goes
// as it is. A retry also compares that guard does not exist yet, so an
// earlier attempt that landed (only its answer lost) makes it fail on the
// guard, which its Else read turns into "stored".
func (s *Server) storeAttempt(ctx context.Context, retry bool, guard string, cmps []clientv3.Cmp, ops []clientv3.Op) (bool, error) {
	if !retry {
		resp, err := s.cli.Txn(ctx).If(cmps...).Then(ops...).Commit()
		if err != nil {
			return false, err
		}
		return resp.Succeeded, nil
	}
	guarded := append(slices.Clip(cmps), clientv3.Compare(clientv3.CreateRevision(guard), "=", 0))
	resp, err := s.cli.Txn(ctx).If(guarded...).Then(ops...).Else(clientv3.OpGet(guard, clientv3.WithCountOnly())).Commit()
	if err != nil {
		return false, err
	}
	return resp.Succeeded || resp.Responses[0].GetResponseRange().Count > 0, nil
}

// identity reads the caller's project and user. Keystone is out of scope;
// the headers let multi-tenant tests and tools say who they are.
// checkRequestedHost is Nova's API check of a requested host and
// hypervisor_hostname: each must name a known compute host (Berth has one
// node per host, named as the host), and they must agree.
func (s *Server) checkRequestedHost(ctx context.Context, host, node string) (string, int) {
	if host == "" && node == "" {
		return "", 0
	}
	if host != "" && node != "" && host != node {
		return fmt.Sprintf("Compute host %s has no node %s.", host, node), http.StatusBadRequest
	}
	name := host
	if name == "" {
		name = node
	}
	resp, err := s.cli.Get(ctx, s.keys.Service(name), clientv3.WithCountOnly())
	if err != nil {
		return fmt.Sprintf("look up compute host %s: %v", name, err), http.StatusServiceUnavailable
	}
	if resp.Count == 0 {
		if host != "" {
			return fmt.Sprintf("Compute host %s could not be found.", host), http.StatusBadRequest
		}
		return fmt.Sprintf("Hypervisor hostname %s could not be found.", node), http.StatusBadRequest
	}
	return "", 0
}

func identity(r *http.Request) (project, user string) {
	project = r.Header.Get("X-Project-Id")
	user = r.Header.Get("X-User-Id")
	if project == "" {
		project = "default"
	}
	if user == "" {
		user = "admin"
	}
	return project, user
}

func (s *Server) findFlavor(ctx context.Context, name string) (*etcdschema.Flavor, error) {
	key := s.keys.Flavor(name)
	resp, err := s.cli.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("read flavor %s: %w", name, err)
	}
	if len(resp.Kvs) == 0 {
		// Accept the flavor id too, as Nova's flavorRef does.
		all, err := s.cli.Get(ctx, s.keys.Flavors(), clientv3.WithPrefix())
		if err != nil {
			return nil, fmt.Errorf("list flavors: %w", err)
		}
		for _, kv := range all.Kvs {
			var f etcdschema.Flavor
			if etcdschema.Decode(string(kv.Key), kv.Value, &f) == nil && f.ID == name {
				return &f, nil
			}
		}
		return nil, errNotFound
	}
	var f etcdschema.Flavor
	if err := etcdschema.Decode(key, resp.Kvs[0].Value, &f); err != nil {
		return nil, err
	}
	return &f, nil
}

var errNotFound = errors.New("not found")

func (s *Server) writeStoreError(w http.ResponseWriter, err error, notFound string) {
	if errors.Is(err, errNotFound) {
		writeError(w, http.StatusNotFound, notFound)
		return
	}
	s.log.Error("store error", "error", err)
	writeError(w, http.StatusServiceUnavailable, "The state store could not be read; try again.")
}

func (s *Server) listFlavors(w http.ResponseWriter, r *http.Request) {
	resp, err := s.cli.Get(r.Context(), s.keys.Flavors(), clientv3.WithPrefix())
	if err != nil {
		s.writeStoreError(w, err, "")
		return
	}
	out := []etcdschema.Flavor{}
	for _, kv := range resp.Kvs {
		var f etcdschema.Flavor
		if err := etcdschema.Decode(string(kv.Key), kv.Value, &f); err != nil {
			s.log.Warn("skipping unreadable flavor", "error", err)
			continue
		}
		out = append(out, f)
	}
	writeJSON(w, http.StatusOK, map[string]any{"flavors": out})
}

func (s *Server) showFlavor(w http.ResponseWriter, r *http.Request) {
	name := mux.Vars(r)["name"]
	f, err := s.findFlavor(r.Context(), name)
	if err != nil {
		s.writeStoreError(w, err, fmt.Sprintf("Flavor %s could not be found.", name))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"flavor": f})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeError answers in Nova's error shape: {"<kind>": {"code", "message"}}.
func writeError(w http.ResponseWriter, status int, msg string) {
	kind := map[int]string{400: "badRequest", 404: "itemNotFound", 405: "methodNotAllowed",
		409: "conflictingRequest", 413: "overLimit", 503: "serviceUnavailable"}[status]
	if kind == "" {
		kind = "computeFault"
	}
	writeJSON(w, status, map[string]any{kind: map[string]any{"code": status, "message": msg}})
}
