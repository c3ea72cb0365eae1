package compute

import (
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/aggregates"
	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/hosts"
	"github.com/berth-project/berth/identity"
	"github.com/berth-project/berth/internal/audit"
	"github.com/berth-project/berth/internal/metrics"
	"github.com/berth-project/berth/internal/pycompat"
	"github.com/berth-project/berth/quotas"
	"github.com/berth-project/berth/servergroups"
	"github.com/berth-project/berth/servers"
)

// storePatience is how long a write is retried while etcd cannot commit
// (etcd elects a leader within seconds), as /v1 does.
const storePatience = 15 * time.Second

// API is the OpenStack Compute API v2.1 over Berth's records.
type API struct {
	flavors *flavorStore
	servers *servers.Store // create, lookup, list, delete: shared with /v1
	images  ImageCatalog   // nil until SetImages
	auth    Auth           // see SetAuth
	log     hclog.Logger
	routes  []route

	cli  *clientv3.Client
	keys etcdschema.Keys
	// aggregates mirror into placement once SetAggregateMirror gave it.
	aggregates *aggregates.Store
	groups     *servergroups.Store
	// hosts backs os-services, os-hypervisors and os-availability-zone;
	// traitWait bounds a disable's wait for the agent (see SetHosts).
	hosts     *hosts.Store
	traitWait time.Duration
	// quotas back os-quota-sets and limits, and check every server and
	// server group create (see SetQuotaDefaults).
	quotas *quotas.Store
	// allowResizeToSameHost is Nova's allow_resize_to_same_host.
	allowResizeToSameHost bool
	// shelvedOffloadTime is Nova's shelved_offload_time (server_shelve.go).
	shelvedOffloadTime time.Duration
}

// New returns the compute API over the records under keys.
func New(cli *clientv3.Client, keys etcdschema.Keys, log hclog.Logger) *API {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	a := &API{flavors: &flavorStore{cli: cli, keys: keys}, auth: Auth{Mode: AuthNoAuth}, log: log, cli: cli, keys: keys,
		aggregates: aggregates.New(cli, keys, nil, log.Named("aggregates")),
		groups:     servergroups.New(cli, keys, storePatience, log.Named("server_groups")),
		hosts:      hosts.New(cli, keys, log.Named("hosts")), traitWait: hosts.DefaultTraitSyncTimeout,
		servers: servers.New(cli, keys, nil, log.Named("servers"))}
	a.SetQuotaDefaults(nil)
	a.routes = a.routeTable()
	for i := range a.routes {
		rt := &a.routes[i]
		if (rt.handle == nil) == (rt.actions == nil) {
			panic("compute route " + rt.method + " " + rt.path + ": set exactly one of handle and actions")
		}
		rt.segs = strings.Split(rt.path, "/")
	}
	return a
}

// SetQuotaDefaults sets the limits of projects that set none (the
// server config's quota block; nil or a resource missing: Nova's
// defaults). Server and server group creates check them race-free.
func (a *API) SetQuotaDefaults(d quotas.Limits) {
	a.quotas = quotas.New(a.cli, a.keys, d, a.log.Named("quotas"))
	a.servers.SetQuotas(a.quotas)
	a.groups.SetQuotas(a.quotas)
}

// Beside serves this API and hands Berth's own /v1 API (and its
// /healthz) to legacy, on one listener. Every other path is Nova's: the
// version documents at / (and, as Nova's urlmap does, a 300 Multiple
// Choices for any path it does not know), /v2.1 and below.
func (a *API) Beside(legacy http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		if p == "/v1" || strings.HasPrefix(p, "/v1/") || p == "/healthz" {
			legacy.ServeHTTP(w, r)
			return
		}
		a.ServeHTTP(w, r)
	})
}

