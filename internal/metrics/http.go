package metrics

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/gorilla/mux"
	"github.com/prometheus/client_golang/prometheus"
)

// RouteUnmatched labels requests no route matched (404s and 405s of the
// router): their paths are the client's and must not become labels.
const RouteUnmatched = "unmatched"

// httpMetrics are the API servers' request counters and latencies, by
// server (compute API, placement, scheduler), route template (bounded:
// "/v1/servers/{id}", never the id), method and status code.
type httpMetrics struct {
	requests *prometheus.CounterVec
	seconds  *prometheus.HistogramVec
}

func newHTTPMetrics(reg *prometheus.Registry) *httpMetrics {
	h := &httpMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_http_requests_total",
			Help: "HTTP requests answered, by server, route template, method and status code.",
		}, []string{"server", "route", "method", "code"}),
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "berth_http_request_duration_seconds",
			Help:    "Time to answer an HTTP request, by server, route template and method.",
			Buckets: latencyBuckets,
		}, []string{"server", "route", "method"}),
	}
	reg.MustRegister(h.requests, h.seconds)
	return h
}

type routeKey struct{}

// routeHolder is where the router's middleware (RouteLabel) leaves the
// matched route for InstrumentHTTP, which wraps the router from outside
// and so cannot see mux's per-request route itself.
type routeHolder struct{ route string }

// InstrumentHTTP counts and times server's requests. The route label is
// set by RouteLabel inside the router; a request it never reached (no
// route matched) is RouteUnmatched.
func (m *Metrics) InstrumentHTTP(server string, next http.Handler) http.Handler {
	if m == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		holder := &routeHolder{route: RouteUnmatched}
		rec := &codeRecorder{ResponseWriter: w, code: http.StatusOK}
		next.ServeHTTP(rec, r.WithContext(context.WithValue(r.Context(), routeKey{}, holder)))
		method := r.Method
		switch method {
		case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions:
		default:
			method = "other" // the client's word: not a label
		}
		m.http.requests.WithLabelValues(server, holder.route, method, strconv.Itoa(rec.code)).Inc()
		m.http.seconds.WithLabelValues(server, holder.route, method).Observe(time.Since(start).Seconds())
	})
}

// RouteLabel is a gorilla/mux middleware (router.Use) that tells
// InstrumentHTTP which route template matched.
func RouteLabel(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h, ok := r.Context().Value(routeKey{}).(*routeHolder); ok {
			if rt := mux.CurrentRoute(r); rt != nil {
				if tmpl, err := rt.GetPathTemplate(); err == nil {
					h.route = tmpl
				}
			}
		}
		next.ServeHTTP(w, r)
	})
}

// SetRoute tells InstrumentHTTP which route template matched, for a
// router that is not gorilla/mux (the Nova API's route table). A request
// InstrumentHTTP does not wrap is left alone.
func SetRoute(r *http.Request, template string) {
	if h, ok := r.Context().Value(routeKey{}).(*routeHolder); ok {
		h.route = template
	}
}

// codeRecorder remembers the status code written.
type codeRecorder struct {
	http.ResponseWriter
	code  int
	wrote bool
}

func (c *codeRecorder) WriteHeader(code int) {
	if !c.wrote {
		c.code, c.wrote = code, true
	}
	c.ResponseWriter.WriteHeader(code)
}

func (c *codeRecorder) Write(b []byte) (int, error) {
	c.wrote = true
	return c.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the real writer (flushes,
// deadlines).
func (c *codeRecorder) Unwrap() http.ResponseWriter { return c.ResponseWriter }
