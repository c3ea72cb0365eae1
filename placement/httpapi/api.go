package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/gorilla/mux"
	"github.com/hashicorp/go-hclog"

	"github.com/berth-project/berth/identity"
	"github.com/berth-project/berth/internal/audit"
	"github.com/berth-project/berth/internal/etcdretry"
	"github.com/berth-project/berth/internal/metrics"
	"github.com/berth-project/berth/internal/pycompat"
	"github.com/berth-project/berth/placement"
)

// Options configure the Placement HTTP API.
type Options struct {
	Auth AuthConfig
}

// API is Placement's REST API over a placement.Service. It reads and
// writes through the service's exported methods only.
type API struct {
	svc  *placement.Service
	log  hclog.Logger
	opts Options
	now  func() time.Time
}

// New returns the Placement API over svc as an http.Handler. log receives
// the errors answered with a 5xx and the panics recovered.
func New(svc *placement.Service, log hclog.Logger, opts Options) http.Handler {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	s := &API{svc: svc, log: log, opts: opts, now: func() time.Time { return time.Now().UTC() }}
	return s.newRouter()
}

// Microversions served: 1.0 to maxMinor.
const maxMinor = 39

func (s *API) newRouter() http.Handler {
	r := mux.NewRouter()
	r.Use(metrics.RouteLabel) // the route template for berth_http_requests_total
	byPath := map[string]map[string][]*route{}
	var paths []string
	allow := map[string][]string{}
	rows := s.routes()
	for i := range rows {
		rt := &rows[i]
		if (rt.handle == nil) == (rt.handleProvider == nil) {
			panic("placement route " + rt.method + " " + rt.path + ": set exactly one of handle and handleProvider")
		}
		if byPath[rt.path] == nil {
			byPath[rt.path] = map[string][]*route{}
			paths = append(paths, rt.path)
		}
		if byPath[rt.path][rt.method] == nil {
			allow[rt.path] = append(allow[rt.path], rt.method)
		}
		byPath[rt.path][rt.method] = append(byPath[rt.path][rt.method], rt)
	}
	for _, p := range paths {
		r.Handle(p, s.dispatch(byPath[p], strings.Join(allow[p], ", ")))
	}
	r.NotFoundHandler = s.dispatch(nil, "")
	r.MethodNotAllowedHandler = s.dispatch(nil, "")
	return r
}

// reqCtx is one request on its way through the API.
type reqCtx struct {
	w     http.ResponseWriter
	r     *http.Request
	id    string
	mv    int // minor version; the major is always 1
	hasMV bool
	vars  map[string]string
	auth  authInfo
	// bodyOrder is the key order of the JSON body's objects (readJSON).
	bodyOrder pycompat.KeyOrder
}

// atLeast reports whether the request's microversion is 1.minor or later.
func (c *reqCtx) atLeast(minor int) bool { return c.mv >= minor }

// dispatch runs the pipeline Placement's WSGI stack runs, outermost first:
// request id, panic guard, auth (the root is open), microversion, then the
// route's method handler (or 404/405).
func (s *API) dispatch(methods map[string][]*route, allow string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := &reqCtx{w: w, r: r, id: "req-" + uuid.NewString(), vars: mux.Vars(r)}
		w.Header().Set("OpenStack-Request-Id", c.id)
		w.Header().Set("X-OpenStack-Request-Id", c.id)
		defer func() {
			if p := recover(); p != nil {
				s.log.Error("placement API panic", "request_id", c.id, "panic", fmt.Sprint(p))
				s.writeError(c, &httpError{status: 500, detail: fmt.Sprint(p)})
			}
		}()
		path := r.URL.Path
		if path != "/" && path != "" {
			if !s.authenticate(c) {
				if s.opts.Auth.Mode == ModeKeystone {
					identity.RejectUnauthenticated(w, s.opts.Auth.IdentityURI)
					return
				}
				if s.opts.Auth.Mode == "tokens" {
					// A deployment's clients (the openstack CLI) read
					// errors[0].detail from every 4xx, as they do behind
					// keystonemiddleware; noauth2's bare body is kept for
					// noauth, where the conformance suite expects it.
					s.writeError(c, &httpError{status: 401, detail: "The request you have made requires authentication."})
					return
				}
				writeUnauthorized(c)
				return
			}
			audit.Identify(c.r.Context(), c.auth.user, c.auth.project)
		}
		if err := c.negotiateVersion(); err != nil {
			s.writeError(c, err)
			return
		}
		w.Header().Set("OpenStack-API-Version", fmt.Sprintf("placement 1.%d", c.mv))
		if err := c.checkBodyContentType(); err != nil {
			s.writeError(c, err)
			return
		}
		if methods == nil {
			s.writeError(c, raisedErr(errNotFound("")))
			return
		}
		rows := methods[r.Method]
		if rows == nil {
			w.Header().Set("Allow", allow)
			w.Header().Add("Vary", "openstack-api-version")
			s.writeError(c, &httpError{status: 405, detail: "The method specified is not allowed for this resource."})
			return
		}
		if err := s.serve(c, rows); err != nil {
			s.writeError(c, err)
		}
	})
}

