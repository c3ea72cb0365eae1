package images

import (
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
	"golang.org/x/crypto/bcrypt"

	"github.com/berth-project/berth/identity"
)

// testCloud is an image API over real etcd and HTTP, checking tokens of
// a real identity service: admin (admin of project ops), alice (member
// of demo), bob (reader of demo), carol (member of other).
type testCloud struct {
	t      *testing.T
	url    string
	store  *Store
	tokens map[string]string // user name to a project-scoped token
}

func newTestCloud(t *testing.T, auth bool) *testCloud {
	t.Helper()
	c := &testCloud{t: t, store: newTestStore(t), tokens: map[string]string{}}
	var o Options
	if auth {
		hash := func(pw string) string {
			h, err := bcrypt.GenerateFromPassword([]byte(pw), bcrypt.MinCost)
			if err != nil {
				t.Fatal(err)
			}
			return string(h)
		}
		cfg := identity.Config{TokenTTL: time.Hour, Region: "RegionOne",
			Projects: []identity.Project{{Name: "ops"}, {Name: "demo"}, {Name: "other"}}}
		for _, u := range []struct{ name, project, role string }{
			{"admin", "ops", identity.RoleAdmin}, {"alice", "demo", identity.RoleMember},
			{"bob", "demo", identity.RoleReader}, {"carol", "other", identity.RoleMember},
		} {
			cfg.Users = append(cfg.Users, identity.User{Name: u.name, PasswordHash: hash(u.name + "-pw")})
			cfg.Assignments = append(cfg.Assignments, identity.Assignment{User: u.name, Project: u.project, Role: u.role})
		}
		svc, err := identity.New(cfg, []byte("0123456789abcdef0123456789abcdef"))
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range cfg.Assignments {
			tok, err := svc.Issue(identity.PasswordAuth{UserName: a.User, Password: a.User + "-pw",
				Scope: identity.Scope{ProjectName: a.Project}})
			if err != nil {
				t.Fatal(err)
			}
			c.tokens[a.User] = tok.ID
		}
		o.Verifier = svc.Verifier()
	}
	srv := httptest.NewServer(NewAPI(c.store, hclog.NewNullLogger(), o))
	t.Cleanup(srv.Close)
	c.url = srv.URL
	return c
}

func project(name string) string { return identity.DerivedID("project", name) }

// reply is one answer: its status, headers and body.
type reply struct {
	code int
	h    http.Header
	body string
}

func (r reply) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(r.body), &m); err != nil {
		t.Fatalf("body %q: %v", r.body, err)
	}
	return m
}

