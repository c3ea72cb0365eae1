package images

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/identity"
	"github.com/berth-project/berth/identity/identitytest"
	"github.com/berth-project/berth/internal/etcdtest"
)

// The authorization matrix of the image API: every route of serveV2 and
// the version documents, as each kind of caller, over real HTTP with
// real identity tokens. A route added to serveV2 needs a row in
// imageMatrix (TestImageAuthMatrixCoversEveryRoute fails until it has
// one). The statuses are Glance's where Berth follows it — anyone with a
// role reads public images and its project's private ones, another
// project's private image is 404 — and Berth's own where it does not:
// add, modify, delete and upload are admin-only (a Berth image is a
// command every host may run; create.go says so), so a member gets the
// policy's 403 on its own project's image.

var imCallers = []string{"anonymous", "garbage token", "other key's token", "expired token",
	"reader of A", "member of B", "member of A", "admin"}

// imRow is one request and the status each caller with a valid token
// gets (reader of A, member of B, member of A, admin); open rows are
// answered before authentication.
type imRow struct {
	method, path, ctype, body string
	want                      [4]int
	open                      bool
	// shows, when set, is an image id the answer names for exactly the
	// callers whose shown entry is true (a list's visibility).
	shows    string
	shownFor [4]bool
}

func imAll(ok int) [4]int { return [4]int{ok, ok, ok, ok} }

// The seeded images: a public one and a private one of project A (the
// admin's, seeded straight into the store).
var (
	imPublic   = DefaultID("matrix-public")
	imPrivateA = DefaultID("matrix-private-a")
)

const patchType = "application/openstack-images-v2.1-json-patch"

var imageMatrix = []imRow{
	{method: "GET", path: "/", want: imAll(300), open: true},
	{method: "GET", path: "/versions", want: imAll(200), open: true},

	{method: "GET", path: "/v2/images", want: imAll(200), shows: imPrivateA, shownFor: [4]bool{true, false, true, true}},
	{method: "GET", path: "/v2/images", want: imAll(200), shows: imPublic, shownFor: [4]bool{true, true, true, true}},
	{method: "POST", path: "/v2/images", ctype: "application/json", body: `{"name": "new"}`, want: [4]int{403, 403, 403, 201}},
	{method: "POST", path: "/v2/images", ctype: "application/json", body: `{"name": "new", "visibility": "public"}`, want: [4]int{403, 403, 403, 201}},

	{method: "GET", path: "/v2/images/" + imPublic, want: imAll(200)},
	{method: "GET", path: "/v2/images/" + imPrivateA, want: [4]int{200, 404, 200, 200}},
	{method: "PATCH", path: "/v2/images/" + imPublic, ctype: patchType, body: `[{"op": "replace", "path": "/name", "value": "n"}]`, want: [4]int{403, 403, 403, 200}},
	{method: "PATCH", path: "/v2/images/" + imPrivateA, ctype: patchType, body: `[{"op": "replace", "path": "/name", "value": "n"}]`, want: [4]int{403, 404, 403, 200}},
	{method: "DELETE", path: "/v2/images/" + imPublic, want: [4]int{403, 403, 403, 204}},
	{method: "DELETE", path: "/v2/images/" + imPrivateA, want: [4]int{403, 404, 403, 204}},

	{method: "GET", path: "/v2/images/" + imPublic + "/file", want: imAll(204)},
	{method: "GET", path: "/v2/images/" + imPrivateA + "/file", want: [4]int{204, 404, 204, 204}},
	{method: "PUT", path: "/v2/images/" + imPrivateA + "/file", ctype: "application/octet-stream", want: [4]int{403, 404, 403, 204}},

	{method: "GET", path: "/v2/schemas/image", want: imAll(200)},
}

func (r imRow) wantFor(caller string) int {
	for i, c := range imCallers[4:] {
		if c == caller {
			return r.want[i]
		}
	}
	if r.open {
		return r.want[3]
	}
	return http.StatusUnauthorized
}

