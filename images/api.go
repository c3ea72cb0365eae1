package images

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/berth-project/berth/identity"
	"github.com/berth-project/berth/internal/audit"
	"github.com/berth-project/berth/internal/metrics"
	"github.com/berth-project/berth/internal/pycompat"
)

// Options are the image API's choices beside its store.
type Options struct {
	// Verifier checks each request's X-Auth-Token (keystonemiddleware's
	// part); nil serves noauth: every caller is an admin with no
	// project, for `berth dev` and tests only.
	Verifier identity.Verifier
	// IdentityURI is where a client logs in, named in a 401's
	// WWW-Authenticate as keystonemiddleware names it.
	IdentityURI string
}

// API is the image service's HTTP API, a Glance v2 subset.
type API struct {
	store    *Store
	log      hclog.Logger
	verifier identity.Verifier
	// identityURI is named in a 401 (Options.IdentityURI).
	identityURI string
	now         func() time.Time
}

// NewAPI serves the images of store.
func NewAPI(store *Store, log hclog.Logger, o Options) *API {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	return &API{store: store, log: log, verifier: o.Verifier, identityURI: o.IdentityURI, now: time.Now}
}

// maxBody bounds a create's or a PATCH's JSON: an image's metadata,
// never its data.
const maxBody = 1 << 20

// request is one request below /v2, past authentication.
type request struct {
	w   http.ResponseWriter
	r   *http.Request
	who caller
}

// ServeHTTP routes as glance-api does: the version documents at / (300
// Multiple Choices) and /versions (200), the v2 router below /v2/, and
// for any other path the version list again, as Glance's version
// negotiation answers a version it does not serve.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	switch {
	case p == "/versions":
		metrics.SetRoute(r, "/versions")
		a.writeVersions(w, r, http.StatusOK)
	case strings.HasPrefix(p, "/v2/"):
		a.serveV2(w, r, strings.TrimPrefix(p, "/v2"))
	default:
		metrics.SetRoute(r, "/")
		a.writeVersions(w, r, http.StatusMultipleChoices)
	}
}

// serveV2 is glance.api.v2.router with keystonemiddleware ahead of it.
func (a *API) serveV2(w http.ResponseWriter, r *http.Request, sub string) {
	w.Header().Set("X-Openstack-Request-Id", "req-"+newUUID())
	type handler func(*request, string) *apiError
	var h handler
	var route, allow string
	parts := strings.Split(strings.TrimPrefix(sub, "/"), "/")
	switch {
	case sub == "/images":
		route, allow = "/v2/images", "GET, POST"
		switch r.Method {
		case http.MethodGet:
			h = func(q *request, _ string) *apiError { return a.list(q) }
		case http.MethodPost:
			h = func(q *request, _ string) *apiError { return a.create(q) }
		}
	case len(parts) == 2 && parts[0] == "images" && parts[1] != "":
		route, allow = "/v2/images/{image_id}", "GET, PATCH, DELETE"
		switch r.Method {
		case http.MethodGet:
			h = a.show
		case http.MethodPatch:
			h = a.update
		case http.MethodDelete:
			h = a.delete
		}
	case len(parts) == 3 && parts[0] == "images" && parts[1] != "" && parts[2] == "file":
		route, allow = "/v2/images/{image_id}/file", "GET, PUT"
		switch r.Method {
		case http.MethodGet:
			h = a.download
		case http.MethodPut:
			h = a.upload
		}
	case sub == "/schemas/image":
		route, allow = "/v2/schemas/image", "GET"
		if r.Method == http.MethodGet {
			h = func(q *request, _ string) *apiError { return a.showSchema(q) }
		}
	default:
		metrics.SetRoute(r, "/v2")
		(&apiError{status: http.StatusNotFound, explanation: "The resource could not be found."}).write(w, r)
		return
	}
	metrics.SetRoute(r, route)
	if h == nil {
		(&apiError{status: http.StatusMethodNotAllowed, allow: allow,
			explanation: "The method " + r.Method + " is not allowed for this resource."}).write(w, r)
		return
	}
	creds, ok := a.authenticate(r)
	if !ok {
		identity.RejectUnauthenticated(w, a.identityURI)
		return
	}
	audit.Identify(r.Context(), creds.UserID, creds.ProjectID)
	id := ""
	if len(parts) >= 2 && parts[0] == "images" {
		id = parts[1]
	}
	q := &request{w: w, r: r, who: callerOf(creds)}
	defer func() {
		if p := recover(); p != nil {
			a.log.Error("image API panic", "method", r.Method, "path", r.URL.Path, "panic", fmt.Sprint(p))
			(&apiError{status: http.StatusInternalServerError, explanation: "The server has either erred or is incapable of performing the requested operation."}).write(w, r)
		}
	}()
	if e := h(q, id); e != nil {
		e.write(w, r)
	}
}

// authenticate is keystonemiddleware: the token's credentials, or with
// no verifier (noauth) an admin's.
func (a *API) authenticate(r *http.Request) (identity.Credentials, bool) {
	if a.verifier == nil {
		return identity.Credentials{UserName: "noauth", Roles: []string{"admin", "member", "reader"}}, true
	}
	tok := r.Header.Get("X-Auth-Token")
	if tok == "" {
		return identity.Credentials{}, false
	}
	c, err := a.verifier.Verify(r.Context(), tok)
	if err != nil {
		a.log.Debug("X-Auth-Token refused", "path", r.URL.Path, "error", err)
		return identity.Credentials{}, false
	}
	return c, true
}

