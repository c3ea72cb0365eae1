package httpapi

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/berth-project/berth/identity"
)

// TestKeystoneAuth: in keystone mode Placement takes the identity API's
// tokens with the roles they carry: an admin may write, a project reader
// may not (Placement's default policy, 403), and a request without a
// valid token gets keystonemiddleware's 401 before any route runs.
func TestKeystoneAuth(t *testing.T) {
	h, err := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := identity.New(identity.Config{
		Users:    []identity.User{{Name: "root", PasswordHash: string(h)}, {Name: "viewer", PasswordHash: string(h)}},
		Projects: []identity.Project{{Name: "ops"}},
		Assignments: []identity.Assignment{{User: "root", Project: "ops", Role: identity.RoleAdmin},
			{User: "viewer", Project: "ops", Role: identity.RoleReader}},
		TokenTTL: time.Hour,
	}, []byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	issue := func(user string) string {
		tok, err := svc.Issue(identity.PasswordAuth{UserName: user, Password: "pw", Scope: identity.Scope{ProjectName: "ops"}})
		if err != nil {
			t.Fatal(err)
		}
		return tok.ID
	}
	admin, reader := issue("root"), issue("viewer")
	srv := httptest.NewServer(New(newHTTPService(t), nil, Options{Auth: AuthConfig{Mode: ModeKeystone,
		Verifier: svc.Verifier(), IdentityURI: "http://keystone.test:5000/v3"}}))
	defer srv.Close()
	do := func(method, path, token, body string) (int, string, http.Header) {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		if token != "" {
			req.Header.Set("X-Auth-Token", token)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("OpenStack-API-Version", "placement 1.20")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp.Header
	}
	const rp = `{"name": "cn1", "uuid": "30b6fa4a-8fdb-4b5f-bb4e-4c6fd1b4d7f2"}`
	for _, tc := range []struct {
		desc, method, path, token, body string
		want                            int
	}{
		{"anonymous read", "GET", "/resource_providers", "", "", 401},
		{"garbage token", "GET", "/resource_providers", "garbage", "", 401},
		{"noauth2's admin token", "GET", "/resource_providers", "admin", "", 401},
		{"reader's write", "POST", "/resource_providers", reader, rp, 403},
		{"admin's write", "POST", "/resource_providers", admin, rp, 200},
		{"admin's read", "GET", "/resource_providers/30b6fa4a-8fdb-4b5f-bb4e-4c6fd1b4d7f2", admin, "", 200},
		{"the version document stays open", "GET", "/", "", "", 200},
	} {
		status, body, hdr := do(tc.method, tc.path, tc.token, tc.body)
		if status != tc.want {
			t.Errorf("%s: %d %s, want %d", tc.desc, status, body, tc.want)
		}
		if status == 401 && (hdr.Get("WWW-Authenticate") != `Keystone uri="http://keystone.test:5000/v3"` || !strings.Contains(body, "requires authentication")) {
			t.Errorf("%s: 401 is not keystonemiddleware's: %s %v", tc.desc, body, hdr)
		}
		if status == 403 && !strings.Contains(body, "placement:resource_providers:create") {
			t.Errorf("%s: 403 does not name the rule: %s", tc.desc, body)
		}
	}
}
