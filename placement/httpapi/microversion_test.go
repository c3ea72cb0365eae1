package httpapi

import (
	"net/http"
	"strings"
	"testing"
)

func TestHTTPVersionDocument(t *testing.T) {
	a := newAPI(t)
	r := a.must(200, "GET", "/", "", nil, "X-Auth-Token:")
	v := r.body["versions"].([]any)[0].(map[string]any)
	if v["min_version"] != "1.0" || v["max_version"] != "1.39" || v["id"] != "v1.0" || v["status"] != "CURRENT" {
		t.Fatalf("version document %v", v)
	}
}

func TestHTTPMicroversionNegotiation(t *testing.T) {
	a := newAPI(t)
	for _, tc := range []struct {
		desc, header string
		status       int
		answered     string // OpenStack-API-Version answered, "" to skip
	}{
		{"none is the minimum", "", 200, "placement 1.0"},
		{"latest is the maximum", "placement latest", 200, "placement 1.39"},
		{"explicit", "placement 1.17", 200, "placement 1.17"},
		{"other services' versions are ignored", "compute 2.1, placement 1.5", 200, "placement 1.5"},
		{"above the maximum", "placement 1.40", 406, ""},
		{"major 2", "placement 2.0", 406, ""},
		{"not a version", "placement one.two", 400, ""},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			var hdrs []string
			if tc.header != "" {
				hdrs = append(hdrs, "OpenStack-API-Version:"+tc.header)
			}
			r := a.call("GET", "/resource_providers", "", nil, hdrs...)
			if r.status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.status, tc.status, r.raw)
			}
			if tc.answered != "" {
				if got := r.header.Get("OpenStack-API-Version"); got != tc.answered {
					t.Errorf("OpenStack-API-Version %q, want %q", got, tc.answered)
				}
				if !strings.Contains(strings.ToLower(strings.Join(r.header.Values("Vary"), ",")), "openstack-api-version") {
					t.Errorf("Vary %q lacks openstack-api-version", r.header.Values("Vary"))
				}
			}
			if tc.status == 406 {
				e := r.body["errors"].([]any)[0].(map[string]any)
				if e["max_version"] != "1.39" || e["min_version"] != "1.0" {
					t.Errorf("406 without the version range: %s", r.raw)
				}
			}
		})
	}
}

// The error format and the status of every generic refusal, with the
// `code` field from 1.23 on and not before.
func TestHTTPGenericErrors(t *testing.T) {
	a := newAPI(t)
	rp := a.provider("7bd0a2b6-1a0c-4a8a-9e5d-2f1a4b7a0c01")
	runErrCases(t, a, []errCase{
		{desc: "no token", method: "GET", path: "/resource_providers", hdrs: []string{"X-Auth-Token:"}, status: 401},
		{desc: "unknown path", method: "GET", path: "/nothing/here", mv: "1.23", status: 404, code: codeDefault},
		{desc: "wrong method", method: "PATCH", path: "/resource_providers", mv: "1.23", status: 405, code: codeDefault},
		{desc: "only text accepted", method: "GET", path: "/resource_providers", mv: "1.23", hdrs: []string{"Accept: text/plain"}, status: 406},
		{desc: "body without media type", method: "POST", path: "/resource_providers", mv: "1.23", body: `{"name": "x"}`, hdrs: []string{"Content-Type:"}, status: 400, detail: "content-type header required when content-length > 0"},
		{desc: "wrong media type", method: "POST", path: "/resource_providers", mv: "1.23", body: `{"name": "x"}`, hdrs: []string{"Content-Type: text/plain"}, status: 415, detail: "The media type text/plain is not supported, use application/json"},
		{desc: "no body before provider lookup", method: "PUT", path: "/resource_providers/" + rp, status: 415, detail: "The media type None is not supported"},
		{desc: "malformed JSON", method: "POST", path: "/resource_providers", mv: "1.23", body: `{"name": `, status: 400, code: codeDefault, detail: "Malformed JSON"},
		{desc: "a route newer than the microversion", method: "GET", path: "/traits", mv: "1.5", status: 404},
	})
	r := a.must(405, "DELETE", "/resource_providers", "", nil)
	if got := r.header.Get("Allow"); got != "GET, POST" {
		t.Errorf("Allow %q, want %q", got, "GET, POST")
	}
	r = a.must(404, "GET", "/nothing", "1.22", nil)
	if r.errCode() != "" {
		t.Errorf("code %q before 1.23", r.errCode())
	}
	for _, h := range []string{"OpenStack-Request-Id", "X-OpenStack-Request-Id"} {
		if !strings.HasPrefix(r.header.Get(h), "req-") {
			t.Errorf("%s = %q", h, r.header.Get(h))
		}
	}
}

func TestHTTPErrorBodyFollowsAccept(t *testing.T) {
	a := newAPI(t)
	r := a.call("GET", "/nothing", "", nil, "Accept: text/html")
	if r.status != http.StatusNotFound || !strings.HasPrefix(r.header.Get("Content-Type"), "text/html") || !strings.Contains(r.raw, "<title>404 Not Found</title>") {
		t.Fatalf("html error: %d %s %q", r.status, r.header.Get("Content-Type"), r.raw)
	}
}