// storeError is a store failure that is not Glance's to word: the
// state store could not be read or written.
func (a *API) storeError(q *request, err error) *apiError {
	a.log.Error("image API: state store error", "method", q.r.Method, "path", q.r.URL.Path, "error", err)
	return &apiError{status: http.StatusServiceUnavailable, explanation: "The state store could not be read or written; try again."}
}

// writeJSON writes out with Glance's Content-Type.
func writeJSON(w http.ResponseWriter, status int, out any) {
	b := dumps(out)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// list is GET /v2/images: the query's 400s first (Glance's deserializer
// runs before its controller), then get_images.
func (a *API) list(q *request) *apiError {
	lq, e := parseList(q.r.URL.Query())
	if e != nil {
		return e
	}
	if !q.who.admin && !q.who.reader {
		return notAuthorized("get_images")
	}
	all, err := a.store.List(q.r.Context())
	if err != nil {
		return a.storeError(q, err)
	}
	page, more, e := selectPage(all, q.who, lq)
	if e != nil {
		return e
	}
	writeJSON(q.w, http.StatusOK, listView(page, q.r.URL.RawQuery, more))
	return nil
}

// visible reads image id for the caller: Glance's 404 when it has none
// the caller may see.
func (a *API) visible(q *request, id string) (*Image, *apiError) {
	img, err := a.store.Get(q.r.Context(), id)
	if errors.Is(err, ErrNotFound) || (err == nil && !q.who.sees(img)) {
		return nil, imageNotFound(id)
	}
	if err != nil {
		return nil, a.storeError(q, err)
	}
	return img, nil
}

// show is GET /v2/images/{id}.
func (a *API) show(q *request, id string) *apiError {
	img, e := a.visible(q, id)
	if e != nil {
		return e
	}
	writeJSON(q.w, http.StatusOK, view(img))
	return nil
}

// delete is DELETE /v2/images/{id}: 404 for an image the caller cannot
// see, 403 for a caller who may not delete it or a protected image.
func (a *API) delete(q *request, id string) *apiError {
	if _, e := a.visible(q, id); e != nil {
		return e
	}
	if !q.who.admin {
		return notAuthorized("delete_image")
	}
	err := a.store.Delete(q.r.Context(), id, nil)
	switch {
	case errors.Is(err, ErrNotFound):
		return imageNotFound(id)
	case errors.Is(err, ErrProtected):
		return forbidden("Image " + id + " is protected and cannot be deleted.")
	case err != nil:
		return a.storeError(q, err)
	}
	a.log.Info("image deleted", "image", id)
	q.w.WriteHeader(http.StatusNoContent)
	return nil
}

// download is GET /v2/images/{id}/file: Glance's 204 for an image with
// no data, which every Berth image is.
func (a *API) download(q *request, id string) *apiError {
	if _, e := a.visible(q, id); e != nil {
		return e
	}
	q.w.WriteHeader(http.StatusNoContent)
	return nil
}

// upload is PUT /v2/images/{id}/file. Berth keeps no image data: an
// empty upload (what `openstack image create NAME` sends when its stdin
// is not a terminal, as in a script) is accepted with nothing to keep;
// any data is refused, in JSON whatever the Accept header (the SDK sends
// none), and the client (openstacksdk) then deletes the image it just
// created, so `image create --file` fails whole, saying why.
func (a *API) upload(q *request, id string) *apiError {
	if _, e := a.visible(q, id); e != nil {
		return e
	}
	if !q.who.admin {
		return notAuthorized("upload_image")
	}
	var one [1]byte
	if n, _ := io.ReadFull(q.r.Body, one[:]); n > 0 {
		return &apiError{status: http.StatusRequestEntityTooLarge, asJSON: true, explanation: "Berth stores no image data: " +
			"an image is what a server runs (its " + CommandProperty + " property), not a disk. " +
			"Create the image without --file or data on stdin."}
	}
	q.w.WriteHeader(http.StatusNoContent)
	return nil
}

// showSchema is GET /v2/schemas/image.
func (a *API) showSchema(q *request) *apiError {
	b, err := json.Marshal(imageSchema)
	if err != nil {
		return a.storeError(q, err)
	}
	q.w.Header().Set("Content-Type", "application/json")
	q.w.WriteHeader(http.StatusOK)
	_, _ = q.w.Write(b)
	return nil
}

// readBody is Glance's JSONRequestDeserializer: no body is "Body
// expected", a body that is not JSON "Malformed JSON". Numbers stay
// json.Number, as the schema check needs them.
func readBody(r *http.Request) (any, pycompat.KeyOrder, *apiError) {
	b, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		return nil, nil, badRequest("The request body could not be read.")
	}
	if len(b) > maxBody {
		return nil, nil, &apiError{status: http.StatusRequestEntityTooLarge, explanation: "Request is too large."}
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, nil, badRequest("Body expected in request.")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil || dec.More() {
		return nil, nil, badRequest("Malformed JSON in request body.")
	}
	return v, pycompat.JSONKeyOrder(b), nil
}
