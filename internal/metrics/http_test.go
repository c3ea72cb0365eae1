package metrics

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gorilla/mux"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestInstrumentHTTPLabelsByRouteTemplate(t *testing.T) {
	m := New()
	r := mux.NewRouter()
	r.Use(RouteLabel)
	r.HandleFunc("/v1/servers/{id}", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("{}")) }).Methods(http.MethodGet)
	r.HandleFunc("/v1/servers/{id}", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusConflict) }).Methods(http.MethodDelete)
	srv := httptest.NewServer(m.InstrumentHTTP("compute API", r))
	defer srv.Close()
	do := func(method, path string) {
		req, _ := http.NewRequest(method, srv.URL+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	do(http.MethodGet, "/v1/servers/a")
	do(http.MethodGet, "/v1/servers/b")
	do(http.MethodDelete, "/v1/servers/a")
	do(http.MethodGet, "/no/such/path/9f3c") // a client's path is never a label
	do("BREW", "/v1/servers/a")
	cases := []struct {
		route, method, code string
		want                float64
	}{
		{"/v1/servers/{id}", "GET", "200", 2},
		{"/v1/servers/{id}", "DELETE", "409", 1},
		{RouteUnmatched, "GET", "404", 1},
		{RouteUnmatched, "other", "405", 1},
	}
	for _, c := range cases {
		if got := testutil.ToFloat64(m.http.requests.WithLabelValues("compute API", c.route, c.method, c.code)); got != c.want {
			t.Errorf("requests{%s %s %s} = %v, want %v", c.route, c.method, c.code, got, c.want)
		}
	}
	if n := testutil.CollectAndCount(m.http.requests); n != len(cases) {
		t.Errorf("%d request series, want %d (no label from a client's path)", n, len(cases))
	}
	if n := testutil.CollectAndCount(m.http.seconds); n != 4 {
		t.Errorf("%d latency series, want 4 (route x method)", n)
	}
}

func TestInstrumentHTTPOnNilMetricsIsTheHandler(t *testing.T) {
	var m *Metrics
	h := http.NotFoundHandler()
	if got := m.InstrumentHTTP("x", h); got == nil {
		t.Fatal("nil handler")
	}
}

// TestSetRouteLabelsWithoutMux: a router of its own (the Nova API's route
// table) names its template with SetRoute.
func TestSetRouteLabelsWithoutMux(t *testing.T) {
	m := New()
	h := m.InstrumentHTTP("compute API", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/nothing" {
			SetRoute(r, "/v2.1/flavors/{id}")
		}
		w.WriteHeader(http.StatusAccepted)
	}))
	for _, p := range []string{"/v2.1/flavors/1", "/v2.1/flavors/2", "/nothing"} {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodDelete, p, nil))
	}
	if got := testutil.ToFloat64(m.http.requests.WithLabelValues("compute API", "/v2.1/flavors/{id}", "DELETE", "202")); got != 2 {
		t.Errorf("templated requests = %v, want 2", got)
	}
	if got := testutil.ToFloat64(m.http.requests.WithLabelValues("compute API", RouteUnmatched, "DELETE", "202")); got != 1 {
		t.Errorf("unmatched requests = %v, want 1", got)
	}
	SetRoute(httptest.NewRequest(http.MethodGet, "/", nil), "/x") // outside InstrumentHTTP: no effect, no panic
}
