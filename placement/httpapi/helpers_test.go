package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/placement"
)

// Helpers for the per-endpoint HTTP tests: a real Service over embedded
// etcd behind httptest, and a small client that speaks to it the way
// OpenStack clients do.

func newHTTPService(t testing.TB) *placement.Service {
	t.Helper()
	s, _ := newStarted(t)
	return s
}

// testKeys is where the tests' services keep their records.
var testKeys = etcdschema.New("/test")

// testCtx bounds a test's etcd calls so a hang fails instead of stalling.
func testCtx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// newStarted returns a started Service on a fresh embedded etcd.
func newStarted(t testing.TB) (*placement.Service, *clientv3.Client) {
	t.Helper()
	cli := etcdtest.Client(t)
	log := hclog.New(&hclog.LoggerOptions{Level: hclog.Warn, Output: testWriter{t}})
	s := placement.New(cli, testKeys, log)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := s.Start(ctx); err != nil {
		t.Fatalf("start: %v", err)
	}
	return s, cli
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(string(p))
	return len(p), nil
}

// newServer serves s's Placement API (default options) until the test ends.
func newServer(t testing.TB, s *placement.Service) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(New(s, nil, Options{}))
	t.Cleanup(srv.Close)
	return srv
}

func inv(total int64) etcdschema.Inventory {
	return etcdschema.Inventory{Total: total, MinUnit: 1, MaxUnit: total, StepSize: 1, AllocationRatio: 1}
}

// mkProvider creates a provider with the given inventories.
func mkProvider(t testing.TB, s *placement.Service, uuid, parent string, invs map[string]etcdschema.Inventory) {
	t.Helper()
	ctx := testCtx(t)
	if _, err := s.CreateProvider(ctx, uuid, "name-"+uuid, parent); err != nil {
		t.Fatalf("create %s: %v", uuid, err)
	}
	if err := s.UpdateProvider(ctx, uuid, func(p *etcdschema.Provider) error {
		for rc, i := range invs {
			p.Inventories[rc] = i
		}
		return nil
	}); err != nil {
		t.Fatalf("update %s: %v", uuid, err)
	}
}

// api is a client of one Service's Placement API.
type api struct {
	t      testing.TB
	url    string
	s      *placement.Service
	client *http.Client // nil: http.DefaultClient
}

func newAPI(t testing.TB) *api {
	t.Helper()
	s := newHTTPService(t)
	srv := newServer(t, s)
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
