// Package audit logs every mutating request an API serves, once, with
// who asked, what, and how it ended (issue 18): one hclog line, message
// "audit", with stable keys
//
//	api         the API ("compute", "placement", "image")
//	user        the caller's user id ("" when it was refused before
//	            its token was checked: an anonymous 401)
//	project     the caller's project id ("" for a system scope)
//	request_id  the answer's X-OpenStack-Request-Id, which the work a
//	            request starts carries into other processes' logs
//	method      POST, PUT, PATCH or DELETE
//	path        the request's path
//	action      a server or aggregate action's name ("" for none)
//	status      the answer's status code
//
// Handler wraps an API; the API's auth step, which alone knows the
// caller, calls Identify (identity.Authenticate does for the compute API
// and /v1), and a handler that dispatches an action body calls Action.
// A read (GET, HEAD) is not logged: it changes nothing. No token or
// password is ever logged. The line is at Info: while the logger's level
// is above it, Handler serves the request untouched (no record in its
// context), checked per request so a level changed at run time counts.
package audit

import (
	"context"
	"net/http"
	"sync"

	"github.com/hashicorp/go-hclog"
)

// record is one request's audit line in the making, filled by the API
// while it serves the request.
type record struct {
	mu                    sync.Mutex
	user, project, action string
}

type recordKey struct{}

func recordOf(ctx context.Context) *record {
	r, _ := ctx.Value(recordKey{}).(*record)
	return r
}

// Identify records the caller of the request ctx belongs to (nothing
// when ctx is not a request Handler audits).
func Identify(ctx context.Context, user, project string) {
	if r := recordOf(ctx); r != nil {
		r.mu.Lock()
		r.user, r.project = user, project
		r.mu.Unlock()
	}
}

// Action records the action a request's body named (an os-aggregates
// or server action).
func Action(ctx context.Context, name string) {
	if r := recordOf(ctx); r != nil {
		r.mu.Lock()
		r.action = name
		r.mu.Unlock()
	}
}

// mutating says whether a request of method can change something.
func mutating(method string) bool {
	switch method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return true
	}
	return false
}

// Handler logs each mutating request next serves to log, once, after
// it is answered (see the package doc for the keys).
func Handler(api string, log hclog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A logger that drops Info drops every audit line: the request is
		// served as it is, without the record, the writer and the line's
		// arguments it would have cost (a boot's every create).
		if !mutating(r.Method) || !log.IsInfo() {
			next.ServeHTTP(w, r)
			return
		}
		rec := &record{}
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r.WithContext(context.WithValue(r.Context(), recordKey{}, rec)))
		status := sw.status
		if status == 0 {
			status = http.StatusOK // nothing written: net/http answers 200
		}
		rec.mu.Lock()
		defer rec.mu.Unlock()
		log.Info("audit", "api", api, "user", rec.user, "project", rec.project,
			"request_id", w.Header().Get("X-Openstack-Request-Id"), "method", r.Method, "path", r.URL.Path,
			"action", rec.action, "status", status)
	})
}

// statusWriter notes the status an answer was written with.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
