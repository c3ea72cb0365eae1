package images

import (
	"mime"
	"net/http"
	"strconv"
	"strings"
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

// write renders e as webob's HTTPException page: HTML before JSON on a
// tie, plain text when the Accept header takes neither or is absent.
func (e *apiError) write(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	if e.allow != "" {
		h.Set("Allow", e.allow)
	}
	title := titles[e.status]
	line := strconv.Itoa(e.status) + " " + title
	var body string
	kind := preferred(r.Header.Get("Accept"))
	if e.asJSON {
		kind = "application/json"
	}
	switch kind {
	case "text/html":
		h.Set("Content-Type", "text/html; charset=UTF-8")
		body = "<html>\n <head>\n  <title>" + line + "</title>\n </head>\n <body>\n  <h1>" + line + "</h1>\n  " +
			e.explanation + "<br /><br />\n\n\n\n </body>\n</html>"
	case "application/json":
		h.Set("Content-Type", "application/json")
		body = string(dumps(obj{{"message", e.explanation + "<br /><br />\n\n\n"}, {"code", line}, {"title", title}}))
	default:
		h.Set("Content-Type", "text/plain; charset=UTF-8")
		body = line + "\n\n" + e.explanation + "\n\n   "
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(e.status)
	_, _ = w.Write([]byte(body))
}

// writeUnauthenticated is keystonemiddleware's 401, ahead of Glance: a
// request with no token, or one that does not verify.
func writeUnauthenticated(w http.ResponseWriter) {
	b := dumps(obj{{"error", obj{{"code", 401}, {"title", "Unauthorized"},
		{"message", "The request you have made requires authentication."}}}})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusUnauthorized)
	_, _ = w.Write(b)
}

// preferred is webob's acceptable_offers(['text/html',
// 'application/json']) reduced to its first offer: "" when the header is
// absent or accepts neither.
func preferred(accept string) string {
	if strings.TrimSpace(accept) == "" {
		return ""
	}
	best, bestQ := "", 0.0
	for _, offer := range []string{"text/html", "application/json"} {
		q, spec := 0.0, -1
		for _, part := range strings.Split(accept, ",") {
			mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
			if err != nil {
				continue
			}
			s := -1
			switch {
			case mt == offer:
				s = 2
			case strings.HasSuffix(mt, "/*") && strings.HasPrefix(offer, strings.TrimSuffix(mt, "*")):
				s = 1
			case mt == "*/*":
				s = 0
			}
			if s > spec {
				spec, q = s, 1
				if qs, ok := params["q"]; ok {
					q, _ = strconv.ParseFloat(qs, 64)
				}
			}
		}
		if q > bestQ {
			best, bestQ = offer, q
		}
	}
	return best
}
