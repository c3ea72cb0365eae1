// Package api is Berth's private /v1 API, beside the Nova API (package
// compute) on the compute listener, over the same records (packages
// servers, servergroups, aggregates, hosts).
//
// /v1 is deprecated, kept for one release, for what Nova's API serves
// too: servers, flavors (read), server groups and os-aggregates. Use
// /v2.1 for those. Berth's own admin extensions, which Nova's API has no
// route for, stay: cells (create, list, discover_hosts), a server's
// selection (its attempts and alternate hosts), host usage (/v1/hosts),
// host drains (/v1/hosts/{host}/drain: start, progress, cancel; drains.go),
// services as Berth shows them, the aggregate sync into Placement, and
// the server watch (GET /v1/servers/watch, watch.go): server-sent events
// of the named servers' statuses from one etcd watch, which berth server
// create --wait holds instead of listing the servers every interval.
//
// /v1 checks credentials exactly as the Nova API does (auth.go): the
// same tokens, keystonemiddleware's 401 before routing, and Nova's
// default policies per route (routes.go): servers and server groups are
// the caller's project's (member to write, reader to read, an admin
// every project's with all_projects or all_tenants; another project's
// placed server is 404), everything else an admin's but flavor reads.
// In noauth mode it is Nova's noauth2: no token is admin:admin.
package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/gorilla/mux"
	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/aggregates"
	"github.com/berth-project/berth/drain"
	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/hosts"
	"github.com/berth-project/berth/identity"
	"github.com/berth-project/berth/internal/metrics"
	"github.com/berth-project/berth/servergroups"
	"github.com/berth-project/berth/servers"
)

// MaxCount is the most servers one request may ask for.
const MaxCount = servers.MaxCount

// Allocations is what the API needs of placement: freeing an instance that
// never reached a host.
type Allocations = servers.Allocations

// Server is the compute API.
type Server struct {
	cli  *clientv3.Client
	keys etcdschema.Keys
	// servers runs the server operations (create, lookup, list, delete)
	// this API shares with Nova's (package compute).
	servers *servers.Store
	// placement frees claims (through servers) and mirrors aggregates.
	placement Allocations
	aggs      *aggregates.Store
	groups    *servergroups.Store
	log       hclog.Logger
	router    *mux.Router
	// hosts reads and changes compute hosts (services, liveness, zones).
	hosts *hosts.Store
	// drains starts, shows and cancels host drains (the leader moves).
	drains *drain.Store
	// auth is how /v1 checks credentials (SetAuth); routes its table.
	auth   Auth
	routes []route
	// watches holds a slot per open server watch (watch.go).
	watches chan struct{}
	// TraitSyncTimeout bounds how long a service enable/disable waits for
	// an up agent to confirm its COMPUTE_STATUS_DISABLED trait.
	TraitSyncTimeout time.Duration
}

// New builds the API handler.
func New(cli *clientv3.Client, keys etcdschema.Keys, p Allocations, log hclog.Logger) *Server {
	s := &Server{cli: cli, keys: keys, servers: servers.New(cli, keys, p, log), placement: p, log: log, router: mux.NewRouter(),
		TraitSyncTimeout: DefaultTraitSyncTimeout, watches: make(chan struct{}, maxServerWatches)}
	var mirror aggregates.ProviderAggregates
	if pa, ok := p.(aggregates.ProviderAggregates); ok {
		mirror = pa
	}
	s.aggs = aggregates.New(cli, keys, mirror, log.Named("aggregates"))
	s.groups = servergroups.New(cli, keys, servers.StorePatience, log.Named("server_groups"))
	s.hosts = hosts.New(cli, keys, log)
	s.drains = drain.NewStore(cli, keys, s.hosts, log.Named("drain"))
	r := s.router
	r.Use(metrics.RouteLabel) // the route template for berth_http_requests_total
	r.Use(checkPathSegments)  // ids in paths are UUIDs, names key segments
	r.HandleFunc("/", s.versions).Methods(http.MethodGet)
	r.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	s.addRoutes(r)
	r.NotFoundHandler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusNotFound, "The resource could not be found.")
	})
	r.MethodNotAllowedHandler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusMethodNotAllowed, "The method is not allowed for this resource.")
	})
	return s
}

