package api

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestOversizedBodies: every route that reads a body refuses one over
// maxBodyBytes with Nova's 413 overLimit, and reads no further; one just
// under it is read (and refused or taken for what it says).
func TestOversizedBodies(t *testing.T) {
	srv, _ := newAPI(t)
	// A JSON string the decoder must read to its end to judge.
	body := func(size int) string { return `{"name":"` + strings.Repeat("x", size-len(`{"name":""}`)) + `"}` }
	overLimit := map[string]any{"overLimit": map[string]any{"code": float64(413), "message": "Request is too large."}}
	for _, tc := range []struct{ method, path string }{
		{http.MethodPost, "/v1/servers"},
		{http.MethodPost, "/v1/server-groups"},
		{http.MethodPost, "/v1/os-aggregates"},
		{http.MethodPut, "/v1/os-aggregates/" + someServer},
		{http.MethodPost, "/v1/os-aggregates/" + someServer + "/action"},
		{http.MethodPut, "/v1/services/compute-1"},
		{http.MethodPost, "/v1/cells"},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			status, out := do(t, tc.method, srv.URL+tc.path, body(maxBodyBytes+1))
			if status != http.StatusRequestEntityTooLarge {
				t.Fatalf("over the bound: status %d (%v), want 413", status, out)
			}
			if d := cmp.Diff(overLimit, out); d != "" {
				t.Errorf("over the bound (-want +got):\n%s", d)
			}
			if status, out := do(t, tc.method, srv.URL+tc.path, body(maxBodyBytes)); status == http.StatusRequestEntityTooLarge {
				t.Errorf("at the bound: 413 (%v)", out)
			}
		})
	}
}
