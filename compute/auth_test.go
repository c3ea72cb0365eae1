package compute

import (
	"net/http/httptest"
	"testing"

	"github.com/berth-project/berth/identity"
)

// TestAuthorize checks each of Nova's default check strings against
// each kind of caller, for a resource of project A, through reqCtx.can
// as a handler that loaded the resource calls it (no route owns
// project resources yet; the matrix covers the routes).
func TestAuthorize(t *testing.T) {
	creds := map[string]identity.Credentials{
		"admin of C":         {ProjectID: "C", Roles: []string{"admin", "member", "reader"}},
		"system admin":       {System: true, Roles: []string{"admin", "member", "reader"}},
		"system reader":      {System: true, Roles: []string{"reader"}},
		"member of A":        {ProjectID: "A", Roles: []string{"member", "reader"}},
		"reader of A":        {ProjectID: "A", Roles: []string{"reader"}},
		"member of B":        {ProjectID: "B", Roles: []string{"member", "reader"}},
		"unscoped, no roles": {},
	}
	// want: the callers allowed, per policy.
	for _, tc := range []struct {
		p    policy
		want []string
	}{
		{policy{}, []string{"admin of C", "system admin", "system reader", "member of A", "reader of A", "member of B", "unscoped, no roles"}},
		{adminOnly("r:admin"), []string{"admin of C", "system admin"}},
		{projectReaderOrAdmin("r:read"), []string{"admin of C", "system admin", "member of A", "reader of A"}},
		{projectMemberOrAdmin("r:write"), []string{"admin of C", "system admin", "member of A"}},
	} {
		allowed := map[string]bool{}
		for _, w := range tc.want {
			allowed[w] = true
		}
		for name, cr := range creds {
			c := &reqCtx{r: httptest.NewRequest("GET", "/", nil), creds: cr, api: &API{}}
			f := c.can(tc.p, "A")
			if (f == nil) != allowed[name] {
				t.Errorf("policy %q (kind %d) for %s: %v, want allowed=%v", tc.p.rule, tc.p.kind, name, f, allowed[name])
			}
			if f != nil && (f.status != 403 || f.message != "Policy doesn't allow "+tc.p.rule+" to be performed.") {
				t.Errorf("refusal: %d %q", f.status, f.message)
			}
		}
	}
}

// TestNoAuthCredentials: noauth2's reading of X-Auth-Token.
func TestNoAuthCredentials(t *testing.T) {
	for _, tc := range []struct {
		desc          string
		hdr           map[string]string
		user, project string
		admin         bool
	}{
		{desc: "user:project", hdr: map[string]string{"X-Auth-Token": "alice:p1"}, user: "alice", project: "p1"},
		{desc: "user alone is its project", hdr: map[string]string{"X-Auth-Token": "alice"}, user: "alice", project: "alice"},
		{desc: "admin", hdr: map[string]string{"X-Auth-Token": "admin:p2"}, user: "admin", project: "p2", admin: true},
		{desc: "no token: the one Nova's 204 hands out", user: "admin", project: "admin", admin: true},
		{desc: "no token, X-Auth-User and -Project-Id", hdr: map[string]string{"X-Auth-User": "u", "X-Auth-Project-Id": "p"}, user: "u", project: "p"},
		{desc: "keystoneauth's none plugin", hdr: map[string]string{"X-Auth-Token": "notused"}, user: "notused", project: "notused"},
	} {
		r := httptest.NewRequest("GET", "/v2.1/flavors", nil)
		for k, v := range tc.hdr {
			r.Header.Set(k, v)
		}
		c := identity.NoAuthCredentials(r)
		if c.UserID != tc.user || c.ProjectID != tc.project || c.HasRole("admin") != tc.admin || !c.HasRole("member") {
			t.Errorf("%s: %+v", tc.desc, c)
		}
	}
}
