package httpapi

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestOversizedBody: a body over maxBodyBytes is answered 413 in
// Placement's error shape, and not read further (it used to be cut at the
// bound and answered as malformed JSON); one of a valid size is judged
// on what it says.
func TestOversizedBody(t *testing.T) {
	a := newAPI(t)
	// A JSON string the handler reads to the bound before it fails.
	body := func(size int) string { return `{"name": "` + strings.Repeat("x", size-len(`{"name": ""}`)) + `"}` }
	for _, tc := range []struct{ method, path string }{
		{http.MethodPost, "/resource_providers"},
		{http.MethodPut, "/allocations/0fb2c1f6-1b46-4b2c-8f3e-0d7e6a4f9a11"},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			r := a.call(tc.method, tc.path, "1.39", body(maxBodyBytes+1))
			want := fmt.Sprintf("at most %d bytes", maxBodyBytes)
			if r.status != http.StatusRequestEntityTooLarge || !strings.Contains(r.errDetail(), want) {
				t.Fatalf("over the bound: %d %q; want 413 saying %q", r.status, r.raw, want)
			}
			errs, _ := r.body["errors"].([]any)
			if e, _ := errs[0].(map[string]any); e["title"] != "Request Entity Too Large" || e["request_id"] == nil {
				t.Errorf("413 body = %v, want Placement's error shape", r.body)
			}
			if r := a.call(tc.method, tc.path, "1.39", body(1000)); r.status != http.StatusBadRequest {
				t.Errorf("a small body with a wrong shape: %d %q, want 400", r.status, r.raw)
			}
		})
	}
}