// do sends a request as user ("" sends no token), Accept: application/json.
func (c *testCloud) do(user, method, path, contentType, body string) reply {
	c.t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, c.url+path, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json")
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if user != "" {
		tok, ok := c.tokens[user]
		if !ok {
			tok = user // a made-up token
		}
		req.Header.Set("X-Auth-Token", tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{code: resp.StatusCode, h: resp.Header, body: string(b)}
}

// create posts body as admin and returns the new image's id.
func (c *testCloud) create(body string) string {
	c.t.Helper()
	r := c.do("admin", "POST", "/v2/images", "application/json", body)
	if r.code != http.StatusCreated {
		c.t.Fatalf("create %s: %d %s", body, r.code, r.body)
	}
	return r.json(c.t)["id"].(string)
}

func TestVersions(t *testing.T) {
	c := newTestCloud(t, true)
	for _, tc := range []struct {
		path string
		code int
	}{{"/", 300}, {"/versions", 200}, {"/v1/images", 300}} {
		r := c.do("", "GET", tc.path, "", "")
		if r.code != tc.code {
			t.Errorf("GET %s: %d, want %d", tc.path, r.code, tc.code)
		}
		want := `{"versions": [{"id": "v2.15", "status": "CURRENT", "links": [{"rel": "self", "href": "` + c.url + `/v2/"}]}, ` +
			`{"id": "v2.9", "status": "SUPPORTED", "links": [{"rel": "self", "href": "` + c.url + `/v2/"}]}`
		if !strings.HasPrefix(r.body, want) || !strings.Contains(r.body, `{"id": "v2.0", "status": "SUPPORTED"`) {
			t.Errorf("GET %s: %s", tc.path, r.body)
		}
	}
}

func TestAuthentication(t *testing.T) {
	c := newTestCloud(t, true)
	want := `{"error": {"code": 401, "title": "Unauthorized", "message": "The request you have made requires authentication."}}`
	for _, user := range []string{"", "not-a-token"} {
		if r := c.do(user, "GET", "/v2/images", "", ""); r.code != 401 || r.body != want {
			t.Errorf("token %q: %d %s", user, r.code, r.body)
		}
	}
}

func TestCreate(t *testing.T) {
	c := newTestCloud(t, true)
	dup := c.create(`{"name": "first", "id": "11111111-2222-3333-4444-555555555555"}`)
	cases := []struct {
		desc, user, body string
		code             int
		message          string // the error's explanation; "" for a success
	}{
		{desc: "bad command", user: "admin", body: `{"name": "x", "berth_command": "sleep 10"}`, code: 400,
			message: `invalid berth_command: "sleep 10" is not a JSON list of strings; it must be a JSON list of strings, the program and its arguments, e.g. ["sleep", "infinity"]`},
		{desc: "schema: min_ram", user: "admin", body: `{"min_ram": "abc"}`, code: 400,
			message: "Provided object does not match schema 'image': 'abc' is not of type 'integer'\n\nFailed validating 'type' in schema['properties']['min_ram']:\n    {'description': 'Amount of ram (in MB) required to boot image.',\n     'type': 'integer'}\n\nOn instance['min_ram']:\n    'abc'"},
		{desc: "schema: an additional property that is not a string", user: "admin", body: `{"foo": 1}`, code: 400,
			message: "Provided object does not match schema 'image': 1 is not of type 'string'\n\nFailed validating 'type' in schema['additionalProperties']:\n    {'type': 'string'}\n\nOn instance['foo']:\n    1"},
		{desc: "read-only before the schema", user: "admin", body: `{"self": 1}`, code: 403, message: "Attribute 'self' is read-only."},
		{desc: "read-only status", user: "admin", body: `{"status": "active"}`, code: 403, message: "Attribute 'status' is read-only."},
		{desc: "reserved namespace", user: "admin", body: `{"os_glance_x": "1"}`, code: 403, message: "Attribute 'os_glance_x' is reserved."},
		{desc: "a member may not add images", user: "alice", body: `{"name": "x"}`, code: 403, message: "You are not authorized to complete add_image action."},
		{desc: "duplicate id", user: "admin", body: `{"id": "` + dup + `"}`, code: 409, message: "Image ID " + dup + " already exists!"},
		{desc: "negative min_disk", user: "admin", body: `{"min_disk": -1}`, code: 400, message: "Invalid value '-1' for parameter 'min_disk': Cannot be a negative value"},
		{desc: "no body", user: "admin", body: ``, code: 400, message: "Body expected in request."},
		{desc: "not JSON", user: "admin", body: `{`, code: 400, message: "Malformed JSON in request body."},
		{desc: "hidden", user: "admin", body: `{"os_hidden": true}`, code: 400, message: "Berth does not hide images: os_hidden may only be false."},
	}
	var props, tags []string
	for i := range 129 {
		props = append(props, fmt.Sprintf(`"p%d": "v"`, i))
		tags = append(tags, fmt.Sprintf(`"t%d"`, i))
	}
	cases = append(cases, []struct {
		desc, user, body string
		code             int
		message          string
	}{
		{desc: "Glance's property quota", user: "admin", body: "{" + strings.Join(props, ", ") + "}", code: 413,
			message: "The limit has been exceeded on the number of allowed image properties. Attempted: 129, Maximum: 128"},
		{desc: "Glance's tag quota", user: "admin", body: `{"tags": [` + strings.Join(tags, ", ") + `]}`, code: 413,
			message: "The limit has been exceeded on the number of allowed image tags. Attempted: 129, Maximum: 128"},
		{desc: "more than one etcd value holds", user: "admin", body: `{"description": "` + strings.Repeat("x", 600<<10) + `"}`, code: 413,
			message: "The image's properties and tags are more than Berth keeps for one image (524288 bytes): it is stored as one etcd value."},
	}...)
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			r := c.do(tc.user, "POST", "/v2/images", "application/json", tc.body)
			if r.code != tc.code {
				t.Fatalf("%d %s, want %d", r.code, r.body, tc.code)
			}
			if got := r.json(t)["message"]; got != tc.message+"<br /><br />\n\n\n" {
				t.Errorf("message %q\nwant    %q", got, tc.message)
			}
		})
	}

	r := c.do("admin", "POST", "/v2/images", "application/json",
		`{"name": "sleeper", "berth_command": "[\"sleep\",  \"60\"]", "disk_format": "raw", "container_format": "bare", "min_ram": 64, "tags": ["a", "a", "b"], "owner_specified.openstack.md5": ""}`)
	if r.code != 201 {
		t.Fatalf("create: %d %s", r.code, r.body)
	}
	img := r.json(t)
	id := img["id"].(string)
	want := `{"berth_command": "[\"sleep\",\"60\"]", "owner_specified.openstack.md5": "", "name": "sleeper", "disk_format": "raw", ` +
		`"container_format": "bare", "visibility": "shared", "size": null, "virtual_size": null, "status": "active", ` +
		`"checksum": null, "protected": false, "min_ram": 64, "min_disk": 0, "owner": "` + project("ops") + `", ` +
		`"os_hidden": false, "os_hash_algo": null, "os_hash_value": null, "id": "` + id + `", "created_at": "`
	if !strings.HasPrefix(r.body, want) || !strings.HasSuffix(r.body, `"tags": ["a", "b"], "self": "/v2/images/`+id+
		`", "file": "/v2/images/`+id+`/file", "schema": "/v2/schemas/image"}`) {
		t.Errorf("create answered\n%s\nwant it to start\n%s", r.body, want)
	}
	if loc := r.h.Get("Location"); loc != c.url+"/v2/images/"+id {
		t.Errorf("Location %q", loc)
	}
	stored, err := c.store.Get(context.Background(), id)
	if err != nil || strings.Join(stored.Command, " ") != "sleep 60" {
		t.Errorf("stored %+v, %v", stored, err)
	}
}