// seedImageMatrix stores the two images under prefix and serves the API
// over them in keystone mode.
func seedImageMatrix(t *testing.T, cli *clientv3.Client, prefix string, svc *identity.Service) string {
	t.Helper()
	store := NewStore(cli, etcdschema.New(prefix))
	ctx := context.Background()
	pub := testImage("matrix-public", 1)
	pub.ID = imPublic
	priv := testImage("matrix-private-a", 2)
	priv.ID, priv.Visibility, priv.Owner = imPrivateA, VisibilityPrivate, ptr(identity.DerivedID("project", "A"))
	for _, img := range []*Image{pub, priv} {
		if err := store.Create(ctx, img); err != nil {
			t.Fatal(err)
		}
	}
	srv := httptest.NewServer(NewAPI(store, hclog.NewNullLogger(), Options{Verifier: svc.Verifier(), IdentityURI: "http://keystone.test:5000/v3"}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func imCall(t *testing.T, url string, rw imRow, token string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest(rw.method, url+rw.path, strings.NewReader(rw.body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json")
	if rw.ctype != "" {
		req.Header.Set("Content-Type", rw.ctype)
	}
	if token != "" {
		req.Header.Set("X-Auth-Token", token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header.Get("WWW-Authenticate"), string(b)
}

func TestImageAuthMatrix(t *testing.T) {
	cli := etcdtest.Client(t)
	key := []byte("0123456789abcdef0123456789abcdef")
	svc, err := identity.New(identitytest.Directory(t, time.Hour), key)
	if err != nil {
		t.Fatal(err)
	}
	tokens := identitytest.Tokens(t, svc, key)
	shared := seedImageMatrix(t, cli, "/imatrix/shared", svc)
	n, tried := 0, 0
	for _, rw := range imageMatrix {
		for _, caller := range imCallers {
			url, want := shared, rw.wantFor(caller)
			if want < 300 && rw.method != "GET" {
				n++
				url = seedImageMatrix(t, cli, fmt.Sprintf("/imatrix/%d", n), svc)
			}
			tried++
			status, wwwAuth, body := imCall(t, url, rw, tokens[caller])
			if status != want {
				t.Errorf("%s %s %s as %s: %d, want %d: %s", rw.method, rw.path, rw.body, caller, status, want, body)
			}
			if i := slices.Index(imCallers, caller) - 4; rw.shows != "" && i >= 0 && strings.Contains(body, rw.shows) != rw.shownFor[i] {
				t.Errorf("%s %s as %s: names %s: %v, want %v", rw.method, rw.path, caller, rw.shows, !rw.shownFor[i], rw.shownFor[i])
			}
			switch {
			case status == http.StatusUnauthorized && wwwAuth != `Keystone uri="http://keystone.test:5000/v3"`:
				t.Errorf("%s %s as %s: 401 without keystonemiddleware's WWW-Authenticate: %q", rw.method, rw.path, caller, wwwAuth)
			case status == http.StatusForbidden && !strings.Contains(body, "403 Forbidden"):
				t.Errorf("%s %s as %s: 403 not in Glance's shape: %s", rw.method, rw.path, caller, body)
			}
		}
	}
	t.Logf("%d requests, each answer's status checked", tried)
}

// TestImageAuthMatrixCoversEveryRoute: every method serveV2 routes (the
// 405's Allow header names them) has a row, so a route added without
// deciding who may call it fails here.
func TestImageAuthMatrixCoversEveryRoute(t *testing.T) {
	srv := httptest.NewServer(NewAPI(newTestStore(t), hclog.NewNullLogger(), Options{}))
	defer srv.Close()
	covered := map[string]bool{}
	for _, rw := range imageMatrix {
		covered[rw.method+" "+imTemplate(rw.path)] = true
	}
	n := 0
	for _, tmpl := range []string{"/v2/images", "/v2/images/{image_id}", "/v2/images/{image_id}/file", "/v2/schemas/image"} {
		path := strings.ReplaceAll(tmpl, "{image_id}", imPublic)
		req, _ := http.NewRequest("TRACE", srv.URL+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Fatalf("TRACE %s: %d, want 405 naming the route's methods", tmpl, resp.StatusCode)
		}
		for _, m := range strings.Split(resp.Header.Get("Allow"), ",") {
			n++
			if m = strings.TrimSpace(m); !covered[m+" "+tmpl] {
				t.Errorf("route %s %s has no row in imageMatrix", m, tmpl)
			}
		}
	}
	if n < 8 {
		t.Errorf("only %d image routes", n)
	}
}

func imTemplate(path string) string {
	segs := strings.Split(path, "/")
	if len(segs) >= 4 && segs[2] == "images" {
		segs[3] = "{image_id}"
	}
	return strings.Join(segs, "/")
}