// ServeHTTP dispatches as nova-api's paste urlmap does: /v2.1 exactly is
// the version document (with microversion headers), /v2.1/... the API
// router, anything else the root version list.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	switch {
	case p == "/v2.1":
		metrics.SetRoute(r, "/v2.1")
		setRequestID(w)
		v, f := negotiate(r.Header)
		if f != nil {
			writeFault(w, nil, f)
			return
		}
		writeBody(w, &v, http.StatusOK, versionV21(applicationURL(r, "/v2.1")))
	case strings.HasPrefix(p, "/v2.1/"):
		setRequestID(w)
		a.serveV21(w, r, strings.TrimPrefix(p, "/v2.1"))
	case p == "/":
		metrics.SetRoute(r, "/")
		writeBody(w, nil, http.StatusOK, versionsIndex(applicationURL(r, "")))
	default:
		writeBody(w, nil, http.StatusMultipleChoices, versionsChoices(applicationURL(r, ""), p))
	}
}

// setRequestID is nova's compute_req_id middleware.
// The two headers share one value slice (neither is ever changed in
// place) and are spelled as net/http keeps them, which canonicalizing
// would otherwise allocate at every request.
func setRequestID(w http.ResponseWriter) {
	id := []string{"req-" + uuid.NewString()}
	h := w.Header()
	h[headerComputeRequestID] = id
	h[headerRequestID] = id
}

// The request id's headers, canonical: X-Compute-Request-Id and
// X-OpenStack-Request-Id.
const (
	headerComputeRequestID = "X-Compute-Request-Id"
	headerRequestID        = "X-Openstack-Request-Id"
)

// applicationURL is webob's request.application_url for an application
// mounted at mount: the request's scheme and Host, then mount.
func applicationURL(r *http.Request, mount string) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host + mount
}

// reqCtx is one request inside /v2.1, past routing and negotiation.
type reqCtx struct {
	r       *http.Request
	v       version
	vars    map[string]string
	body    any // the decoded body (obj, []any, ... or nil for none)
	baseURL string
	// creds are the caller's, from its token (nova.context's
	// RequestContext: user, project, roles).
	creds identity.Credentials
	api   *API
	// requestID is the answer's X-OpenStack-Request-Id, for logs and
	// the records a request writes.
	requestID string
	// header is the answer's headers, for a handler that sets one of its
	// own (a create's Location).
	header http.Header
}

// can is context.can(rule, target={'project_id': owner}): nil when the
// caller's credentials pass p for a resource of project owner, else
// Nova's 403 ("Policy doesn't allow <rule> to be performed."). Handlers
// that load a project's resource (a server, a server group) call it
// with the resource's project; serveV21 has already checked the route's
// policy against the caller's own project.
func (c *reqCtx) can(p policy, owner string) *fault { return c.api.authorize(c, p, owner) }