// negotiateVersion reads OpenStack-API-Version as microversion_parse does.
func (c *reqCtx) negotiateVersion() error {
	raw := ""
	if vals := c.r.Header.Values("OpenStack-API-Version"); len(vals) > 0 {
		parts := strings.Split(strings.Join(vals, ","), ",")
		for i := len(parts) - 1; i >= 0; i-- {
			f := strings.Fields(parts[i])
			if len(f) >= 2 && strings.EqualFold(f[0], "placement") {
				raw = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(parts[i]), f[0]))
				break
			}
		}
	}
	if raw == "" {
		c.mv = 0
		c.hasMV = true
		return nil
	}
	if raw == "latest" {
		c.mv = maxMinor
		c.hasMV = true
		return nil
	}
	// microversion_parse: Version(*(int(v) for v in raw.split('.', 1))),
	// with Python's int() and its error words.
	maj, min, ok := strings.Cut(raw, ".")
	if !ok {
		return &httpError{status: 400, detail: "Invalid microversion: invalid version string: " + raw + "; Version.__new__() missing 1 required positional argument: 'minor'"}
	}
	a, ok1 := pycompat.Int(maj)
	b, ok2 := pycompat.Int(min)
	switch {
	case !ok1:
		return &httpError{status: 400, detail: "Invalid microversion: invalid version string: " + raw + "; invalid literal for int() with base 10: " + pycompat.StrRepr(maj)}
	case !ok2:
		return &httpError{status: 400, detail: "Invalid microversion: invalid version string: " + raw + "; invalid literal for int() with base 10: " + pycompat.StrRepr(min)}
	}
	if a != 1 || b < 0 || b > maxMinor {
		return &httpError{status: 406, detail: "Invalid microversion: Unacceptable version header: " + raw, noVersion: true}
	}
	c.mv = b
	c.hasMV = true
	return nil
}

// httpError is an error answer in OpenStack's format.
type httpError struct {
	status    int
	detail    string
	code      string
	noVersion bool // a 406 for a bad microversion lists the versions
	// raised marks the errors Placement raises past its handlers' wsgify
	// (routing, the content checks, policy, a record not found that the
	// handler does not catch): the microversion middleware gives those
	// its version header but no Vary.
	raised bool
}

// raisedErr marks err as raised past the handler (see httpError.raised).
func raisedErr(err *httpError) *httpError {
	err.raised = true
	return err
}

func (e *httpError) Error() string { return fmt.Sprintf("%d: %s", e.status, e.detail) }

func errNotFound(detail string) *httpError {
	return &httpError{status: 404, detail: detail}
}

func errBadRequest(format string, args ...any) *httpError {
	return &httpError{status: 400, detail: fmt.Sprintf(format, args...)}
}

func errConflict(code, format string, args ...any) *httpError {
	return &httpError{status: 409, code: code, detail: fmt.Sprintf(format, args...)}
}

// Placement's error codes.
const (
	codeDefault          = "placement.undefined_code"
	codeInventoryInUse   = "placement.inventory.inuse"
	codeConcurrentUpdate = "placement.concurrent_update"
	codeDuplicateName    = "placement.duplicate_name"
	codeProviderInUse    = "placement.resource_provider.inuse"
	codeCannotDelParent  = "placement.resource_provider.cannot_delete_parent"
	codeProviderNotFound = "placement.resource_provider.not_found"
	codeDuplicateKey     = "placement.query.duplicate_key"
	codeBadValue         = "placement.query.bad_value"
	codeMissingValue     = "placement.query.missing_value"
)

// templatedExplanation is webob's explanation for the statuses whose
// wording quotes the request.
func templatedExplanation(r *http.Request, status int) string {
	switch status {
	case 405:
		return "The method " + r.Method + " is not allowed for this resource."
	case 406:
		// Placement reads a missing or */* Accept as application/json.
		a := r.Header.Get("Accept")
		if a == "" || a == "*/*" {
			a = "application/json"
		}
		return "The resource could not be generated that was acceptable to your browser (content of type " + a + "."
	case 415:
		ct := r.Header.Get("Content-Type")
		if ct == "" {
			ct = "None"
		}
		return "The request media type " + ct + " is not supported by this server."
	}
	return explanations[status]
}

var pyHTMLEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "'", "&#x27;")

// webobHTMLBody is the body webob puts in an HTML error page: the
// explanation and the detail, HTML-escaped, in the status's template.
func webobHTMLBody(r *http.Request, he *httpError) string {
	esc := pyHTMLEscaper.Replace
	switch he.status {
	case 405:
		return "The method " + esc(r.Method) + " is not allowed for this resource. <br /><br />\n" + esc(he.detail)
	case 406:
		a := r.Header.Get("Accept")
		if a == "" || a == "*/*" {
			a = "application/json"
		}
		return "The resource could not be generated that was acceptable to your browser\n(content of type " + esc(a) + ". <br /><br />\n" + esc(he.detail)
	case 415:
		ct := r.Header.Get("Content-Type")
		if ct == "" {
			ct = "None"
		}
		return "The request media type " + esc(ct) + " is not supported by this server.\n<br /><br />\n" + esc(he.detail)
	}
	return esc(explanations[he.status]) + "<br /><br />\n" + esc(he.detail) + "\n\n"
}

// webob's explanation line for each status, which Placement's error
// details begin with.
var explanations = map[int]string{
	400: "The server could not comply with the request since it is either malformed or otherwise incorrect.",
	401: "This server could not verify that you are authorized to access the document you requested. Either you supplied the wrong credentials (e.g., bad password), or your browser does not understand how to supply the credentials required.",
	403: "Access was denied to this resource.",
	404: "The resource could not be found.",
	405: "",
	406: "The resource could not be generated that was acceptable to your browser (content of type application/json.",
	409: "There was a conflict when trying to complete your request.",
	415: "The request media type is not supported by this server.",
	500: "The server has either erred or is incapable of performing the requested operation.",
	503: "The server is currently unavailable. Please try again at a later time.",
}

func (s *API) writeError(c *reqCtx, err error) {
	var he *httpError
	if !errors.As(err, &he) {
		he = s.mapError(err)
	}
	if he.status >= 500 {
		s.log.Error("placement API error", "request_id", c.id, "path", c.r.URL.Path, "error", err)
	}
	title := http.StatusText(he.status)
	detail := he.detail
	switch he.status {
	case 405, 406, 415:
		// webob's explanations that quote the request come out in
		// this shape.
		detail = templatedExplanation(c.r, he.status) + " \n\n " + detail
	default:
		if bestErrorType(c.r.Header.Get("Accept")) != "text/html" {
			detail = webobStripTags(detail)
		}
		exp := explanations[he.status]
		if detail == "" {
			detail = exp + "\n\n   "
		} else {
			detail = exp + "\n\n " + detail + "  "
		}
	}
	h := c.w.Header()
	if c.hasMV && !he.raised && !slices.Contains(h.Values("Vary"), "openstack-api-version") {
		// The microversion middleware marks errors as it marks successes.
		h.Add("Vary", "openstack-api-version")
	}
	switch bestErrorType(c.r.Header.Get("Accept")) {
	case "text/html":
		html := webobHTMLBody(c.r, he)
		h.Set("Content-Type", "text/html; charset=UTF-8")
		c.w.WriteHeader(he.status)
		fmt.Fprintf(c.w, "<html>\n <head>\n  <title>%d %s</title>\n </head>\n <body>\n  <h1>%d %s</h1>\n  %s\n </body>\n</html>",
			he.status, title, he.status, title, html)
		return
	case "text/plain":
		h.Set("Content-Type", "text/plain; charset=UTF-8")
		c.w.WriteHeader(he.status)
		fmt.Fprintf(c.w, "%d %s\n\n%s", he.status, title, detail)
		return
	}
	e := map[string]any{"status": he.status, "title": title, "detail": detail, "request_id": c.id}
	if c.hasMV && c.atLeast(23) {
		code := he.code
		if code == "" {
			code = codeDefault
		}
		e["code"] = code
	}
	if he.noVersion {
		e["max_version"] = fmt.Sprintf("1.%d", maxMinor)
		e["min_version"] = "1.0"
	}
	h.Set("Content-Type", "application/json")
	c.w.WriteHeader(he.status)
	_ = json.NewEncoder(c.w).Encode(map[string]any{"errors": []any{e}})
}

