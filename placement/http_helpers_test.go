package placement

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// Helpers for the per-endpoint HTTP tests: a real Service over embedded
// etcd behind httptest, and a small client that speaks to it the way
// OpenStack clients do.

func newHTTPService(t testing.TB) *Service {
	t.Helper()
	s, _ := newStarted(t)
	return s
}

// api is a client of one Service's Placement API.
type api struct {
	t      testing.TB
	url    string
	s      *Service
	client *http.Client // nil: http.DefaultClient
}

func newAPI(t testing.TB) *api {
	t.Helper()
	s := newHTTPService(t)
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	return &api{t: t, url: srv.URL, s: s}
}

// resp is one answer, with its body decoded when it is JSON.
type resp struct {
	status int
	header http.Header
	raw    string
	body   map[string]any
}

// errCode is the `code` of OpenStack's error body ("" when absent).
func (r *resp) errCode() string {
	errs, _ := r.body["errors"].([]any)
	if len(errs) == 0 {
		return ""
	}
	c, _ := errs[0].(map[string]any)["code"].(string)
	return c
}

// errDetail is the `detail` of OpenStack's error body.
func (r *resp) errDetail() string {
	errs, _ := r.body["errors"].([]any)
	if len(errs) == 0 {
		return ""
	}
	d, _ := errs[0].(map[string]any)["detail"].(string)
	return d
}

// call sends method path at microversion mv ("" for none) with body
// (marshalled to JSON unless a string) and extra headers as
// "Name: value" strings.
func (a *api) call(method, path, mv string, body any, headers ...string) *resp {
	a.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			a.t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, a.url+path, rd)
	if err != nil {
		a.t.Fatal(err)
	}
	req.Header.Set("X-Auth-Token", "admin")
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if mv != "" {
		req.Header.Set("OpenStack-API-Version", "placement "+mv)
	}
	for _, h := range headers {
		k, v, _ := strings.Cut(h, ":")
		if v = strings.TrimSpace(v); v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	cli := a.client
	if cli == nil {
		cli = http.DefaultClient
	}
	hr, err := cli.Do(req)
	if err != nil {
		a.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer hr.Body.Close()
	raw, _ := io.ReadAll(hr.Body)
	r := &resp{status: hr.StatusCode, header: hr.Header, raw: string(raw)}
	if strings.HasPrefix(hr.Header.Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(raw, &r.body); err != nil {
			a.t.Fatalf("%s %s: decode %q: %v", method, path, raw, err)
		}
	}
	return r
}

// must is call that fails the test unless the status is want.
func (a *api) must(want int, method, path, mv string, body any, headers ...string) *resp {
	a.t.Helper()
	r := a.call(method, path, mv, body, headers...)
	if r.status != want {
		a.t.Fatalf("%s %s (mv %s): status %d, want %d: %s", method, path, mv, r.status, want, r.raw)
	}
	return r
}

// provider creates a provider named after its uuid and returns the uuid.
func (a *api) provider(uuid string, parent ...string) string {
	a.t.Helper()
	b := map[string]any{"name": "rp-" + uuid, "uuid": uuid}
	if len(parent) > 0 {
		b["parent_provider_uuid"] = parent[0]
	}
	a.must(200, "POST", "/resource_providers", "1.20", b)
	return uuid
}

// inventory sets the provider's inventories (class -> total) and returns
// the new generation.
func (a *api) inventory(uuid string, totals map[string]int) int {
	a.t.Helper()
	r := a.must(200, "GET", "/resource_providers/"+uuid, "1.14", nil)
	invs := map[string]any{}
	for rc, n := range totals {
		invs[rc] = map[string]any{"total": n}
	}
	r = a.must(200, "PUT", "/resource_providers/"+uuid+"/inventories", "1.14",
		map[string]any{"resource_provider_generation": r.body["generation"], "inventories": invs})
	return num(r.body["resource_provider_generation"])
}

// generation reads the provider's generation.
func (a *api) generation(uuid string) int {
	a.t.Helper()
	return num(a.must(200, "GET", "/resource_providers/"+uuid, "1.14", nil).body["generation"])
}

func num(v any) int {
	f, ok := v.(float64)
	if !ok {
		panic(fmt.Sprintf("not a number: %#v", v))
	}
	return int(f)
}

// errCase is one expected error answer.
type errCase struct {
	desc   string
	method string
	path   string
	mv     string
	body   any
	hdrs   []string
	status int
	code   string // Placement error code at 1.23+, "" to skip
	detail string // a substring of the detail, "" to skip
}

func runErrCases(t *testing.T, a *api, cases []errCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			r := a.call(tc.method, tc.path, tc.mv, tc.body, tc.hdrs...)
			if r.status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.status, tc.status, r.raw)
			}
			if tc.code != "" && r.errCode() != tc.code {
				t.Errorf("code %q, want %q: %s", r.errCode(), tc.code, r.raw)
			}
			if tc.detail != "" && !strings.Contains(r.errDetail(), tc.detail) && !strings.Contains(r.raw, tc.detail) {
				t.Errorf("detail %q lacks %q", r.errDetail(), tc.detail)
			}
		})
	}
}