// serveV21 runs nova.api.openstack.wsgi.Resource's stack for sub, the
// path below /v2.1, in Nova's order: the body's size (413), the caller's
// token (401, as keystonemiddleware answers before the router), the route
// (no route: webob's bare 404), the microversion (400, 406), the Content-Type (415), an action's
// name, the body (400 Malformed request body), the route's microversions
// (404), the body's schema (400), the policy (403), the handler.
func (a *API) serveV21(w http.ResponseWriter, r *http.Request, sub string) {
	if r.ContentLength > maxBody {
		// oslo's sizelimit middleware, ahead of the router.
		writeWebobError(w, r, http.StatusRequestEntityTooLarge, "Request Entity Too Large", tooLarge)
		return
	}
	creds, ok := a.authenticate(r)
	if !ok {
		a.rejectUnauthenticated(w)
		return
	}
	rt, vars := a.match(r.Method, sub)
	if rt == nil {
		writeRouterNotFound(w, r)
		return
	}
	metrics.SetRoute(r, "/v2.1"+rt.path)
	v, f := negotiate(r.Header)
	if f != nil {
		writeFault(w, nil, f)
		return
	}
	defer func() {
		if p := recover(); p != nil {
			a.log.Error("compute API panic", "method", r.Method, "path", r.URL.Path, "panic", fmt.Sprint(p))
			writeFault(w, &v, &fault{status: 500, message: "Unexpected API Error. Please report this at http://bugs.launchpad.net/nova/ and attach the Nova API log if possible.\n<class 'Exception'>"})
		}
	}()
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, _ := mime.ParseMediaType(ct)
		if mt != "" && mt != "text/plain" && mt != "application/json" && mt != "application/vnd.openstack.compute+json" {
			writeFault(w, &v, &fault{status: http.StatusUnsupportedMediaType, message: "Unsupported Content-Type"})
			return
		}
	}
	c := &reqCtx{r: r, v: v, vars: vars, baseURL: applicationURL(r, "/v2.1"), creds: creds, api: a,
		requestID: w.Header().Get(headerRequestID), header: w.Header()}
	if r.Method == http.MethodPost || r.Method == http.MethodPut {
		body, f := readBody(r)
		if f == errTooLarge {
			writeWebobError(w, r, http.StatusRequestEntityTooLarge, "Request Entity Too Large", tooLarge)
			return
		}
		if f != nil {
			writeFault(w, &v, f)
			return
		}
		c.body = body
	}
	if rt.actions != nil {
		// action_peek: the body is one object of one member, the action.
		o, ok := c.body.(obj)
		if !ok || len(o) != 1 {
			writeFault(w, &v, &fault{status: 400, message: "Malformed request body"})
			return
		}
		audit.Action(r.Context(), o[0].k)
		act, ok := rt.actions[o[0].k]
		if !ok {
			writeFault(w, &v, &fault{status: 400, message: "There is no such action: " + o[0].k})
			return
		}
		rt = act
	}
	if p, ok := c.vars["project_id"]; ok && p != c.creds.ProjectID {
		// wsgi.Resource._process_stack: the URL's project must be the
		// token's, checked after the body and action, before the
		// method's microversions and schema.
		writeFault(w, &v, &fault{status: 400, message: "Malformed request URL: URL's project_id '" + p +
			"' doesn't match Context's project_id '" + c.creds.ProjectID + "'"})
		return
	}
	delete(c.vars, "project_id")
	if !rt.serves(v) {
		writeFault(w, &v, errNotFoundPlain())
		return
	}
	if rt.schema != nil {
		if s := rt.schema(v); s != nil {
			if e := s.check(c.body, nil); e != nil {
				writeFault(w, &v, &fault{status: 400, message: e.bodyError()})
				return
			}
		}
	}
	if f := a.authorize(c, rt.policy, c.creds.ProjectID); f != nil {
		writeFault(w, &v, f)
		return
	}
	status, out, err := rt.handle(c)
	if err != nil {
		var f *fault
		if !errors.As(err, &f) {
			a.log.Error("compute API error", "method", r.Method, "path", r.URL.Path, "error", err)
			f = &fault{status: http.StatusServiceUnavailable, message: "The state store could not be read or written; try again."}
		}
		writeFault(w, &v, f)
		return
	}
	writeBody(w, &v, status, out)
}

// readBody is Resource._get_request_content: no body (Content-Length 0
// or unknown and empty) is None, anything else must be JSON.
func readBody(r *http.Request) (any, *fault) {
	bufp := bodyBuffers.Get().(*[]byte)
	defer bodyBuffers.Put(bufp)
	buf := (*bufp)[:0]
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if len(buf) > maxBody {
			return nil, errTooLarge
		}
		if err != nil {
			break
		}
	}
	if cap(buf) <= maxBody+1 {
		*bufp = buf // keep a buffer grown for a larger body, within the limit
	}
	if len(buf) == 0 {
		return nil, nil
	}
	// The decoded value copies what it keeps (strings, numbers), so the
	// buffer goes back to the pool.
	v, err := decodeOrdered(buf)
	if err != nil {
		return nil, &fault{status: 400, message: "Malformed request body"}
	}
	return v, nil
}