// SetLiveMigrator lets /v1 start live drains (nil: they are refused
// with "live migration is not available in this build").
func (s *Server) SetLiveMigrator(l drain.LiveMigrator) { s.drains.SetLiveMigrator(l) }

// SetDefaultAvailabilityZone sets the zone of hosts in no AZ aggregate
// (default "nova"); requests may name it or an aggregate's zone.
func (s *Server) SetDefaultAvailabilityZone(az string) {
	s.hosts.DefaultZone = az
	s.servers.SetDefaultAvailabilityZone(az)
}

// ServeHTTP stamps each request with an id, as Nova's compute_req_id
// does, then authenticates every request below /v1/ before routing, as
// keystonemiddleware runs ahead of Nova's router; the version document
// at / and /healthz stay public.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rid := "req-" + uuid.NewString()
	w.Header().Set("X-Openstack-Request-Id", rid)
	w.Header().Set("X-Compute-Request-Id", rid)
	r = r.WithContext(context.WithValue(r.Context(), requestIDKey{}, rid))
	start := time.Now()
	sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
	if p := r.URL.Path; p == "/v1" || strings.HasPrefix(p, "/v1/") {
		var ok bool
		if r, ok = s.authenticate(r); !ok {
			identity.RejectUnauthenticated(sw, s.auth.IdentityURI)
			s.log.Debug("request", "method", r.Method, "path", r.URL.Path, "status", sw.status, "request_id", rid)
			return
		}
	}
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

// Unwrap lets http.ResponseController reach the connection's Flush, which
// the server watch's stream needs after each event.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

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
	if msg := checkHints(hints); msg != "" {
		writeError(w, http.StatusBadRequest, msg)
		return
	}
	for _, f := range []struct{ field, host string }{{"host", body.Host}, {"hypervisor_hostname", body.HypervisorHostname}} {
		if msg := checkHostName(f.field, f.host); msg != "" {
			writeError(w, http.StatusBadRequest, msg)
			return
		}
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
	who := caller(r)
	res, err := s.servers.Create(ctx, servers.CreateRequest{Name: body.Name, Flavor: *flavor, Count: count,
		ProjectID: who.ProjectID, UserID: who.UserID, AvailabilityZone: body.AvailabilityZone, Hints: hints,
		Host: body.Host, Node: body.HypervisorHostname, RequestID: requestID(ctx)})
	switch {
	case errors.Is(err, servers.ErrGroupDeleted):
		writeError(w, http.StatusConflict, fmt.Sprintf("Server group %s was deleted while the servers were being requested.", hints.Group))
		return
	case err != nil:
		s.log.Error("store build requests", "request_id", requestID(ctx), "error", err)
		writeError(w, http.StatusServiceUnavailable, "Could not store the build requests; try again.")
		return
	}
	out := make([]map[string]string, count)
	for i, br := range res.BuildRequests {
		out[i] = map[string]string{"id": br.InstanceUUID, "name": br.Name}
	}
	writeJSON(w, http.StatusAccepted, map[string]any{"reservation_id": res.ID, "server": out[0], "servers": out})
}

func (s *Server) findFlavor(ctx context.Context, name string) (*etcdschema.Flavor, error) {
	return s.servers.FindFlavor(ctx, name)
}

var errNotFound = servers.ErrNotFound

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
	kind := map[int]string{400: "badRequest", 403: "forbidden", 404: "itemNotFound", 405: "methodNotAllowed",
		409: "conflictingRequest", 413: "overLimit", 503: "serviceUnavailable"}[status]
	if kind == "" {
		kind = "computeFault"
	}
	writeJSON(w, status, map[string]any{kind: map[string]any{"code": status, "message": msg}})
}
