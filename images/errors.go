package images

import (
	"net/http"
	"strconv"

	"github.com/berth-project/berth/internal/pycompat"
)

// apiError is one of Glance's error answers: a webob HTTPException with
// an explanation, which webob renders as a page in the type the Accept
// header prefers.
type apiError struct {
	status      int
	explanation string
	allow       string // the Allow header of a 405
	// asJSON writes the JSON page whatever the Accept header: for
	// Berth's own refusals, which a client must show in words (the
	// openstack CLI shows only the status line of a plain-text page).
	asJSON bool
}

func (e *apiError) Error() string { return strconv.Itoa(e.status) + ": " + e.explanation }

func badRequest(msg string) *apiError {
	return &apiError{status: http.StatusBadRequest, explanation: msg}
}
func forbidden(msg string) *apiError {
	return &apiError{status: http.StatusForbidden, explanation: msg}
}
func notFound(msg string) *apiError { return &apiError{status: http.StatusNotFound, explanation: msg} }
func conflict(msg string) *apiError { return &apiError{status: http.StatusConflict, explanation: msg} }

// imageNotFound is Glance's 404 for an image id the caller cannot see
// (its database's words).
func imageNotFound(id string) *apiError { return notFound("No image found with ID " + id) }

// notAuthorized is Glance's policy refusal (glance.api.policy.Enforcer).
func notAuthorized(action string) *apiError {
	return forbidden("You are not authorized to complete " + action + " action.")
}

// webob's titles of the statuses Glance answers with.
var titles = map[int]string{400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
	405: "Method Not Allowed", 409: "Conflict", 413: "Request Entity Too Large", 415: "Unsupported Media Type",
	500: "Internal Server Error", 503: "Service Unavailable"}

// write renders e as webob's HTTPException page (pycompat.WebobError).
func (e *apiError) write(w http.ResponseWriter, r *http.Request) {
	if e.allow != "" {
		w.Header().Set("Allow", e.allow)
	}
	accept := r.Header.Get("Accept")
	if e.asJSON {
		accept = "application/json"
	}
	pycompat.WebobError(w, accept, e.status, titles[e.status], e.explanation)
}