// TestVisibility: who sees, lists and may delete which image, by
// Glance's rules (admins alone may delete in Berth).
func TestVisibility(t *testing.T) {
	c := newTestCloud(t, true)
	ctx := context.Background()
	mk := func(name, vis, owner string) string {
		img := testImage(name, len(name))
		img.Visibility = vis
		if owner != "" {
			img.Owner = ptr(project(owner))
		}
		if err := c.store.Create(ctx, img); err != nil {
			t.Fatal(err)
		}
		return img.ID
	}
	ids := map[string]string{
		"pub": mk("pub", "public", ""), "demo-private": mk("demo-private", "private", "demo"),
		"demo-shared": mk("demo-shared", "shared", "demo"), "other-private": mk("other-private", "private", "other"),
		"other-community": mk("other-community", "community", "other"),
	}
	names := func(user, query string) string {
		r := c.do(user, "GET", "/v2/images"+query, "", "")
		if r.code != 200 {
			t.Fatalf("%s lists %s: %d %s", user, query, r.code, r.body)
		}
		var out []string
		for _, img := range r.json(t)["images"].([]any) {
			out = append(out, img.(map[string]any)["name"].(string))
		}
		return strings.Join(out, ",")
	}
	for _, tc := range []struct{ user, query, want string }{
		{"alice", "?sort=name:asc", "demo-private,demo-shared,pub"},
		{"bob", "?sort=name:asc", "demo-private,demo-shared,pub"},
		{"carol", "?sort=name:asc", "other-community,other-private,pub"},
		{"admin", "?sort=name:asc", "demo-private,demo-shared,other-private,pub"},
		{"alice", "?visibility=community", "other-community"},
		{"alice", "?visibility=all&sort_key=name&sort_dir=asc", "demo-private,demo-shared,other-community,pub"},
		{"alice", "?visibility=private", "demo-private"},
		{"admin", "?visibility=private&sort=name:asc", "demo-private,other-private"},
		{"admin", "?owner=" + project("demo") + "&sort=name:desc", "demo-shared,demo-private"},
	} {
		if got := names(tc.user, tc.query); got != tc.want {
			t.Errorf("%s lists %s: %s, want %s", tc.user, tc.query, got, tc.want)
		}
	}
	for _, tc := range []struct {
		user, image string
		code        int
	}{
		{"alice", "demo-private", 200}, {"bob", "demo-shared", 200}, {"carol", "demo-private", 404},
		{"carol", "pub", 200}, {"alice", "other-community", 200}, {"admin", "other-private", 200},
	} {
		if r := c.do(tc.user, "GET", "/v2/images/"+ids[tc.image], "", ""); r.code != tc.code {
			t.Errorf("%s shows %s: %d, want %d", tc.user, tc.image, r.code, tc.code)
		}
	}
	r := c.do("carol", "GET", "/v2/images/"+ids["demo-private"], "", "")
	want := `{"message": "No image found with ID ` + ids["demo-private"] + `<br /><br />\n\n\n", "code": "404 Not Found", "title": "Not Found"}`
	if r.body != want || r.h.Get("Content-Type") != "application/json" {
		t.Errorf("404 page: %s (%s)\nwant %s", r.body, r.h.Get("Content-Type"), want)
	}
	for _, tc := range []struct {
		user, image string
		code        int
		message     string
	}{
		{"carol", "demo-private", 404, "No image found with ID " + ids["demo-private"]},
		{"alice", "demo-private", 403, "You are not authorized to complete delete_image action."},
		{"admin", "demo-private", 204, ""},
		{"admin", "demo-private", 404, "No image found with ID " + ids["demo-private"]},
	} {
		r := c.do(tc.user, "DELETE", "/v2/images/"+ids[tc.image], "", "")
		if r.code != tc.code || (tc.message != "" && r.json(t)["message"] != tc.message+"<br /><br />\n\n\n") {
			t.Errorf("%s deletes %s: %d %s, want %d %s", tc.user, tc.image, r.code, r.body, tc.code, tc.message)
		}
	}
}

