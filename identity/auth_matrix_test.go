package identity

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/berth-project/berth/internal/testwait"
)

// The authorization matrix of the identity API: every route of routes(),
// as each kind of caller, over real HTTP with real tokens. A route added
// to routes() needs a row in idMatrix (TestIdentityAuthMatrixCoversEveryRoute
// fails until it has one). The statuses are Keystone's defaults with
// enforce_new_defaults off (each new rule OR'ed with its deprecated one):
// logging in and the version documents need no token; a token checks
// itself, and an admin (any scope) or a system reader checks anyone's;
// any scoped token reads its catalog; projects are listed by an admin or
// a system reader, and one is shown also to a token scoped to it.

var idCallers = []string{"anonymous", "garbage token", "other key's token", "expired token",
	"reader of A", "member of B", "member of A", "admin", "system reader"}

// idRow is one request and the status each caller with a valid token
// gets (reader of A, member of B, member of A, admin, system reader).
// subject names the token sent as X-Subject-Token (a caller, or
// "garbage"); {A} and {B} in the path are the projects' ids. open rows
// do not read X-Auth-Token: every caller gets want[4].
type idRow struct {
	method, path, body, subject string
	want                        [5]int
	open                        bool
}

func idAll(ok int) [5]int { return [5]int{ok, ok, ok, ok, ok} }

func idLogin(user, password, project string) string {
	return `{"auth": {"identity": {"methods": ["password"], "password": {"user": {"name": "` + user +
		`", "domain": {"id": "default"}, "password": "` + password + `"}}}, "scope": {"project": {"name": "` + project + `", "domain": {"id": "default"}}}}}`
}

var idMatrix = []idRow{
	{method: "GET", path: "/", want: idAll(300), open: true},
	{method: "GET", path: "/v3", want: idAll(200), open: true},
	{method: "GET", path: "/v3/", want: idAll(200), open: true},

	{method: "POST", path: "/v3/auth/tokens", body: idLogin("member-a", "pw", "A"), want: idAll(201), open: true},
	{method: "POST", path: "/v3/auth/tokens", body: idLogin("member-a", "wrong", "A"), want: idAll(401), open: true},
	{method: "POST", path: "/v3/auth/tokens", body: idLogin("member-a", "pw", "B"), want: idAll(401), open: true},
	{method: "POST", path: "/v3/auth/tokens", body: idLogin("nobody", "pw", "A"), want: idAll(401), open: true},

	{method: "GET", path: "/v3/auth/tokens", subject: "member of A", want: [5]int{403, 403, 200, 200, 200}},
	{method: "GET", path: "/v3/auth/tokens", subject: "admin", want: [5]int{403, 403, 403, 200, 200}},
	{method: "GET", path: "/v3/auth/tokens", subject: "garbage", want: idAll(404)},
	{method: "GET", path: "/v3/auth/tokens", subject: "expired token", want: idAll(404)},
	{method: "HEAD", path: "/v3/auth/tokens", subject: "member of A", want: [5]int{403, 403, 200, 200, 200}},
	{method: "HEAD", path: "/v3/auth/tokens", subject: "admin", want: [5]int{403, 403, 403, 200, 200}},
	{method: "HEAD", path: "/v3/auth/tokens", subject: "garbage", want: idAll(404)},

	{method: "GET", path: "/v3/auth/catalog", want: idAll(200)},

	{method: "GET", path: "/v3/projects", want: [5]int{403, 403, 403, 200, 200}},
	{method: "GET", path: "/v3/projects?name=A", want: [5]int{403, 403, 403, 200, 200}},
	{method: "GET", path: "/v3/projects/{A}", want: [5]int{200, 403, 200, 200, 200}},
	{method: "GET", path: "/v3/projects/{B}", want: [5]int{403, 200, 403, 200, 200}},
	{method: "GET", path: "/v3/projects/no-such-project", want: idAll(404)},
}

func (r idRow) wantFor(caller string) int {
	for i, c := range idCallers[4:] {
		if c == caller {
			return r.want[i]
		}
	}
	if r.open {
		return r.want[4]
	}
	return http.StatusUnauthorized
}

// idConfig: a reader and a member of A, a member of B, the admin of
// project C and a system reader.
func idConfig(t testing.TB, ttl time.Duration) Config {
	t.Helper()
	c := Config{TokenTTL: ttl, Region: "RegionOne", Projects: []Project{{Name: "A"}, {Name: "B"}, {Name: "C"}}}
	h := hash(t, "pw")
	for _, u := range []struct{ name, project, role string }{
		{"reader-a", "A", RoleReader}, {"member-a", "A", RoleMember},
		{"member-b", "B", RoleMember}, {"root", "C", RoleAdmin},
	} {
		c.Users = append(c.Users, User{Name: u.name, PasswordHash: h})
		c.Assignments = append(c.Assignments, Assignment{User: u.name, Project: u.project, Role: u.role})
	}
	c.Users = append(c.Users, User{Name: "auditor", PasswordHash: h})
	c.Assignments = append(c.Assignments, Assignment{User: "auditor", System: true, Role: RoleReader})
	return c
}

