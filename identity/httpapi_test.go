package identity

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/go-hclog"
)

func testAPI(t *testing.T) (*httptest.Server, *Service) {
	t.Helper()
	s, _ := testService(t)
	srv := httptest.NewServer(NewAPI(s, hclog.NewNullLogger()))
	t.Cleanup(srv.Close)
	return srv, s
}

func do(t *testing.T, method, url, body string, header map[string]string) (*http.Response, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if method != http.MethodHead {
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatalf("%s %s: body is not JSON: %v", method, url, err)
		}
	}
	return resp, out
}

func passwordBody(user, password, scope string) string {
	return `{"auth": {"identity": {"methods": ["password"], "password": {"user": {"name": "` + user +
		`", "domain": {"name": "Default"}, "password": "` + password + `"}}}` + scope + `}}`
}

const demoScope = `, "scope": {"project": {"name": "demo", "domain": {"id": "default"}}}`

func TestIssueTokenHTTP(t *testing.T) {
	srv, _ := testAPI(t)
	for _, tc := range []struct {
		desc      string
		body      string
		want      int
		wantScope string // "project", "system" or "" (unscoped)
	}{
		{desc: "member on a project", body: passwordBody("alice", "alice-pw", demoScope), want: 201, wantScope: "project"},
		{desc: "system admin", body: passwordBody("carol", "carol-pw", `, "scope": {"system": {"all": true}}`), want: 201, wantScope: "system"},
		{desc: "user by id, project by id", body: `{"auth": {"identity": {"methods": ["password"], "password": {"user": {"id": "c0ffee", "password": "carol-pw"}}}, "scope": {"project": {"id": "0p5"}}}}`, want: 201, wantScope: "project"},
		{desc: "unscoped", body: passwordBody("dave", "dave-pw", ""), want: 201},
		{desc: "wrong password", body: passwordBody("alice", "wrong", demoScope), want: 401},
		{desc: "unknown user", body: passwordBody("mallory", "alice-pw", demoScope), want: 401},
		{desc: "no role on the project", body: passwordBody("dave", "dave-pw", demoScope), want: 401},
		{desc: "another domain", body: strings.Replace(passwordBody("alice", "alice-pw", demoScope), `"name": "Default"`, `"name": "Other"`, 1), want: 401},
		{desc: "token method", body: `{"auth": {"identity": {"methods": ["token"], "token": {"id": "x"}}}}`, want: 401},
		{desc: "user without domain", body: `{"auth": {"identity": {"methods": ["password"], "password": {"user": {"name": "alice", "password": "alice-pw"}}}}}`, want: 400},
		{desc: "not JSON", body: `{"auth"`, want: 400},
		// A JSON string the decoder reads to the bound before it fails.
		{desc: "body over the bound", body: `{"auth": "` + strings.Repeat("x", maxBodyBytes) + `"}`, want: 413},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			resp, body := do(t, "POST", srv.URL+"/v3/auth/tokens", tc.body, map[string]string{"Content-Type": "application/json"})
			if resp.StatusCode != tc.want {
				t.Fatalf("status %d, want %d: %v", resp.StatusCode, tc.want, body)
			}
			if tc.want == 401 {
				wantErr := map[string]any{"code": float64(401), "message": "The request you have made requires authentication.", "title": "Unauthorized"}
				if e, _ := body["error"].(map[string]any); len(e) != 3 || e["code"] != wantErr["code"] || e["message"] != wantErr["message"] || e["title"] != wantErr["title"] {
					t.Errorf("401 body = %v", body)
				}
				if !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Keystone uri=") {
					t.Errorf("WWW-Authenticate = %q", resp.Header.Get("WWW-Authenticate"))
				}
			}
			if tc.want == 413 {
				want := map[string]any{"code": float64(413), "message": "Request is too large.", "title": "Request Entity Too Large"}
				if d := cmp.Diff(want, body["error"]); d != "" {
					t.Errorf("413 body (-want +got):\n%s", d)
				}
			}
			if tc.want != 201 {
				return
			}
			if resp.Header.Get("X-Subject-Token") == "" {
				t.Error("no X-Subject-Token")
			}
			tok := body["token"].(map[string]any)
			for _, k := range []string{"expires_at", "issued_at", "methods", "user", "audit_ids"} {
				if tok[k] == nil {
					t.Errorf("token has no %s: %v", k, tok)
				}
			}
			_, hasProject := tok["project"]
			_, hasSystem := tok["system"]
			_, hasCatalog := tok["catalog"]
			_, hasRoles := tok["roles"]
			if hasProject != (tc.wantScope == "project") || hasSystem != (tc.wantScope == "system") ||
				hasCatalog != (tc.wantScope != "") || hasRoles != (tc.wantScope != "") {
				t.Errorf("token for scope %q: %v", tc.wantScope, tok)
			}
		})
	}
}