// TestListPaging: limit, marker and the links, filters and sorting.
func TestListPaging(t *testing.T) {
	c := newTestCloud(t, false)
	ctx := context.Background()
	for i, name := range []string{"e", "d", "c", "b", "a"} {
		img := testImage(name, i)
		if name == "c" {
			img.Protected, img.Tags = true, []string{"x"}
			img.Properties = map[string]string{"os_distro": "debian"}
		}
		if err := c.store.Create(ctx, img); err != nil {
			t.Fatal(err)
		}
	}
	list := func(query string) (string, map[string]any) {
		r := c.do("", "GET", "/v2/images"+query, "", "")
		if r.code != 200 {
			t.Fatalf("list %s: %d %s", query, r.code, r.body)
		}
		body := r.json(t)
		var out []string
		for _, img := range body["images"].([]any) {
			out = append(out, img.(map[string]any)["name"].(string))
		}
		return strings.Join(out, ","), body
	}
	// Newest first by default: a (minute 4) to e (minute 0).
	got, body := list("?limit=2")
	if got != "a,b" || body["first"] != "/v2/images?limit=2" || body["schema"] != "/v2/schemas/images" {
		t.Fatalf("page 1: %s %v", got, body)
	}
	var all []string
	all = append(all, got)
	for next, _ := body["next"].(string); next != ""; next, _ = body["next"].(string) {
		got, body = list(strings.TrimPrefix(next, "/v2/images"))
		all = append(all, got)
		if len(all) > 5 {
			t.Fatal("paging does not end")
		}
	}
	// Glance links the next page of a full page even when it is empty.
	if strings.Join(all, "|") != "a,b|c,d|e" {
		t.Errorf("pages %q", all)
	}
	for _, tc := range []struct{ query, want string }{
		{"?sort_key=name&sort_dir=asc&limit=3", "a,b,c"},
		{"?name=c", "c"},
		{"?name=in:a,e&sort=name:asc", "a,e"},
		{"?protected=true", "c"},
		{"?tag=x", "c"},
		{"?os_distro=debian", "c"},
		{"?os_distro=ubuntu", ""},
		{"?status=ERROR", ""},
		{"?size_min=1", ""},
		{"?os_hidden=true", ""},
		{"?limit=0", ""},
		{"?name=eq:c", "c"},
		{`?name=in:"a",e&sort=name:asc`, "a,e"},
		{"?created_at=gte:2026-11-26T09:03:00Z", "a,b"},
		{"?created_at=lt:2026-11-26T09:01:00%2B00:00", "e"},
		{"?created_at=2026-11-26T09:02:00Z", "c"},
		{"?updated_at=neq:2026-11-26T09:02:00Z&sort=name:asc", "a,b,d,e"},
		{"?owner=nobody", ""},
	} {
		if got, _ := list(tc.query); got != tc.want {
			t.Errorf("list %s: %q, want %q", tc.query, got, tc.want)
		}
	}
	for _, tc := range []struct{ query, message string }{
		{"?limit=x", "limit param must be an integer"},
		{"?limit=-1", "limit param must be positive"},
		{"?sort_key=owner", "Invalid sort key: owner. It must be one of the following: name, status, container_format, disk_format, size, id, created_at, updated_at."},
		{"?sort_dir=up", "Invalid sort direction: up"},
		{"?sort=name&sort_key=id", "Old and new sorting syntax cannot be combined"},
		{"?sort_key=name&sort_key=id&sort_dir=asc&sort_dir=desc&sort_dir=asc", "Number of sort dirs does not match the number of sort keys"},
		{"?visibility=everyone", "Invalid visibility value: everyone"},
		{"?changes-since=2026-01-01", `The "changes-since" filter is no longer available on v2.`},
		{"?os_hidden=maybe", "Invalid value 'maybe' for 'os_hidden' filter. Valid values are 'true' or 'false'."},
		{"?marker=" + DefaultID("nothing"), "No image found with ID " + DefaultID("nothing")},
		{"?size_max=big", "Unable to filter on a range with a non-numeric value."},
		{"?name=like:c", "Unable to filter by unknown operator 'like'."},
		{`?name=in:"a`, `Invalid filter value "a. The quote is not closed.`},
		{"?created_at=after:2026-11-26T09:00:00Z", "Unable to filter on a unknown operator."},
		{"?created_at=gt:yesterday", `Bad "created_at" query filter format. Use ISO 8601 DateTime notation.`},
	} {
		r := c.do("", "GET", "/v2/images"+tc.query, "", "")
		if r.code != 400 || r.json(t)["message"] != tc.message+"<br /><br />\n\n\n" {
			t.Errorf("list %s: %d %s, want 400 %q", tc.query, r.code, r.body, tc.message)
		}
	}
}

