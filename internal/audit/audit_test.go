package audit

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/berth-project/berth/internal/logtest"
)

// TestHandlerLogsEachMutationOnce: one line per mutating request, with
// the caller the API identified, the action, the answer's request id and
// status; none for a read; an anonymous refusal is logged without a
// user; the token never appears.
func TestHandlerLogsEachMutationOnce(t *testing.T) {
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-OpenStack-Request-Id", "req-"+r.Header.Get("X-Test-Id"))
		if r.Header.Get("X-Auth-Token") == "" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		Identify(r.Context(), "alice", "demo")
		if strings.HasSuffix(r.URL.Path, "/action") {
			Action(r.Context(), "add_host")
		}
		switch r.Method {
		case http.MethodPost:
			w.WriteHeader(http.StatusAccepted)
		case http.MethodDelete:
			w.WriteHeader(http.StatusNoContent)
		case http.MethodPut:
			_, _ = w.Write([]byte("{}")) // an implicit 200
		}
	})
	for _, tc := range []struct {
		desc, method, path, token string
		want                      map[string]any // nil: no line
	}{
		{"a create", "POST", "/v2.1/servers", "secret-token", map[string]any{"user": "alice", "project": "demo",
			"method": "POST", "path": "/v2.1/servers", "action": "", "status": float64(202)}},
		{"an action", "POST", "/v2.1/os-aggregates/1/action", "secret-token", map[string]any{"user": "alice",
			"action": "add_host", "status": float64(202)}},
		{"a delete", "DELETE", "/v1/servers/x", "secret-token", map[string]any{"method": "DELETE", "status": float64(204)}},
		{"an implicit 200", "PUT", "/v1/services/h", "secret-token", map[string]any{"status": float64(200)}},
		{"anonymous, refused", "PATCH", "/v2/images/x", "", map[string]any{"user": "", "project": "", "status": float64(401)}},
		{"a read is not audited", "GET", "/v2.1/servers", "secret-token", nil},
	} {
		var logs logtest.Buffer
		h := Handler("compute", hclog.New(&hclog.LoggerOptions{Output: &logs, JSONFormat: true}), inner)
		req := httptest.NewRequest(tc.method, tc.path, nil)
		req.Header.Set("X-Test-Id", "1234")
		if tc.token != "" {
			req.Header.Set("X-Auth-Token", tc.token)
		}
		h.ServeHTTP(httptest.NewRecorder(), req)
		lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
		if tc.want == nil {
			if logs.String() != "" {
				t.Errorf("%s: logged %s", tc.desc, logs.String())
			}
			continue
		}
		if len(lines) != 1 {
			t.Fatalf("%s: %d lines, want one: %s", tc.desc, len(lines), logs.String())
		}
		if strings.Contains(lines[0], "secret-token") {
			t.Errorf("%s: the token is in the log: %s", tc.desc, lines[0])
		}
		var got map[string]any
		if err := json.Unmarshal([]byte(lines[0]), &got); err != nil {
			t.Fatalf("%s: %v: %s", tc.desc, err, lines[0])
		}
		tc.want["@message"], tc.want["api"], tc.want["request_id"] = "audit", "compute", "req-1234"
		for k, v := range tc.want {
			if got[k] != v {
				t.Errorf("%s: %s = %v, want %v (line %s)", tc.desc, k, got[k], v, lines[0])
			}
		}
	}
}

// TestHandlerAboveInfoServesUntouched: with the logger's level above Info
// a mutation is served as it is (its answer whole, no audit record in its
// context) and nothing is logged; the level set back to Info at run time
// logs the next one.
func TestHandlerAboveInfoServesUntouched(t *testing.T) {
	var sawRecord bool
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sawRecord = recordOf(r.Context()) != nil
		Identify(r.Context(), "alice", "demo") // a no-op without a record
		w.WriteHeader(http.StatusAccepted)
	})
	var logs logtest.Buffer
	log := hclog.New(&hclog.LoggerOptions{Output: &logs, JSONFormat: true, Level: hclog.Warn})
	h := Handler("compute", log, inner)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v2.1/servers", nil))
	if rec.Code != http.StatusAccepted || sawRecord || logs.String() != "" {
		t.Fatalf("at Warn: status %d, record in context %v, logged %q; want 202, false, nothing", rec.Code, sawRecord, logs.String())
	}
	log.SetLevel(hclog.Info)
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/v2.1/servers", nil))
	if !sawRecord || !strings.Contains(logs.String(), `"user":"alice"`) {
		t.Fatalf("at Info: record in context %v, logged %q; want the line with the caller", sawRecord, logs.String())
	}
}
