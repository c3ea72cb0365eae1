package scheduler

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/mux"
	"golang.org/x/crypto/bcrypt"

	"github.com/berth-project/berth/identity"
	"github.com/berth-project/berth/internal/testwait"
)

// The authorization matrix of select_destinations: every route of
// Handler as every kind of caller over real HTTP. Only a Berth service
// token of this deployment's key is served; every user token — an
// admin's, project- or system-scoped, included — gets 401 like no token
// at all, since a select claims resources no user may claim directly.
// A route added to Handler needs a row (TestSchedulerAuthMatrixCoversEveryRoute).

type schedRow struct{ method, path, body string }

var schedMatrix = []schedRow{
	{"POST", SelectPath, `{"instance_uuids": ["i-1"], "flavor": {"vcpus": 1, "memory_mb": 512}}`},
}

// schedTokens are the callers' X-Auth-Tokens; "service" is the one that
// may call.
func schedTokens(t *testing.T, key []byte, st *identity.ServiceTokens) map[string]string {
	t.Helper()
	h, err := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	cfg := func(ttl time.Duration) identity.Config {
		c := identity.Config{TokenTTL: ttl, Projects: []identity.Project{{Name: "A"}, {Name: "B"}, {Name: "C"}}}
		for _, u := range []struct{ name, project, role string }{
			{"reader-a", "A", identity.RoleReader}, {"member-a", "A", identity.RoleMember},
			{"member-b", "B", identity.RoleMember}, {"root", "C", identity.RoleAdmin},
		} {
			c.Users = append(c.Users, identity.User{Name: u.name, PasswordHash: string(h)})
			c.Assignments = append(c.Assignments, identity.Assignment{User: u.name, Project: u.project, Role: u.role})
		}
		c.Assignments = append(c.Assignments, identity.Assignment{User: "root", System: true, Role: identity.RoleAdmin})
		return c
	}
	mk := func(k []byte, ttl time.Duration) *identity.Service {
		s, err := identity.New(cfg(ttl), k)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	users, other, shortLived := mk(key, time.Hour), mk([]byte("another deployment's signing key!"), time.Hour), mk(key, time.Microsecond)
	issue := func(s *identity.Service, user string, scope identity.Scope) string {
		t.Helper()
		tok, err := s.Issue(identity.PasswordAuth{UserName: user, Password: "pw", Scope: scope})
		if err != nil {
			t.Fatalf("issue %s: %v", user, err)
		}
		return tok.ID
	}
	expired := issue(shortLived, "root", identity.Scope{ProjectName: "C"})
	testwait.Until(t, "the short-lived token to expire", func() bool {
		_, err := users.Verify(expired)
		return errors.Is(err, identity.ErrTokenExpired)
	})
	foreign, err := identity.NewServiceTokens([]byte("another deployment's signing key"))
	if err != nil {
		t.Fatal(err)
	}
	foreignSvc, err := foreign.Mint()
	if err != nil {
		t.Fatal(err)
	}
	svcTok, err := st.Mint()
	if err != nil {
		t.Fatal(err)
	}
	return map[string]string{
		"anonymous": "", "garbage token": "garbage", "other key's token": issue(other, "root", identity.Scope{ProjectName: "C"}),
		"other key's service token": foreignSvc, "expired token": expired,
		"reader of A":  issue(users, "reader-a", identity.Scope{ProjectName: "A"}),
		"member of B":  issue(users, "member-b", identity.Scope{ProjectName: "B"}),
		"member of A":  issue(users, "member-a", identity.Scope{ProjectName: "A"}),
		"admin":        issue(users, "root", identity.Scope{ProjectName: "C"}),
		"system admin": issue(users, "root", identity.Scope{System: true}),
		"service":      svcTok,
	}
}

func TestSchedulerAuthMatrix(t *testing.T) {
	c := newCloud(t)
	c.addHost("a", "cell1", 4, 4096, false)
	key := []byte("0123456789abcdef0123456789abcdef")
	st, err := identity.NewServiceTokens(key)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(RequireServiceToken(c.scheduler(DefaultConfig()).Handler(), st, nil))
	defer srv.Close()
	tokens := schedTokens(t, key, st)
	tried := 0
	for _, rw := range schedMatrix {
		for caller, tok := range tokens {
			if caller == "service" {
				continue // last: it claims
			}
			tried++
			status, body := schedCall(t, srv.URL, rw, tok)
			if status != http.StatusUnauthorized || !strings.Contains(body, "service token") {
				t.Errorf("%s %s as %s: %d %s, want 401 asking for a service token", rw.method, rw.path, caller, status, body)
			}
		}
		if u := c.usage("a"); u != 0 {
			t.Fatalf("refused callers claimed %d vCPUs", u)
		}
		tried++
		if status, body := schedCall(t, srv.URL, rw, tokens["service"]); status != http.StatusOK {
			t.Errorf("%s %s as the service: %d %s, want 200", rw.method, rw.path, status, body)
		}
	}
	if u := c.usage("a"); u != 1 {
		t.Errorf("the service's select claimed %d vCPUs, want 1", u)
	}
	t.Logf("%d requests, each answer checked", tried)
}

func schedCall(t *testing.T, url string, rw schedRow, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(rw.method, url+rw.path, strings.NewReader(rw.body))
	if err != nil {
		t.Fatal(err)
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
	return resp.StatusCode, string(b)
}

// TestSchedulerAuthMatrixCoversEveryRoute: every route Handler serves
// has a row in schedMatrix.
func TestSchedulerAuthMatrixCoversEveryRoute(t *testing.T) {
	c := newCloud(t)
	r, ok := c.scheduler(DefaultConfig()).Handler().(*mux.Router)
	if !ok {
		t.Fatal("Handler is no longer a *mux.Router: walk its routes another way")
	}
	covered := map[string]bool{}
	for _, rw := range schedMatrix {
		covered[rw.method+" "+rw.path] = true
	}
	n := 0
	if err := r.Walk(func(rt *mux.Route, _ *mux.Router, _ []*mux.Route) error {
		tmpl, err := rt.GetPathTemplate()
		if err != nil {
			return err
		}
		methods, err := rt.GetMethods()
		if err != nil {
			return err
		}
		for _, m := range methods {
			n++
			if !covered[m+" "+tmpl] {
				t.Errorf("route %s %s has no row in schedMatrix", m, tmpl)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Error("walked no routes")
	}
}