// TestUpdate: the JSON-patch forms the openstack CLI sends, and Glance's
// refusals.
func TestUpdate(t *testing.T) {
	c := newTestCloud(t, true)
	id := c.create(`{"name": "img", "description": "d"}`)
	const patch = "application/openstack-images-v2.1-json-patch"
	cases := []struct {
		desc, user, ctype, body string
		code                    int
		check                   func(map[string]any) bool
	}{
		{"rename and add a command", "admin", patch,
			`[{"op": "replace", "path": "/name", "value": "renamed"}, {"op": "add", "path": "/berth_command", "value": "[\"true\"]"}]`,
			200, func(m map[string]any) bool { return m["name"] == "renamed" && m["berth_command"] == `["true"]` }},
		{"remove a property and the command", "admin", patch,
			`[{"op": "remove", "path": "/description"}, {"op": "remove", "path": "/berth_command"}, {"op": "replace", "path": "/protected", "value": true}]`,
			200, func(m map[string]any) bool {
				_, d := m["description"]
				_, b := m["berth_command"]
				return !d && !b && m["protected"] == true
			}},
		{"a bad command", "admin", patch, `[{"op": "add", "path": "/berth_command", "value": "[]"}]`, 400, nil},
		{"replace of a missing property", "admin", patch, `[{"op": "replace", "path": "/nothing", "value": "x"}]`, 409, nil},
		{"remove of an attribute", "admin", patch, `[{"op": "remove", "path": "/name"}]`, 403, nil},
		{"read-only", "admin", patch, `[{"op": "replace", "path": "/status", "value": "queued"}]`, 403, nil},
		{"a member may not", "alice", patch, `[{"op": "replace", "path": "/name", "value": "x"}]`, 404, nil},
		{"not a json-patch", "admin", "application/json", `[]`, 415, nil},
		{"not a list", "admin", patch, `{}`, 400, nil},
		{"deep path", "admin", patch, `[{"op": "add", "path": "/a/b", "value": "x"}]`, 400, nil},
		{"the schema", "admin", patch, `[{"op": "replace", "path": "/min_ram", "value": "x"}]`, 400, nil},
		{"past one etcd value", "admin", patch, `[{"op": "add", "path": "/a", "value": "` + strings.Repeat("x", 300<<10) +
			`"}, {"op": "add", "path": "/b", "value": "` + strings.Repeat("x", 300<<10) + `"}]`, 413, nil},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			r := c.do(tc.user, "PATCH", "/v2/images/"+id, tc.ctype, tc.body)
			if r.code != tc.code {
				t.Fatalf("%d %s, want %d", r.code, r.body, tc.code)
			}
			if tc.check != nil && !tc.check(r.json(t)) {
				t.Errorf("answer %s", r.body)
			}
		})
	}
	if r := c.do("admin", "DELETE", "/v2/images/"+id, "", ""); r.code != 403 ||
		r.json(t)["message"] != "Image "+id+" is protected and cannot be deleted.<br /><br />\n\n\n" {
		t.Errorf("delete of a protected image: %d %s", r.code, r.body)
	}
}