// mapError turns the in-process errors into HTTP answers.
func (s *API) mapError(err error) *httpError {
	msg := placement.Detail(err)
	switch {
	case errors.Is(err, placement.ErrConsumerGenerationConflict):
		return errConflict(codeConcurrentUpdate, "%s", msg)
	case errors.Is(err, placement.ErrGenerationConflict):
		return errConflict(codeConcurrentUpdate, "resource provider generation conflict: %s", msg)
	case errors.Is(err, placement.ErrConcurrentUpdate):
		return errConflict(codeConcurrentUpdate, "%s", msg)
	case errors.Is(err, placement.ErrInsufficientCapacity):
		return errConflict(codeDefault, "Unable to allocate inventory: %s", msg)
	case errors.Is(err, placement.ErrInventoryInUse):
		return errConflict(codeInventoryInUse, "%s", msg)
	case errors.Is(err, placement.ErrProviderInUse):
		return errConflict(codeProviderInUse, "%s", msg)
	case errors.Is(err, placement.ErrProviderHasChildren):
		return errConflict(codeCannotDelParent, "%s", msg)
	case errors.Is(err, placement.ErrDuplicateName):
		return errConflict(codeDuplicateName, "Conflicting resource provider name: %s", msg)
	case errors.Is(err, placement.ErrDuplicateUUID):
		return errConflict(codeDefault, "Conflicting resource provider uuid: %s", msg)
	case errors.Is(err, placement.ErrProviderNotFound), errors.Is(err, placement.ErrNotFound):
		return errNotFound(msg)
	case errors.Is(err, placement.ErrInvalid), errors.Is(err, placement.ErrTooManyOps):
		return errBadRequest("%s", msg)
	case errors.Is(err, placement.ErrSearchTooLarge):
		// Before the deadline check below: a search that ran past the
		// request's deadline is too large, not a store that is down.
		return errBadRequest("%s", msg)
	case etcdretry.Unavailable(err):
		// etcd did not answer before the request's deadline (no quorum,
		// an election): webob's HTTPServiceUnavailable, as Placement
		// answers when its database is unreachable; the client may retry.
		return &httpError{status: http.StatusServiceUnavailable, detail: "The state store did not answer in time; try again."}
	}
	return &httpError{status: 500, detail: msg}
}

var (
	webobBrRe      = regexp.MustCompile(`(?is)<br.*?>`)
	webobCommentRe = regexp.MustCompile(`<!--|-->`)
	webobTagRe     = regexp.MustCompile(`(?s)<.*?>`)
)

// webobStripTags is webob's strip_tags, which Placement's JSON and plain
// error bodies pass their detail through: newlines become spaces and
// anything tag-like goes (a multi-line validation message arrives on one
// line).
func webobStripTags(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	s = strings.ReplaceAll(s, "\r", "")
	s = webobBrRe.ReplaceAllString(s, "\n")
	s = webobCommentRe.ReplaceAllString(s, "")
	return webobTagRe.ReplaceAllString(s, "")
}

func writeUnauthorized(c *reqCtx) {
	c.w.Header().Set("Content-Type", "application/json")
	c.w.WriteHeader(401)
	_ = json.NewEncoder(c.w).Encode(map[string]string{
		"message": "This server could not verify that you are authorized to access the document you requested. Either you supplied the wrong credentials (e.g., bad password), or your browser does not understand how to supply the credentials required.<br /><br />\n\n\n",
		"code":    "401 Unauthorized",
		"title":   "Unauthorized",
	})
}

// writeJSON answers status with v as JSON and the headers every success
// carries (Vary on the microversion).
func (c *reqCtx) writeJSON(status int, v any) error {
	h := c.w.Header()
	h.Set("Content-Type", "application/json")
	h.Add("Vary", "openstack-api-version")
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode response: %w", err)
	}
	c.w.WriteHeader(status)
	_, _ = c.w.Write(b)
	return nil
}

// writeJSONBytes answers status with body, JSON already encoded, as
// writeJSON does, and says its length: a large answer (candidates) goes
// out in one piece instead of in chunks.
func (c *reqCtx) writeJSONBytes(status int, body []byte) {
	h := c.w.Header()
	h.Set("Content-Type", "application/json")
	h.Add("Vary", "openstack-api-version")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	c.w.WriteHeader(status)
	_, _ = c.w.Write(body)
}

// writeEmpty answers status (204) with no body.
func (c *reqCtx) writeEmpty(status int) error {
	h := c.w.Header()
	h.Add("Vary", "openstack-api-version")
	h.Del("Content-Type")
	c.w.WriteHeader(status)
	return nil
}