func idTokens(t *testing.T, svc *Service) map[string]string {
	t.Helper()
	issue := func(s *Service, user string, scope Scope) string {
		t.Helper()
		tok, err := s.Issue(PasswordAuth{UserName: user, Password: "pw", Scope: scope})
		if err != nil {
			t.Fatalf("issue %s: %v", user, err)
		}
		return tok.ID
	}
	other, err := New(idConfig(t, time.Hour), []byte("another deployment's signing key!"))
	if err != nil {
		t.Fatal(err)
	}
	shortLived, err := New(idConfig(t, time.Microsecond), testKey)
	if err != nil {
		t.Fatal(err)
	}
	expired := issue(shortLived, "root", Scope{ProjectName: "C"})
	testwait.Until(t, "the short-lived token to expire", func() bool {
		_, err := svc.Verify(expired)
		return errors.Is(err, ErrTokenExpired)
	})
	return map[string]string{
		"anonymous": "", "garbage token": "garbage", "garbage": "garbage", "other key's token": issue(other, "root", Scope{ProjectName: "C"}),
		"expired token": expired,
		"reader of A":   issue(svc, "reader-a", Scope{ProjectName: "A"}), "member of B": issue(svc, "member-b", Scope{ProjectName: "B"}),
		"member of A": issue(svc, "member-a", Scope{ProjectName: "A"}), "admin": issue(svc, "root", Scope{ProjectName: "C"}),
		"system reader": issue(svc, "auditor", Scope{System: true}),
	}
}

func TestIdentityAuthMatrix(t *testing.T) {
	svc, err := New(idConfig(t, time.Hour), testKey)
	if err != nil {
		t.Fatal(err)
	}
	tokens := idTokens(t, svc)
	srv := httptest.NewServer(NewAPI(svc, hclog.NewNullLogger()))
	defer srv.Close()
	ids := strings.NewReplacer("{A}", DerivedID("project", "A"), "{B}", DerivedID("project", "B"))
	tried := 0
	for _, rw := range idMatrix {
		for _, caller := range idCallers {
			req, err := http.NewRequest(rw.method, srv.URL+ids.Replace(rw.path), strings.NewReader(rw.body))
			if err != nil {
				t.Fatal(err)
			}
			if tok := tokens[caller]; tok != "" {
				req.Header.Set("X-Auth-Token", tok)
			}
			if rw.subject != "" {
				req.Header.Set("X-Subject-Token", tokens[rw.subject])
			}
			if rw.body != "" {
				req.Header.Set("Content-Type", "application/json")
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			tried++
			want := rw.wantFor(caller)
			if resp.StatusCode != want {
				t.Errorf("%s %s (subject %q) as %s: %d, want %d: %s", rw.method, rw.path, rw.subject, caller, resp.StatusCode, want, body)
				continue
			}
			switch {
			case want == http.StatusUnauthorized && resp.Header.Get("WWW-Authenticate") != `Keystone uri="`+srv.URL+`"`:
				t.Errorf("%s %s as %s: 401 without Keystone's WWW-Authenticate: %q", rw.method, rw.path, caller, resp.Header.Get("WWW-Authenticate"))
			case want == http.StatusForbidden && rw.method != "HEAD" && !strings.Contains(string(body), "You are not authorized"):
				t.Errorf("%s %s as %s: 403 not in Keystone's words: %s", rw.method, rw.path, caller, body)
			case want == http.StatusOK && rw.subject != "" && resp.Header.Get("X-Subject-Token") != tokens[rw.subject]:
				t.Errorf("%s %s as %s: X-Subject-Token %q, want the subject", rw.method, rw.path, caller, resp.Header.Get("X-Subject-Token"))
			}
		}
	}
	t.Logf("%d requests, each answer's status checked", tried)
}

// TestIdentityAuthMatrixCoversEveryRoute: every route of routes() has a
// row, so a route added without deciding who may call it fails here.
func TestIdentityAuthMatrixCoversEveryRoute(t *testing.T) {
	covered := map[string]bool{}
	for _, rw := range idMatrix {
		path, _, _ := strings.Cut(rw.path, "?")
		if strings.HasPrefix(path, "/v3/projects/") {
			path = "/v3/projects/{id}"
		}
		covered[rw.method+" "+path] = true
	}
	rts := (&API{}).routes()
	for _, rt := range rts {
		if !covered[rt.method+" "+rt.path] {
			t.Errorf("route %s %s has no row in idMatrix", rt.method, rt.path)
		}
	}
	if len(rts) < 9 {
		t.Errorf("only %d identity routes", len(rts))
	}
}