func TestTokenBodyLikeKeystone(t *testing.T) {
	srv, _ := testAPI(t)
	_, body := do(t, "POST", srv.URL+"/v3/auth/tokens", passwordBody("alice", "alice-pw", demoScope), nil)
	tok := body["token"].(map[string]any)
	got, _ := json.Marshal(map[string]any{"user": tok["user"], "project": tok["project"], "roles": tok["roles"], "methods": tok["methods"]})
	want := `{"methods":["password"],"project":{"domain":{"id":"default","name":"Default"},"id":"` + DerivedID("project", "demo") +
		`","name":"demo"},"roles":[{"id":"` + DerivedID("role", "member") + `","name":"member"},{"id":"` + DerivedID("role", "reader") +
		`","name":"reader"}],"user":{"domain":{"id":"default","name":"Default"},"id":"` + DerivedID("user", "alice") + `","name":"alice","password_expires_at":null}}`
	if string(got) != want {
		t.Errorf("token =\n%s\nwant\n%s", got, want)
	}
	if ts := tok["expires_at"].(string); len(ts) != len("2026-11-26T10:00:00.000000Z") || !strings.HasSuffix(ts, "Z") {
		t.Errorf("expires_at = %q, want Keystone's microsecond format", ts)
	}
	cat, _ := json.Marshal(tok["catalog"])
	for _, want := range []string{`"type":"compute"`, `"name":"nova"`, `"interface":"internal"`, `"url":"http://10.1.0.5:8774/v2.1"`, `"region_id":"RegionOne"`, `"type":"placement"`} {
		if !strings.Contains(string(cat), want) {
			t.Errorf("catalog has no %s: %s", want, cat)
		}
	}
}

func TestValidateTokenHTTP(t *testing.T) {
	srv, _ := testAPI(t)
	issue := func(body string) string {
		resp, b := do(t, "POST", srv.URL+"/v3/auth/tokens", body, nil)
		if resp.StatusCode != 201 {
			t.Fatalf("issue: %d %v", resp.StatusCode, b)
		}
		return resp.Header.Get("X-Subject-Token")
	}
	alice := issue(passwordBody("alice", "alice-pw", demoScope))
	bob := issue(passwordBody("bob", "bob-pw", demoScope))
	system := issue(passwordBody("carol", "carol-pw", `, "scope": {"system": {"all": true}}`))
	tampered := alice[:len(alice)-2] + "AA"
	for _, tc := range []struct {
		desc          string
		method        string
		auth, subject string
		want          int
	}{
		{desc: "own token", method: "GET", auth: alice, subject: alice, want: 200},
		{desc: "own token, HEAD", method: "HEAD", auth: alice, subject: alice, want: 200},
		{desc: "system reader checks anyone's", method: "GET", auth: system, subject: bob, want: 200},
		{desc: "another user's token", method: "GET", auth: alice, subject: bob, want: 403},
		{desc: "tampered subject", method: "GET", auth: system, subject: tampered, want: 404},
		{desc: "tampered auth token", method: "GET", auth: tampered, subject: alice, want: 401},
		{desc: "no auth token", method: "GET", subject: alice, want: 401},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			resp, body := do(t, tc.method, srv.URL+"/v3/auth/tokens", "", map[string]string{"X-Auth-Token": tc.auth, "X-Subject-Token": tc.subject})
			if resp.StatusCode != tc.want {
				t.Fatalf("status %d, want %d: %v", resp.StatusCode, tc.want, body)
			}
			if tc.want == 200 && tc.method == "GET" {
				if resp.Header.Get("X-Subject-Token") != tc.subject || body["token"] == nil {
					t.Errorf("answer: %v %v", resp.Header, body)
				}
			}
		})
	}
	// The catalog of a scoped token; an unscoped one has none.
	resp, body := do(t, "GET", srv.URL+"/v3/auth/catalog", "", map[string]string{"X-Auth-Token": alice})
	// compute and placement from the config, identity where it was reached
	if cat, _ := body["catalog"].([]any); resp.StatusCode != 200 || len(cat) != 3 ||
		!strings.Contains(fmt.Sprint(cat[2]), "url:"+srv.URL+"/v3") {
		t.Errorf("catalog: %d %v", resp.StatusCode, body)
	}
	unscoped := issue(passwordBody("dave", "dave-pw", ""))
	if resp, body := do(t, "GET", srv.URL+"/v3/auth/catalog", "", map[string]string{"X-Auth-Token": unscoped}); resp.StatusCode != 403 {
		t.Errorf("unscoped catalog: %d %v", resp.StatusCode, body)
	}
}

func TestVersionDocuments(t *testing.T) {
	srv, _ := testAPI(t)
	resp, body := do(t, "GET", srv.URL+"/", "", nil)
	values, _ := body["versions"].(map[string]any)["values"].([]any)
	if resp.StatusCode != 300 || len(values) != 1 {
		t.Fatalf("GET /: %d %v", resp.StatusCode, body)
	}
	for _, path := range []string{"/v3", "/v3/"} {
		resp, body := do(t, "GET", srv.URL+path, "", nil)
		v, _ := body["version"].(map[string]any)
		links, _ := v["links"].([]any)
		if resp.StatusCode != 200 || v["id"] != "v3.14" || v["status"] != "stable" || len(links) != 1 ||
			links[0].(map[string]any)["href"] != srv.URL+"/v3/" {
			t.Errorf("GET %s: %d %v", path, resp.StatusCode, body)
		}
	}
	if resp, body := do(t, "GET", srv.URL+"/v3/users", "", nil); resp.StatusCode != 404 || body["error"] == nil {
		t.Errorf("unknown path: %d %v", resp.StatusCode, body)
	}
	if resp, body := do(t, "DELETE", srv.URL+"/v3/auth/tokens", "", nil); resp.StatusCode != 405 || body["error"] == nil {
		t.Errorf("unserved method: %d %v", resp.StatusCode, body)
	}
}