// bodyBuffers are request bodies' read buffers, reused: a create's body
// is read for every server created.
var bodyBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// maxBody is oslo's sizelimit middleware default, max_request_body_size.
const maxBody = 114688

// errTooLarge is a body past maxBody without a Content-Length saying so
// (chunked): sizelimit's reader raises as the body is read.
var errTooLarge = &fault{status: http.StatusRequestEntityTooLarge}

// fault is one of Nova's error answers: {"<name>": {"code", "message"}}.
type fault struct {
	status  int
	message string
	// requested is the version a 406 names in its headers.
	requested string
}

func (f *fault) Error() string { return strconv.Itoa(f.status) + ": " + f.message }

// faultNames is wsgi.Fault._fault_names; any other status is a
// computeFault (406 among them).
var faultNames = map[int]string{400: "badRequest", 401: "unauthorized", 403: "forbidden", 404: "itemNotFound",
	405: "badMethod", 409: "conflictingRequest", 413: "overLimit", 415: "badMediaType", 429: "overLimit",
	501: "notImplemented", 503: "serviceUnavailable"}

func errNotFound(msg string) *fault { return &fault{status: http.StatusNotFound, message: msg} }

// errNotFoundPlain is webob's HTTPNotFound() with no explanation, as a
// Fault (a route below its microversions).
func errNotFoundPlain() *fault { return errNotFound("The resource could not be found.") }

func errBadRequest(msg string) *fault { return &fault{status: http.StatusBadRequest, message: msg} }

func errConflict(msg string) *fault { return &fault{status: http.StatusConflict, message: msg} }

// writeFault is wsgi.Fault: the fault body (its Content-Type with a
// charset, unlike a success's), and the version headers when the
// request's version was set.
func writeFault(w http.ResponseWriter, v *version, f *fault) {
	name, ok := faultNames[f.status]
	if !ok {
		name = "computeFault"
	}
	h := w.Header()
	switch {
	case v != nil:
		setServedVersionHeaders(h, *v)
	case f.requested != "":
		setVersionHeaders(h, f.requested)
	}
	b := dumps(obj{{name, obj{{"code", f.status}, {"message", f.message}}}})
	h.Set("Content-Type", "application/json; charset=UTF-8")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(f.status)
	_, _ = w.Write(b)
}

// writeBody writes out (nil: an empty body) as Nova's JSON.
func writeBody(w http.ResponseWriter, v *version, status int, out any) {
	h := w.Header()
	if v != nil {
		setServedVersionHeaders(h, *v)
	}
	h.Set("Content-Type", "application/json")
	if out == nil {
		h.Set("Content-Length", "0")
		w.WriteHeader(status)
		return
	}
	bp := answerBuffers.Get().(*[]byte)
	b := pycompat.AppendDumps((*bp)[:0], out)
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b) // copied (into the connection's buffer, or sent) before it returns
	if cap(b) <= maxPooledAnswer {
		*bp = b[:0]
		answerBuffers.Put(bp)
	}
}

// answerBuffers are writeBody's buffers, reused: every answer was a
// buffer of its own, grown from 64 bytes by doubling. One grown for an
// unusually large answer (a long server list) is not kept.
var answerBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 2048); return &b }}

const maxPooledAnswer = 64 << 10

// writeRouterNotFound is the 404 of Nova's router for a path or method it
// has no route for: webob's own HTTPNotFound page, not a Fault.
func writeRouterNotFound(w http.ResponseWriter, r *http.Request) {
	writeWebobError(w, r, http.StatusNotFound, "Not Found", "The resource could not be found.")
}

// writeWebobError is a webob HTTPException's own page, as middleware
// below Nova's faults answers (the router, oslo's sizelimit).
func writeWebobError(w http.ResponseWriter, r *http.Request, status int, title, explanation string) {
	pycompat.WebobError(w, r.Header.Get("Accept"), status, title, explanation)
}

// tooLarge is oslo_middleware.sizelimit's explanation.
const tooLarge = "Request is too large. Larger than max_request_body_size (114688)."