// TestUpload: an empty upload is taken (the CLI sends one from a
// script); data is refused, saying why.
func TestUpload(t *testing.T) {
	c := newTestCloud(t, true)
	id := c.create(`{"name": "img"}`)
	if r := c.do("admin", "PUT", "/v2/images/"+id+"/file", "application/octet-stream", ""); r.code != 204 {
		t.Errorf("empty upload: %d %s", r.code, r.body)
	}
	r := c.do("admin", "PUT", "/v2/images/"+id+"/file", "application/octet-stream", "qcow2 bytes")
	if r.code != 413 || !strings.Contains(r.json(t)["message"].(string), "Berth stores no image data") {
		t.Errorf("upload with data: %d %s", r.code, r.body)
	}
	if r := c.do("alice", "PUT", "/v2/images/"+DefaultID("x")+"/file", "application/octet-stream", ""); r.code != 404 {
		t.Errorf("upload to a missing image: %d %s", r.code, r.body)
	}
	if r := c.do("bob", "GET", "/v2/images/"+id+"/file", "", ""); r.code != 404 {
		t.Errorf("download of another project's image: %d", r.code)
	}
	if r := c.do("admin", "GET", "/v2/images/"+id+"/file", "", ""); r.code != 204 {
		t.Errorf("download: %d", r.code)
	}
	if r := c.do("admin", "POST", "/v2/images/"+id, "", ""); r.code != 405 || r.h.Get("Allow") != "GET, PATCH, DELETE" {
		t.Errorf("POST to an image: %d %v", r.code, r.h)
	}
	if r := c.do("admin", "GET", "/v2/nothing", "", ""); r.code != 404 {
		t.Errorf("unknown path: %d", r.code)
	}
}
